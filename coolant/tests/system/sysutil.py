"""Helpers for gpunode's system tests: coolsim and coold, the control API over a Unix socket,
/metrics as coold serves it, a throw-away Docker Engine and a Docker Engine that never answers.
What every component's tests need alike (processes, polling, temp dirs, HTTP, the exposition
parser) is in tests/pylib/gntest.py and re-exported here under the names the tests use.

Everything here binds to loopback or to Unix sockets inside a temp dir, so tests can run in
parallel, and every process started here is stopped again by whoever started it (the fixtures).
"""

import http.client
import json
import os
import shutil
import socket
import subprocess
import tarfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

import gntest
from gntest import (  # noqa: F401 - re-exported for the tests
    SANITIZER_MARKERS,
    Proc,
    Response,
    TestUsers,
    build_dir,
    free_port,
    http_call,
    run,
    scrape,
    short_tmpdir,
    wait_for,
)


def binary(name, for_user=None):
    """Path of one of coolant's programs in the build dir; fails the test if it is missing. For a
    test user (a (uid, gid) other than root's), a copy where that user can run it
    (gntest.reachable_copy)."""
    path = gntest.need_built(build_dir() / "coolant" / name / name, name, executable=True)
    if for_user and for_user[0] != 0:
        path = gntest.reachable_copy(path) / name
    return str(path)


# ---- HTTP over a Unix socket (coold's control API) and /metrics ----


def api(socket_path, method, path, body=None, timeout=30):
    """A control-API call to coold over its Unix socket."""
    return gntest.unix_api(socket_path, method, path, body, timeout)


def parse_metrics(text):
    """gntest.parse_metrics as coolant's tests have always used it: a series given twice is not
    an error here, the last one counts."""
    return gntest.parse_metrics(text, allow_repeats=True)


def metric(samples, name, **labels):
    """The value of one series, or None when it is absent."""
    return samples.get((name, tuple(sorted(labels.items()))))


def metric_series(samples, name):
    """{labels-dict-as-tuple: value} of every series of one family."""
    return {lab: v for (n, lab), v in samples.items() if n == name}


# ---- Docker Engine ----


def make_busybox_tar(path):
    """A one-layer image: busybox-static and a link for each of its applets."""
    bb = shutil.which("busybox") or "/bin/busybox"
    applets = subprocess.run([bb, "--list"], capture_output=True, text=True, check=True)
    with tarfile.open(path, "w") as tar:
        for d in ("bin", "tmp", "ckpt"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        tar.add(bb, arcname="bin/busybox")
        for applet in applets.stdout.split():
            if applet == "busybox":
                continue
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type = tarfile.SYMTYPE
            info.linkname = "busybox"
            tar.addfile(info)


def _unmount_below(path):
    """Lazily unmounts anything a crashed dockerd left mounted under path, deepest first, so the
    dir can be removed."""
    path = os.path.realpath(path)
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp == path or mp.startswith(path + "/"):
                mounts.append(mp)
    for mp in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", mp], capture_output=True)


class Dockerd:
    """A private Docker Engine (TESTBED.md) in its own dir: vfs storage, no networking, its own
    config file so the host's /etc/docker/daemon.json cannot interfere."""

    IMAGE = "gpunode-busybox:1"

    def __init__(self):
        self.dir = short_tmpdir("gn-dockerd-")
        self.socket = str(self.dir / "docker.sock")
        self.host = f"unix://{self.socket}"
        (self.dir / "daemon.json").write_text("{}\n")
        exe = shutil.which("dockerd")
        if not exe:
            import pytest

            pytest.fail("dockerd not found (scripts/install-deps.sh installs docker.io)")
        # The Debian CLI matches the Debian daemon; another docker on PATH may be newer.
        self.cli = "/usr/bin/docker" if os.access("/usr/bin/docker", os.X_OK) else "docker"
        self.proc = Proc(
            [
                exe, "--iptables=false", "--ip6tables=false", "--bridge=none",
                "--storage-driver=vfs", f"--config-file={self.dir}/daemon.json",
                f"--data-root={self.dir}/data", f"--exec-root={self.dir}/exec",
                "-H", self.host, f"--pidfile={self.dir}/pid",
            ],
            self.dir / "dockerd.log",
        )
        try:
            wait_for(self._ping, 60, "dockerd to answer /_ping")
            tar = self.dir / "rootfs.tar"
            make_busybox_tar(tar)
            self.docker("import", tar, self.IMAGE, timeout=60)
        except BaseException:
            self.stop()
            raise

    def _ping(self):
        if not self.proc.running():
            raise AssertionError(f"dockerd exited:\n{self.proc.tail()}")
        return api(self.socket, "GET", "/_ping", timeout=2).status == 200

    def docker(self, *args, timeout=60):
        """Runs the docker CLI against this engine; fails the test on a non-zero exit."""
        r = run([self.cli, *args], timeout=timeout, env={"DOCKER_HOST": self.host})
        if r.returncode != 0:
            raise AssertionError(f"docker {' '.join(map(str, args))} failed: {r.stderr}")
        return r.stdout.strip()

    def running(self, name):
        """Whether the container is running, from the Engine API."""
        r = api(self.socket, "GET", f"/containers/{name}/json", timeout=10)
        return r.status == 200 and r.json()["State"]["Running"]

    def remove_all(self):
        ids = self.docker("ps", "-aq").split()
        if ids:
            self.docker("rm", "-f", *ids)

    def stop(self):
        if self.proc.running():
            try:
                self.remove_all()
            except Exception:  # noqa: BLE001 - best effort before the engine goes
                pass
        self.proc.stop(timeout=30)
        _unmount_below(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)


class SilentEngine:
    """A Unix socket that accepts connections and never answers: a Docker Engine that hangs."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(64)
        self.accepted = 0
        self._conns = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted += 1
            self._conns.append(conn)  # held open, never read from, never answered

    def close(self):
        self._stop = True
        self._thread.join(timeout=5)
        for c in self._conns:
            c.close()
        self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


# ---- coolsim and coold ----


class Coolsim:
    """coolsim playing one scenario on a pty whose slave is reached through a symlink."""

    def __init__(self, workdir, scenario, duration=None, seed=1, eeprom=None, extra=(), name=None):
        name = name or f"coolsim-{scenario}"
        self.scenario = scenario
        self.link = Path(workdir) / f"{name}.tty"
        self.report_path = Path(workdir) / f"{name}.report.json"
        argv = [binary("coolsim"), "--scenario", scenario, "--link", self.link,
                "--report", self.report_path, "--seed", seed]
        if duration is not None:
            argv += ["--duration", duration]
        if eeprom is not None:
            argv += ["--eeprom", eeprom]
        argv += list(extra)
        self.proc = Proc(argv, Path(workdir) / f"{name}.log")
        wait_for(self._link_ready, 10, f"coolsim to create {self.link}", interval=0.02)

    def _link_ready(self):
        if not self.proc.running():
            raise AssertionError(f"coolsim exited early:\n{self.proc.tail()}")
        return os.path.exists(self.link)

    def wait(self, timeout):
        """Waits for coolsim to end by itself (a cut, or --duration); returns its exit status."""
        return self.proc.wait(timeout)

    def stop(self):
        return self.proc.stop()

    def report(self):
        """The --report JSON, once coolsim has ended."""
        try:
            return json.loads(self.report_path.read_text())
        except (FileNotFoundError, ValueError) as exc:
            raise AssertionError(f"no usable coolsim report ({exc}); log:\n{self.proc.tail()}")


SHUTDOWN_STAGES = ["jobs", "announce", "containers", "wait", "halt", "command"]

# The default shutdown command: it only records that it ran, so a test can count the runs.
RECORDER = """#!/bin/sh
echo "ran $(date +%s.%N)" >> {log}
"""


class Coold:
    """coold with a config of its own in workdir: control socket, audit log, hooks dir, metrics
    port and a shutdown command that records each run instead of powering anything off. Its
    Docker Engine and gpuqd are paths in workdir where nothing is, unless given."""

    def __init__(self, workdir, device, name="coold", docker_socket=None, gpuqd_socket=None,
                 admin_group=None, command_script=None, args=(), overrides=None, wait=True,
                 env=None):
        self.workdir = Path(workdir)
        self.name = name
        self.socket = str(self.workdir / f"{name}.sock")
        self.port = free_port()
        self.audit_log = self.workdir / f"{name}.audit.log"
        self.hooks_dir = self.workdir / f"{name}.hooks.d"
        self.hooks_dir.mkdir(exist_ok=True)
        self.command_log = self.workdir / f"{name}.command.log"
        script = self.workdir / f"{name}.shutdown.sh"
        script.write_text(command_script or RECORDER.format(log=self.command_log))
        script.chmod(0o755)
        if docker_socket is None:
            # No engine on this "host": a path where nothing listens.
            docker_socket = str(self.workdir / "no-docker.sock")
        if gpuqd_socket is None:
            # Nor a gpuqd: never the host's own at the default path, which a test must not drain.
            gpuqd_socket = str(self.workdir / "no-gpuq.sock")
        sections = {
            "controller": {
                "device": str(device), "baud": "115200", "poll_interval": "1s",
                "stale_after": "3s", "dead_after": "10s",
            },
            "metrics": {"listen": f"127.0.0.1:{self.port}"},
            "control": {
                "socket": self.socket, "admin_group": admin_group or "root",
                "audit_log": str(self.audit_log),
            },
            "shutdown": {
                "command": str(script), "hooks_dir": str(self.hooks_dir),
                "docker_socket": docker_socket, "gpuqd_socket": gpuqd_socket,
                "container_grace": "10s",
                "halt_within": "5s", "drill": "no",
            },
        }
        for key, value in (overrides or {}).items():
            section, _, k = key.partition(".")
            if value is None:
                sections[section].pop(k, None)
            else:
                sections[section][k] = str(value)
        self.config = self.workdir / f"{name}.conf"
        self.config.write_text(
            "".join(
                f"[{sec}]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items()) + "\n"
                for sec, keys in sections.items()
            )
        )
        self.proc = Proc([binary("coold"), "--config", self.config, *args],
                         self.workdir / f"{name}.log", env=env)
        if wait:
            wait_for(self._ready, 20, f"{name} to serve its control socket and /metrics")

    def _ready(self):
        if not self.proc.running():
            raise AssertionError(f"coold exited early:\n{self.proc.tail()}")
        if not os.path.exists(self.socket):
            return False
        return (api(self.socket, "GET", "/v1/status", timeout=3).status == 200
                and scrape(self.port, timeout=3).status == 200)

    # -- the control API --

    def get(self, path, timeout=30):
        return api(self.socket, "GET", path, timeout=timeout)

    def put(self, path, body, timeout=30):
        return api(self.socket, "PUT", path, body, timeout=timeout)

    def post(self, path, body=None, timeout=150):
        return api(self.socket, "POST", path, body, timeout=timeout)

    def status(self):
        r = self.get("/v1/status")
        assert r.status == 200, r
        return r.json()

    def settings(self):
        r = self.get("/v1/settings")
        assert r.status == 200, r
        return r.json()["settings"]

    def events(self, limit=0):
        r = self.get(f"/v1/events?limit={limit}" if limit else "/v1/events")
        assert r.status == 200, r
        return r.json()["events"]

    def metrics(self):
        r = scrape(self.port)
        assert r.status == 200, r
        return parse_metrics(r.text())

    def wait_up(self, timeout=15):
        """Waits until the link is up and the first telemetry has arrived; returns the status."""
        def up():
            s = self.status()
            return s if s["controller"]["link"] == "up" and s["telemetry"] else None
        return wait_for(up, timeout, f"{self.name}: controller link up with telemetry")

    def command_runs(self):
        """Lines the shutdown command wrote (one per run with the default recorder)."""
        try:
            return self.command_log.read_text().splitlines()
        except FileNotFoundError:
            return []

    def stop(self):
        return self.proc.stop()


def crc16(data):
    """CRC-16/CCITT-FALSE (docs/protocol.md §1): crc16(b"123456789") == 0x29B1."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def write_eeprom(path, settings, pumps=2):
    """An EEPROM image for coolsim --eeprom: key=value lines, then crc=XXXX over the bytes before
    it; settings not named keep their factory defaults."""
    body = f"pumps={pumps}\n" + "".join(f"{k}={v}\n" for k, v in settings.items())
    Path(path).write_text(body + f"crc={crc16(body.encode()):04X}\n")
    return path
