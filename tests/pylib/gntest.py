"""What every component's system tests need alike: the build under test, temp dirs and ports,
polling, processes with a log file, one-shot commands, HTTP requests and the Prometheus
exposition parser. Component helpers (coolant/tests/system/sysutil.py,
gpumon/tests/system/gpumonutil.py) import from here and add their own programs.

Standard library only, and pytest is imported only where a test is failed, so a script can use
these helpers outside pytest too.
"""

import ctypes
import gzip
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# capsule reads the node's /etc/capsule.conf first. On a node where quickstart has run, it sends
# every pull through the node cache: the tests run capsule with its settings alone, from
# their own files, as they would on a fresh machine (a test of the node's settings passes its
# own file here).
os.environ["CAPSULE_SYSTEM_CONFIG"] = "/nonexistent/gpunode-tests/capsule.conf"

# Sanitizer reports that make a run fail even when the program's exit status hides them.
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")

# ---- the build under test ----


def build_dir():
    """The build directory whose binaries are under test: $GPUNODE_BUILD, else <repo>/build."""
    return Path(os.environ.get("GPUNODE_BUILD", REPO / "build")).resolve()


def need_built(path, what, executable=False):
    """Returns path (a Path) when the build made it (and, with `executable`, it can be run);
    fails the test otherwise: a missing artefact means the build under test is broken, not that
    the test is moot, so it must not be skipped."""
    path = Path(path)
    ok = os.access(path, os.X_OK) if executable else path.exists()
    if not ok:
        import pytest

        pytest.fail(f"{what} is not built at {path} (set GPUNODE_BUILD to the build dir)")
    return path


# ---- temp dirs, ports, polling ----


def short_tmpdir(prefix):
    """A fresh temp dir with a short path under /tmp: Unix socket paths are limited to 107 bytes,
    and pytest's tmp_path can be longer than that. World-traversable so a process started as a
    test user can reach the files and sockets inside it."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


_reachable = {}


def reachable_copy(*paths):
    """A folder any user can enter holding copies of `paths` (files or folders, by their base
    names), for a program run as a test user: the checkout may sit below a directory only root can
    enter (/root, mktemp -d), so that user could not run or read the originals. Programs that find
    each other beside themselves (capsule and capsule-pull) are copied together. Made once per set
    of paths in a process, and removed when it exits."""
    key = tuple(str(Path(p).resolve()) for p in paths)
    if key not in _reachable:
        import atexit
        import shutil

        d = short_tmpdir("gn-reach-")
        atexit.register(shutil.rmtree, d, ignore_errors=True)
        for src in map(Path, key):
            if src.is_dir():
                shutil.copytree(src, d / src.name, symlinks=True)
            else:
                shutil.copy2(src, d / src.name)
        subprocess.run(["chmod", "-R", "a+rX", str(d)], check=True)
        _reachable[key] = d
    return _reachable[key]


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ProcessDied(AssertionError):
    """A program under test exited while the test still needed it; wait_for() gives up at once
    instead of polling a dead peer until the timeout."""


def wait_for(predicate, timeout, what, interval=0.1):
    """Polls predicate() until it returns something truthy (returned) or timeout seconds pass
    (AssertionError naming `what`). An exception from predicate counts as "not yet"; the last one
    is quoted in the failure so a broken peer is easy to tell from a slow one. ProcessDied is
    re-raised at once."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except ProcessDied:
            raise
        except Exception as exc:  # noqa: BLE001 - any other failure means "not yet"
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_exc!r})" if last_exc else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what}{detail}")
        time.sleep(interval)


# ---- processes ----


def _die_with_parent():
    # PR_SET_PDEATHSIG: a child must not outlive a pytest that was killed mid-run.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM, 0, 0, 0)


class Proc:
    """A program started for a test, its stdout and stderr in one log file. Its environment is
    ours updated with `env`, or `env` alone with replace_env."""

    def __init__(self, argv, log_path, env=None, cwd=None, replace_env=False):
        self.argv = [str(a) for a in argv]
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "ab")
        full_env = {} if replace_env else dict(os.environ)
        full_env.update(env or {})
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=cwd,
            preexec_fn=_die_with_parent,
        )
        self.pid = self.popen.pid

    def log(self):
        """The program's output so far, as text."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines=40):
        return "\n".join(self.log().splitlines()[-lines:])

    def running(self):
        return self.popen.poll() is None

    def wait(self, timeout):
        """Waits for the program to exit by itself; returns its status or fails the test."""
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.argv[0]} still running after {timeout}s; log:\n{self.tail()}"
            ) from None

    def stop(self, timeout=15):
        """SIGTERM, then SIGKILL after `timeout` seconds. Returns the exit status (negative for
        a signal, as subprocess reports it)."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._log.close()
        return self.popen.returncode

    def sanitizer_report(self):
        """The first sanitizer report line in the log, or None."""
        for line in self.log().splitlines():
            if any(m in line for m in SANITIZER_MARKERS):
                return line
        return None


def as_user(user, argv):
    """argv run as `user`, a (uid, gid) pair, through setpriv, so that supplementary groups come
    from /etc/group as they would for a login; argv itself when user is None."""
    argv = [str(a) for a in argv]
    if user is None:
        return argv
    uid, gid = user
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups", "--"] + argv


def run(argv, timeout=30, user=None, env=None, check=False, unset=()):
    """Runs a command to completion and returns CompletedProcess with text output. `user` is a
    (uid, gid) pair to run it as (as_user). The environment is ours less `unset`, updated with
    `env`. NO_COLOR is set unless `env` says otherwise, so output is plain even where a program
    would colour it."""
    argv = as_user(user, argv)
    full_env = {k: v for k, v in os.environ.items() if k not in unset}
    full_env.update(env or {})
    full_env.setdefault("NO_COLOR", "1")
    return subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        check=check,
    )


# ---- test users ----


class TestUsers:
    """Local users and groups for one pytest session, named "<prefix><role>-<pid>" (the plain and
    the sanitizer runs go side by side, each with its own), made on first use without a home
    directory, and removed by remove(). Those that an earlier session whose process is gone left
    behind (killed before its teardown) are removed first, so names never collide."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.users, self.groups = {}, {}
        self._remove_stale()

    def _stale(self, name):
        if not name.startswith(self.prefix) or "-" not in name[len(self.prefix):]:
            return False
        pid = name.rsplit("-", 1)[1]
        return pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists()

    def _remove_stale(self):
        import grp
        import pwd

        for pw in pwd.getpwall():
            if self._stale(pw.pw_name):
                subprocess.run(["userdel", pw.pw_name], capture_output=True)
        for gr in grp.getgrall():
            if self._stale(gr.gr_name):
                subprocess.run(["groupdel", gr.gr_name], capture_output=True)

    def name(self, role):
        """The login name of a role."""
        return f"{self.prefix}{role}-{os.getpid()}"

    def group(self, role):
        """A group's name, made if missing: "<prefix>g<role>-<pid>"."""
        name = self.name(f"g{role}")
        if role not in self.groups:
            subprocess.run(["groupadd", name], check=True, capture_output=True)
            self.groups[role] = name
        return name

    def user(self, role, group=None):
        """(uid, gid) of the role's user (primary group nogroup), made if missing, also in the
        group of role `group`."""
        import pwd

        name = self.name(role)
        if role not in self.users:
            argv = ["useradd", "-M", "-N", "-g", "nogroup"]
            if group:
                argv += ["-G", self.group(group)]
            subprocess.run(argv + [name], check=True, capture_output=True)
            self.users[role] = name
        pw = pwd.getpwnam(name)
        return pw.pw_uid, pw.pw_gid

    def remove(self):
        for name in self.users.values():
            subprocess.run(["userdel", name], capture_output=True)
        for name in self.groups.values():
            subprocess.run(["groupdel", name], capture_output=True)
        self.users, self.groups = {}, {}


# ---- HTTP ----


class Response:
    """One HTTP response: status, headers (names lower-cased) and the body as sent."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def text(self):
        """The body as text, gunzipped when it was sent with Content-Encoding: gzip."""
        body = self.body
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        return body.decode()

    def json(self):
        return json.loads(self.text())

    def __repr__(self):
        return f"<Response {self.status} {self.headers} {self.body[:200]!r}>"


def http_call(conn, method, path, body=None, headers=None, close=True):
    """One request on `conn`; returns Response. A dict or list body is sent as JSON. The
    connection is closed afterwards unless close=False (a keep-alive test reuses it)."""
    headers = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
    finally:
        if close:
            conn.close()


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over AF_UNIX: the host name only fills the Host header."""

    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = str(path)

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.unix_path)
        self.sock = sock


def unix_api(socket_path, method, path, body=None, timeout=30):
    """One call to a daemon's control API over its Unix socket (as this process's user)."""
    return http_call(UnixHTTPConnection(socket_path, timeout=timeout), method, path, body)


def request(port, path="/metrics", method="GET", accept=None, accept_encoding=None, timeout=10,
            conn=None):
    """One request to 127.0.0.1:port; a fresh connection unless `conn` (keep-alive) is given,
    which is left open. The body is returned as sent (Response.text() gunzips)."""
    headers = {}
    if accept:
        headers["Accept"] = accept
    if accept_encoding:
        headers["Accept-Encoding"] = accept_encoding
    own = conn is None
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    return http_call(conn, method, path, headers=headers, close=own)


def scrape(port, **kw):
    """GET /metrics on 127.0.0.1:port; the options are request()'s."""
    return request(port, "/metrics", **kw)


# ---- the Prometheus exposition ----

SAMPLE_RE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$"
)
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


def parse_metrics(text, allow_repeats=False):
    """Parses an exposition (text 0.0.4 or OpenMetrics) into {(name, ((label, value), ...)):
    float}, labels sorted. Comment lines are skipped; a malformed sample line raises ValueError,
    since a scraper would choke on it too, and so does a series given twice unless
    allow_repeats (then the last one counts)."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            raise ValueError(f"malformed sample line: {line!r}")
        labels = []
        raw = m.group("labels") or ""
        pos = 0
        while pos < len(raw):
            lm = _LABEL_RE.match(raw, pos)
            if not lm:
                raise ValueError(f"malformed labels in: {line!r}")
            labels.append((lm.group(1), lm.group(2)))
            pos = lm.end()
        key = (m.group("name"), tuple(sorted(labels)))
        if key in samples and not allow_repeats:
            raise ValueError(f"series given twice: {line!r}")
        samples[key] = float(m.group("value"))
    return samples
