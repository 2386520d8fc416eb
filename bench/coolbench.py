#!/usr/bin/python3
"""coold benchmarks: alarm reaction, /metrics latency, idle cost. Not tests: no pass/fail.

Run through bench/run, which sets up the process-group cleanup; see bench/README.md. Standard
library only (Debian's python3), so it runs on a node without pip.

Every figure is printed next to a peer measured in the same invocation:
  1. alarm -> first shutdown stage and -> shutdown command, against the controller's cut delay
     and against NUT (Debian's 2.8.0): a private dummy-ups + upsd + upsmon (primary, default
     POLLFREQ and FINALDELAY) started per run in the temp dir, whose device goes from OL to
     "OB LB"; its first NOTIFYCMD and its SHUTDOWNCMD (FINALDELAY included) are timed alike
  2. /metrics latency, against prometheus-node-exporter
  3. idle CPU and RSS, against prometheus-node-exporter
"""

import argparse
import http.client
import math
import os
import pty
import random
import secrets
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tty

# NUT, the peer of part 1. Debian installs the daemons themselves under /lib/nut (/usr/sbin/upsd
# and upsmon are wrappers that read /etc/nut/nut.conf, which the bench leaves alone).
NUT_DIR = "/lib/nut"
NUT_PIDPATH = "/run/nut"  # built into Debian's upsmon: its pid file goes there, whatever the env
NUT_UPS = "bench"
NUT_PHASE_S = 5.0  # the event lands at a random point of one upsmon poll cycle (POLLFREQ 5 s)
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


# ---------------------------------------------------------------------------------------------
# Protocol (docs/protocol.md): frames and CRC-16/CCITT-FALSE, written from the spec.


def crc16_ccitt_false(data: bytes) -> int:
    """Polynomial 0x1021, init 0xFFFF, no reflection, no final XOR (protocol §1)."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


assert crc16_ccitt_false(b"123456789") == 0x29B1, "CRC check value from protocol §1"


def make_frame(body: str) -> bytes:
    raw = body.encode("ascii")
    return b"$" + raw + b"*%04X\r\n" % crc16_ccitt_false(raw)


def parse_body(body: str):
    """Returns (kind, id, verb, fields) or None for a body that does not follow §2."""
    toks, i, n = [], 0, len(body)
    while i < n:
        if body[i] == " ":
            i += 1
            continue
        j = i
        while j < n and body[j] != " ":
            if body[j] == '"':  # quoted value: runs to the closing quote, spaces included
                k = body.find('"', j + 1)
                if k < 0:
                    return None
                j = k + 1
            else:
                j += 1
        toks.append(body[i:j])
        i = j
    if len(toks) < 3 or toks[0] not in ("Q", "R", "E") or not toks[1].isdigit():
        return None
    fields = {}
    for t in toks[3:]:
        k, sep, v = t.partition("=")
        if not sep:
            return None
        fields[k] = v[1:-1] if v.startswith('"') else v
    return toks[0], int(toks[1]), toks[2], fields


class FrameReader:
    """Splits a byte stream into valid frame bodies (§1 resynchronisation, CRC checked)."""

    def __init__(self):
        self.buf = bytearray()
        self.rejected = 0

    def feed(self, data: bytes):
        self.buf += data
        out = []
        while True:
            start = self.buf.find(b"$")
            if start < 0:
                self.buf.clear()
                return out
            del self.buf[:start]
            end = self.buf.find(b"\n")
            if end < 0:
                if len(self.buf) > 256:
                    self.buf.clear()
                    self.rejected += 1
                return out
            line = bytes(self.buf[: end + 1])
            del self.buf[: end + 1]
            line = line[1:].rstrip(b"\n").rstrip(b"\r")
            if b"$" in line:  # an abandoned frame: the inner '$' starts the real one
                line = line[line.rfind(b"$") + 1 :]
                self.rejected += 1
            body, star, crc = line.rpartition(b"*")
            try:
                ok = star and len(crc) == 4 and int(crc, 16) == crc16_ccitt_false(body)
            except ValueError:
                ok = False
            if ok:
                out.append(body.decode("ascii"))
            else:
                self.rejected += 1


# ---------------------------------------------------------------------------------------------
# A cooling controller played by this process on a pty.

SETTINGS = {
    "pump.1.curve": "30:40,45:70,55:100",
    "pump.2.curve": "30:40,45:70,55:100",
    "pump.1.min_duty": "20",
    "pump.2.min_duty": "20",
    "limit.warning": "45.00",
    "limit.precritical": "55.00",
    "limit.critical": "60.00",
    "limit.flow_min": "4.00",
    "limit.cut_delay": "30",
    "limit.halt_max": "120",
    "host.timeout": "10",
}


class FakeController:
    """Answers HELLO/STATUS/PING/GET/SET/HALT, sends HB every second and, once raised, an ALARM
    every second with the time left (§7). One thread reads and sends the periodic events; any
    thread may raise the alarm. Writes are serialised by a lock so frames never interleave."""

    def __init__(self, link_path: str):
        self.master, self.slave = pty.openpty()
        tty.setraw(self.slave)  # no echo, no CR/LF mangling before coold sets its own termios
        os.symlink(os.ttyname(self.slave), link_path)
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.seq = 0
        self.cut_at = None  # monotonic time of the scheduled cut
        self.next_alarm = None
        self.halt = False
        self.first_alarm_wall = None
        self.halt_wall = None
        self.hello_n = 0
        self.status_n = 0
        self.reader = FrameReader()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def close(self):
        self.stop.set()
        self.thread.join(timeout=3)
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass

    def _write(self, body: str) -> float:
        """Writes one frame; returns the wall time right after its last byte was written."""
        data = make_frame(body)
        with self.lock:
            view = memoryview(data)
            while view:
                n = os.write(self.master, view)
                view = view[n:]
            return time.time()

    def _event(self, verb_and_fields: str) -> float:
        with self.lock:
            seq = self.seq
            self.seq = (self.seq + 1) % 65536
        return self._write(f"E {seq} {verb_and_fields}")

    def _cut_in(self, now: float) -> str:
        return "-" if self.cut_at is None else str(max(0, round(self.cut_at - now)))

    def _alarm_body(self, now: float) -> str:
        return f"ALARM level=precritical reason=pump_stopped pump=2 cut_in={self._cut_in(now)}"

    def raise_alarm(self, cut_in: int) -> float:
        """Pump 2 stops: sends the first ALARM now. Returns the wall time its last byte left."""
        now = time.monotonic()
        with self.lock:
            self.cut_at = now + cut_in
            self.next_alarm = now + 1.0
        t = self._event(self._alarm_body(now))
        self.first_alarm_wall = t
        return t

    def _up(self) -> int:
        return int(time.monotonic() - self.t0)

    def _status(self) -> str:
        now = time.monotonic()
        hot = self.cut_at is not None
        level, reason, rpm2 = ("precritical", "pump_stopped", 0) if hot else ("normal", "none", 2398)
        return (
            f"OK up={self._up()} level={level} reason={reason} cut_in={self._cut_in(now)} "
            f"halt={int(self.halt)} host=ok flow=12.40 t1=31.20 t2=35.05 t3=33.10 "
            f"p1=2410/55 p2={rpm2}/55"
        )

    def _answer(self, rid: int, verb: str, fields: dict) -> str:
        if verb == "HELLO":
            self.hello_n += 1
            return (
                "OK proto=1 fw=2.4.1 model=CT-4 serial=BENCH-0001 pumps=2 "
                "sensors=inlet,outlet,tank caps=curve,limits,halt hb=1"
            )
        if verb == "STATUS":
            self.status_n += 1
            return self._status()
        if verb == "PING":
            return f"OK up={self._up()}"
        if verb == "GET":
            key = fields.get("key")
            if key is None:
                return "ERR code=badframe"
            if key not in SETTINGS:
                return "ERR code=badkey"
            return f"OK {key}={SETTINGS[key]}"
        if verb == "SET":
            if any(k not in SETTINGS for k in fields):
                return "ERR code=badkey"
            return "OK " + " ".join(f"{k}={v}" for k, v in fields.items())
        if verb == "HALT":
            within = fields.get("within", "")
            if not within.isdigit():
                return "ERR code=badframe"
            self.halt = True
            self.halt_wall = time.time()
            now = time.monotonic()
            if self.cut_at is not None:  # §5: the cut moves to min(within, halt_max) from now
                self.cut_at = now + min(int(within), 120)
            return f"OK cut_in={self._cut_in(now)}"
        return "ERR code=badverb"

    def _loop(self):
        next_hb = time.monotonic() + 1.0
        while not self.stop.is_set():
            now = time.monotonic()
            with self.lock:
                due = min(next_hb, self.next_alarm or next_hb)
            try:
                ready, _, _ = select.select([self.master], [], [], max(0.0, min(due - now, 0.2)))
            except OSError:
                return
            if ready:
                try:
                    data = os.read(self.master, 4096)
                except OSError:
                    data = b""
                for body in self.reader.feed(data):
                    msg = parse_body(body)
                    if msg and msg[0] == "Q":
                        self._write(f"R {msg[1]} {self._answer(msg[1], msg[2], msg[3])}")
            now = time.monotonic()
            if now >= next_hb:
                next_hb += 1.0
                level = "precritical" if self.cut_at is not None else "normal"
                self._event(f"HB up={self._up()} level={level}")
            with self.lock:
                alarm_due = self.next_alarm is not None and now >= self.next_alarm
                if alarm_due:
                    self.next_alarm += 1.0
            if alarm_due:
                self._event(self._alarm_body(now))


# ---------------------------------------------------------------------------------------------
# Processes and helpers.


class Procs:
    """Every process this run starts; stop_all() ends them (SIGTERM, then SIGKILL)."""

    def __init__(self):
        self.procs = []

    def start(self, argv, log_path, env=None):
        log = open(log_path, "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        log.close()
        self.procs.append(p)
        return p

    @staticmethod
    def stop(p, timeout=3.0):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=timeout)

    def stop_all(self):
        for p in reversed(self.procs):
            try:
                self.stop(p)
            except Exception:  # keep going: the others must still be stopped
                pass
        self.procs.clear()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def daemon_env():
    env = dict(os.environ)
    for k in ("NOTIFY_SOCKET", "JOURNAL_STREAM", "WATCHDOG_USEC", "WATCHDOG_PID"):
        env.pop(k, None)  # log to stderr, no sd_notify
    return env


def write_coold_config(d: str, device: str, port: int, hooks_dir: str, command: str) -> str:
    path = os.path.join(d, "coold.conf")
    with open(path, "w") as f:
        f.write(
            f"""[controller]
device = {device}
poll_interval = 1s
[metrics]
listen = 127.0.0.1:{port}
[control]
socket = {d}/run/coold.sock
audit_log = {d}/log/audit.log
[shutdown]
command = {command}
hooks_dir = {hooks_dir}
docker_socket = {d}/no-docker.sock
container_grace = 1s
halt_within = 60s
"""
        )
    return path


def wait_until(pred, timeout: float, step: float = 0.02) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


def pct(values, p: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))]


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3g}x" if b > 0 else "n/a (peer is 0)"


def fmt_ms(v: float) -> str:
    return f"{v * 1000:.2f} ms" if v < 10 else f"{v:.3f} s"


# ---------------------------------------------------------------------------------------------
# 1. alarm -> first shutdown stage


def alarm_run(args, tmp: str, idx: int, cut_in: int, procs: Procs):
    d = os.path.join(tmp, f"alarm-{idx}")
    os.makedirs(os.path.join(d, "hooks"))
    stamp = os.path.join(d, "hook.stamp")
    hook = os.path.join(d, "hooks", "10-stamp")
    with open(hook, "w") as f:
        # bash's $EPOCHREALTIME: the wall time without exec'ing date(1).
        f.write(f'#!/bin/bash\necho "$EPOCHREALTIME $1" >> {stamp}\n')
    os.chmod(hook, 0o755)
    done = os.path.join(d, "command.ran")
    link = os.path.join(d, "ctl")
    ctl = FakeController(link)
    conf = write_coold_config(d, link, free_port(), os.path.join(d, "hooks"), f"touch {done}")
    p = None
    try:
        p = procs.start([args.coold, "--config", conf], os.path.join(d, "coold.log"), daemon_env())
        if not wait_until(lambda: ctl.status_n >= 2 or p.poll() is not None, 8):
            return None, "coold did not poll STATUS within 8 s"
        if p.poll() is not None:
            return None, f"coold exited with {p.returncode}"
        # Raise the alarm at a random phase of coold's 1 s poll cycle.
        time.sleep(random.uniform(0.0, 1.0))
        t_alarm = ctl.raise_alarm(cut_in)
        if not wait_until(lambda: os.path.exists(stamp) and os.path.getsize(stamp) > 0, 10, 0.005):
            return None, "the announce hook did not run within 10 s"
        with open(stamp) as f:
            t_hook = float(f.read().split()[0])
        wait_until(lambda: os.path.exists(done), 8)
        halt = ctl.halt_wall - t_alarm if ctl.halt_wall else None
        cmd = os.path.getmtime(done) - t_alarm if os.path.exists(done) else None
        return (t_hook - t_alarm, halt, cmd), None
    finally:
        if p is not None:
            Procs.stop(p)
        ctl.close()


def hook_spawn_cost(tmp: str, n: int = 15) -> float:
    """Median time from just before spawning a stamp hook to its stamp."""
    hook = os.path.join(tmp, "spawn-hook")
    with open(hook, "w") as f:
        f.write('#!/bin/bash\necho "$EPOCHREALTIME"\n')
    os.chmod(hook, 0o755)
    out = []
    for _ in range(n):
        t0 = time.time()
        r = subprocess.run([hook, "precritical"], capture_output=True, text=True, timeout=5)
        out.append(float(r.stdout.split()[0]) - t0)
    return statistics.median(out)


# ---------------------------------------------------------------------------------------------
# 1, peer: NUT's upsmon on a private upsd and dummy-ups driver, all in the temp dir.


class UpsdClient:
    """A plain connection to upsd speaking NUT's network protocol. It never LOGINs, so it is not
    one of the logins a primary upsmon waits for (HOSTSYNC) before it shuts down."""

    def __init__(self, port: int, timeout: float = 2.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.file = self.sock.makefile("rb")

    def ask(self, line: str) -> str:
        self.sock.sendall(line.encode("ascii") + b"\n")
        return self.file.readline().decode(errors="replace").rstrip("\n")

    def var(self, name: str):
        """A variable of the bench UPS, or None for an ERR (DATA-STALE, VAR-NOT-SUPPORTED)."""
        head, quote, rest = self.ask(f"GET VAR {NUT_UPS} {name}").partition('"')
        return rest[:-1] if quote and head.startswith("VAR ") else None

    def logins(self) -> int:
        r = self.ask(f"GET NUMLOGINS {NUT_UPS}").split()
        return int(r[2]) if len(r) == 3 and r[0] == "NUMLOGINS" and r[2].isdigit() else -1

    def close(self):
        self.file.close()
        self.sock.close()


def upsd_connect(port: int, timeout: float):
    end = time.monotonic() + timeout
    while True:
        try:
            return UpsdClient(port)
        except OSError:
            if time.monotonic() > end:
                return None
            time.sleep(0.05)


def nut_unavailable(args):
    """Why the NUT peer cannot run on this machine, or None."""
    missing = [b for b in ("dummy-ups", "upsd", "upsmon")
               if not os.access(os.path.join(args.nut_dir, b), os.X_OK)]
    if missing:
        return (f"{', '.join(missing)} not found in {args.nut_dir} "
                "(apt-get install nut-server nut-client; bench/run does it as root)")
    if os.path.isdir(NUT_PIDPATH):
        # upsmon would write the system's /run/nut/upsmon.pid (and refuse to start next to a
        # running system upsmon): it gets a private mount namespace with its own dir there.
        if not shutil.which("unshare"):
            return f"upsmon writes {NUT_PIDPATH}/upsmon.pid and unshare(1) is missing"
        r = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True,
                           timeout=5)
        if r.returncode != 0:
            return (f"upsmon writes {NUT_PIDPATH}/upsmon.pid whatever its environment says, and "
                    f"no private mount namespace could be made for it (unshare --mount: "
                    f"{r.stderr.strip() or r.returncode}; run as root)")
    return None


def write_script(path: str, body: str, shell: str = "/bin/bash"):
    with open(path, "w") as f:
        f.write(f"#!{shell}\n{body}\n")
    os.chmod(path, 0o755)


def write_nut_config(d: str, port: int) -> dict:
    """Writes a private NUT configuration under d; returns its paths. upsmon.conf sets only what
    the bench needs (MONITOR, the two commands, EXEC added to the default notify flags), so
    POLLFREQ, POLLFREQALERT, FINALDELAY, HOSTSYNC and DEADTIME keep NUT's defaults."""
    paths = {k: os.path.join(d, k) for k in ("conf", "state", "run", "bin")}
    for v in paths.values():
        os.makedirs(v, mode=0o700)
    dev = paths["dev"] = os.path.join(d, "bench.dev")
    with open(dev, "w") as f:
        f.write("ups.status: OL\n")
    # dummy-ups (dummy-once mode, the default for a .dev file) re-reads its file when st_mtime
    # changes, in whole seconds: date the first version back so the rewrite always differs.
    past = time.time() - 3600
    os.utime(dev, (past, past))
    paths["notify_stamp"] = os.path.join(d, "notify.stamp")
    paths["shutdown_stamp"] = os.path.join(d, "shutdown.stamp")
    notify, shutdown = os.path.join(d, "notify"), os.path.join(d, "shutdown")
    # bash's $EPOCHREALTIME, as coold's hook: the wall time without exec'ing date(1).
    write_script(notify, f'echo "$EPOCHREALTIME $NOTIFYTYPE" >> {paths["notify_stamp"]}')
    write_script(shutdown, f'echo "$EPOCHREALTIME" >> {paths["shutdown_stamp"]}')
    # upsmon runs wall(1) on every notification with WALL (a default flag) and before its
    # shutdown; a wall of our own on its PATH keeps those messages off the node's terminals.
    write_script(os.path.join(paths["bin"], "wall"), f"cat >> {d}/wall.log", "/bin/sh")
    password = secrets.token_hex(8)
    flags = "".join(f"NOTIFYFLAG {t} SYSLOG+WALL+EXEC\n"
                    for t in ("ONBATT", "LOWBATT", "FSD", "SHUTDOWN"))
    files = {
        "ups.conf": f'[{NUT_UPS}]\n\tdriver = dummy-ups\n\tport = {dev}\n\tdesc = "coold bench"\n',
        "upsd.conf": f"LISTEN 127.0.0.1 {port}\n",
        "upsd.users": f"[bench]\n\tpassword = {password}\n\tupsmon primary\n",
        "upsmon.conf": f"MONITOR {NUT_UPS}@127.0.0.1:{port} 1 bench {password} primary\n"
                       f'NOTIFYCMD "{notify}"\nSHUTDOWNCMD "{shutdown}"\n{flags}',
    }
    for name, text in files.items():
        fd = os.open(os.path.join(paths["conf"], name), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                     0o600)
        with open(fd, "w") as f:
            f.write(text)
    return paths


def child_pids(pid: int):
    """The processes whose parent is pid (upsmon's unprivileged half, its notifiers)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                st = f.read()
        except OSError:
            continue
        if int(st[st.rfind(")") + 2 :].split()[1]) == pid:
            out.append(int(name))
    return out


def stop_pids(pids):
    """Ends those of pids that are still in this harness's process group: a pid that left it has
    ended and may have been reused by a process that is not ours."""
    def ours(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                st = f.read()
        except OSError:
            return False
        fields = st[st.rfind(")") + 2 :].split()
        return fields[0] != "Z" and int(fields[2]) == os.getpgrp()

    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = [pid for pid in pids if ours(pid)]
        for pid in live:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if not live or wait_until(lambda: not any(ours(pid) for pid in live), 2, 0.05):
            return


def read_stamps(path: str):
    """[(wall time, word)] from a stamp file; [] while it does not exist."""
    try:
        with open(path) as f:
            rows = [line.split() for line in f]
    except FileNotFoundError:
        return []
    return [(float(r[0]), r[1] if len(r) > 1 else "") for r in rows if r]


def nut_start(args, d: str, paths: dict, port: int, procs: Procs, started: list):
    """Starts dummy-ups, upsd and upsmon, appending each to started as it goes (the caller stops
    them); returns (client, info) or raises RuntimeError saying what did not come up."""
    env = daemon_env()
    env.update(NUT_CONFPATH=paths["conf"], NUT_STATEPATH=paths["state"],
               NUT_ALTPIDPATH=paths["state"],
               PATH=paths["bin"] + ":" + env.get("PATH", "/usr/bin:/bin"))

    def log(name):
        return os.path.join(d, name + ".log")

    # -F: stay in the foreground (our process group, no pid file); -u root: run as root after
    # start-up instead of the nut user, who could not enter the bench's private temp dir.
    drv = procs.start([os.path.join(args.nut_dir, "dummy-ups"), "-a", NUT_UPS, "-F", "-u", "root"],
                      log("dummy-ups"), env)
    started.append(drv)
    sock = os.path.join(paths["state"], f"dummy-ups-{NUT_UPS}")
    if not wait_until(lambda: os.path.exists(sock) or drv.poll() is not None, 5, 0.02):
        raise RuntimeError("dummy-ups did not create its socket within 5 s")
    if drv.poll() is not None:
        raise RuntimeError(f"dummy-ups exited with {drv.returncode}")
    started.append(procs.start([os.path.join(args.nut_dir, "upsd"), "-F", "-u", "root"],
                               log("upsd"), env))
    client = upsd_connect(port, 5)
    if client is None:
        raise RuntimeError(f"upsd did not listen on 127.0.0.1:{port} within 5 s")
    try:
        if not wait_until(lambda: client.var("ups.status") == "OL", 5, 0.05):
            raise RuntimeError("upsd did not serve ups.status OL from dummy-ups within 5 s")
        upsmon_argv = [os.path.join(args.nut_dir, "upsmon"), "-F", "-u", "root"]
        if os.path.isdir(NUT_PIDPATH):
            upsmon_argv = ["unshare", "--mount", "sh", "-c",
                           f'mount --bind "$0" {NUT_PIDPATH} && exec "$@"', paths["run"]
                           ] + upsmon_argv
        mon = procs.start(upsmon_argv, log("upsmon"), env)
        started.append(mon)
        # upsmon LOGINs right after it connects, in the same cycle as its first poll.
        if not wait_until(lambda: client.logins() >= 1 or mon.poll() is not None, 8, 0.02):
            raise RuntimeError("upsmon did not log into upsd within 8 s")
        if mon.poll() is not None:
            raise RuntimeError(f"upsmon exited with {mon.returncode}")
        info = {k: client.var(f"driver.{k}")
                for k in ("version", "parameter.mode", "parameter.pollinterval")}
    except BaseException:
        client.close()
        raise
    return client, info


def nut_event(paths: dict, client: UpsdClient) -> dict:
    """Waits a random phase, turns the UPS critical and times NUT's reaction; returns {figure:
    seconds} or raises RuntimeError (OSError if upsd goes away)."""
    # A random phase of upsmon's poll (and of the driver's own 2 s cycle).
    time.sleep(random.uniform(0.0, NUT_PHASE_S))
    new = paths["dev"] + ".new"
    with open(new, "w") as f:
        f.write("ups.status: OB LB\n")
    os.rename(new, paths["dev"])  # atomic: the driver never reads half a file
    t_event = time.time()
    seen = None
    while seen is None and time.time() - t_event < 10:
        st = (client.var("ups.status") or "").split()
        if "OB" in st and "LB" in st:
            seen = time.time()
        else:
            time.sleep(0.01)
    if seen is None:
        raise RuntimeError("upsd did not serve OB LB within 10 s of the event")
    if not wait_until(lambda: read_stamps(paths["shutdown_stamp"]), 25, 0.05):
        raise RuntimeError("upsmon did not run SHUTDOWNCMD within 25 s of the event")
    notes = read_stamps(paths["notify_stamp"])
    first = [t for t, kind in notes if kind in ("ONBATT", "LOWBATT")]
    announce = [t for t, kind in notes if kind == "SHUTDOWN"]
    if not first:
        raise RuntimeError("SHUTDOWNCMD ran but no ONBATT/LOWBATT notification was stamped")
    cmd = read_stamps(paths["shutdown_stamp"])[0][0]
    res = {"upsd": seen - t_event, "first": min(first) - t_event, "cmd": cmd - t_event}
    if announce:
        res["finaldelay"] = cmd - min(announce)
    return res


def nut_run(args, tmp: str, idx: int, procs: Procs):
    """One fresh NUT stack, one OL -> OB LB event. Returns ({figure: seconds}, info) or
    (None, why)."""
    d = os.path.join(tmp, f"nut-{idx}")
    os.makedirs(d)
    port = free_port()
    paths = write_nut_config(d, port)
    started, client, kids = [], None, []
    try:
        client, info = nut_start(args, d, paths, port, procs, started)
        kids = child_pids(started[2].pid)  # upsmon's unprivileged half, while its parent lives
        return nut_event(paths, client), info
    except (RuntimeError, OSError) as e:
        return None, f"{e}; logs in {d} (--keep)"
    finally:
        if client is not None:
            client.close()
        if len(started) == 3:  # upsmon: its root half, then what it forked
            kids = set(kids) | set(child_pids(started[2].pid))
            Procs.stop(started.pop())
            stop_pids(sorted(kids))
        for p in reversed(started):
            Procs.stop(p)


def bench_nut(args, tmp: str, procs: Procs):
    """Part 1's peer; prints its figures and returns {figure: [seconds]}, or None if skipped."""
    print("\n  -- peer: NUT upsmon, the same kind of event (power critical: shut the host down) --")
    why = nut_unavailable(args)
    if why:
        print(f"  NUT peer skipped: {why}; no NUT figures or ratios in this run")
        return None
    print("  A fresh private stack per run: dummy-ups reading bench.dev in the temp dir, upsd on "
          "127.0.0.1,\n  upsmon primary with NUT's defaults (POLLFREQ and FINALDELAY not set: 5 s "
          "each), NOTIFYCMD and\n  SHUTDOWNCMD scripts that stamp $EPOCHREALTIME. At a random "
          "phase of upsmon's poll the file goes\n  from 'ups.status: OL' to 'ups.status: OB LB' "
          f"(on battery + battery low: NUT's critical state).  {args.nut_runs} runs.")
    figs = {"upsd": [], "first": [], "cmd": [], "finaldelay": []}
    info = None
    for idx in range(1, args.nut_runs + 1):
        res, extra = nut_run(args, tmp, idx, procs)
        if res is None:
            print(f"  NUT run {idx}: no figure: {extra}")
            continue
        info = extra
        for k, v in res.items():
            figs[k].append(v)
    if not figs["first"]:
        print("  NUT peer: no run gave a figure; no ratios")
        return None
    print(f"\n  NUT {info['version'] or '?'}: dummy-ups mode {info['parameter.mode'] or '?'}, "
          f"pollinterval {info['parameter.pollinterval'] or '?'} s (as upsd reports them)")
    print(f"    n={len(figs['first'])}  runs (event -> SHUTDOWNCMD, s): "
          + " ".join(f"{v:.3f}" for v in figs["cmd"]))
    print(f"    event -> upsd serves OB LB (the driver's part; upsd polled every 10 ms): "
          f"{fmt_stats(figs['upsd'])}")
    print(f"    event -> upsmon's first NOTIFYCMD (ONBATT/LOWBATT, same poll): "
          f"{fmt_stats(figs['first'])}")
    print(f"    event -> SHUTDOWNCMD ran (NUT's reaction, FINALDELAY included): "
          f"{fmt_stats(figs['cmd'])}")
    if figs["finaldelay"]:
        print(f"      of which upsmon's SHUTDOWN notification -> SHUTDOWNCMD (FINALDELAY): median "
              f"{fmt_ms(statistics.median(figs['finaldelay']))}")
    return figs


def fmt_stats(values) -> str:
    return (f"median {fmt_ms(statistics.median(values))}  p90 {fmt_ms(pct(values, 90))}  "
            f"min {fmt_ms(min(values))}  max {fmt_ms(max(values))}")


def bench_alarm(args, tmp: str, procs: Procs):
    print("\n== 1. alarm -> first shutdown stage (announce hook runs) ==")
    print(
        "A fake controller on a pty raises 'ALARM level=precritical reason=pump_stopped' at a "
        "random\nphase of coold's 1 s STATUS poll; the hook stamps $EPOCHREALTIME.  "
        f"{args.alarm_runs} runs per cut_in."
    )
    coold = {}
    idx = 0
    for cut_in in (30, 5):
        lat, halts, cmds = [], [], []
        for _ in range(args.alarm_runs):
            idx += 1
            res, err = alarm_run(args, tmp, idx, cut_in, procs)
            if err:
                print(f"  run {idx} (cut_in={cut_in}): no figure: {err}")
                continue
            lat.append(res[0])
            if res[1] is not None:
                halts.append(res[1])
            if res[2] is not None:
                cmds.append(res[2])
        coold[cut_in] = {"hook": lat, "cmd": cmds}
        if not lat:
            continue
        med, p90 = statistics.median(lat), pct(lat, 90)
        print(f"\n  cut_in={cut_in} s: n={len(lat)}  runs: " + " ".join(f"{v:.3f}" for v in lat))
        print(f"    alarm -> announce hook: {fmt_stats(lat)}")
        print(f"    fraction of the controller's cut delay used: median {med / cut_in:.2%}  "
              f"p90 {p90 / cut_in:.2%}")
        if halts:
            print(f"    alarm -> HALT reaches the controller (stages 1-4 done): median "
                  f"{fmt_ms(statistics.median(halts))}  p90 {fmt_ms(pct(halts, 90))}")
        if cmds:
            print(f"    alarm -> shutdown command ran (mtime of the file it touches): "
                  f"{fmt_stats(cmds)}")
    spawn = hook_spawn_cost(tmp)
    print(f"\n  for scale: starting such a hook (fork+exec bash, stamp) from python takes median "
          f"{fmt_ms(spawn)}; it is part of every figure above")
    if coold.get(30, {}).get("hook") and coold.get(5, {}).get("hook"):
        m30, m5 = statistics.median(coold[30]["hook"]), statistics.median(coold[5]["hook"])
        print(f"\n  confirmed (cut_in=30) / urgent (cut_in=5) median: {ratio(m30, m5)} "
              f"({fmt_ms(m30 - m5)} spent confirming)")
    nut = bench_nut(args, tmp, procs)
    if nut:
        print_alarm_ratios(coold, nut)


def print_alarm_ratios(coold: dict, nut: dict):
    """coold / NUT for the two reactions both sides measured in this run."""
    print("\n  coold / NUT upsmon (both measured above; median, and p90 / p90):")
    pairs = (
        ("event -> first action: coold's announce hook runs / upsmon's first NOTIFYCMD "
         "(ONBATT or LOWBATT)", "hook", "first"),
        ("event -> shutdown command: coold's command ran (stages 1-4 done) / upsmon's "
         "SHUTDOWNCMD ran (FINALDELAY included)", "cmd", "cmd"),
    )
    for title, ckey, nkey in pairs:
        print(f"    {title}")
        theirs = nut[nkey]
        for cut_in in (30, 5):
            ours = coold.get(cut_in, {}).get(ckey)
            if not ours:
                print(f"      cut_in={cut_in:<2} s: no coold figure")
                continue
            mo, mt = statistics.median(ours), statistics.median(theirs)
            print(f"      cut_in={cut_in:<2} s: {fmt_ms(mo)} / {fmt_ms(mt)}: {ratio(mo, mt)}  "
                  f"(p90 {ratio(pct(ours, 90), pct(theirs, 90))})")


# ---------------------------------------------------------------------------------------------
# 2 and 3: coold on coolsim vs prometheus-node-exporter.


def http_get(port: int, path: str = "/metrics", timeout: float = 2.0):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def keepalive_latencies(port: int, n: int, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    lat, size, reconnects = [], 0, 0
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            conn.request("GET", "/metrics", headers=headers or {})
            r = conn.getresponse()
            body = r.read()
            lat.append(time.perf_counter() - t0)
            size = len(body)
            if r.status != 200:
                raise RuntimeError(f"HTTP {r.status}")
            if r.will_close:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                reconnects += 1
    finally:
        conn.close()
    return lat, size, reconnects


def curl_cold(port: int, n: int):
    out = []
    for _ in range(n):
        r = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{time_total} %{size_download}",
             f"http://127.0.0.1:{port}/metrics"],
            capture_output=True, text=True, timeout=10,
        )
        if r.returncode == 0:
            t, s = r.stdout.split()
            out.append((float(t), int(s)))
    return out


def read_proc(pid: int):
    """(utime+stime seconds, {tid: run seconds from schedstat}, VmRSS kB). utime+stime covers
    every thread that ever ran, in clock ticks; schedstat is ns-exact but per live thread."""
    with open(f"/proc/{pid}/stat") as f:
        st = f.read()
    fields = st[st.rfind(")") + 2 :].split()
    ticks = int(fields[11]) + int(fields[12])
    runs = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                runs[tid] = int(f.read().split()[0]) / 1e9
        except OSError:  # the thread ended meanwhile, or no schedstat in this kernel
            pass
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return ticks / CLK_TCK, runs, rss


class Scraper:
    """GETs /metrics over one keep-alive connection, as Prometheus keeps its connections."""

    def __init__(self, port: int):
        self.port = port
        self.conn = None

    def get(self):
        for _ in range(2):  # one retry on a fresh connection if the server closed ours
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                self.conn.request("GET", "/metrics")
                r = self.conn.getresponse()
                r.read()
                if r.will_close:
                    self.close()
                return
            except (OSError, http.client.HTTPException):
                self.close()

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def cpu_window(pids: dict, seconds: float, ports=None):
    """Samples CPU and RSS of pids over `seconds`; with ports, GETs each /metrics once a second.
    Returns ({name: (cpu_ticks_s, schedstat_s, rss_kB, peak_rss_kB, threads)}, wall time).
    schedstat_s sums, per thread alive at the end, what it ran since the start (all of it for a
    thread born in the window); threads that ended in the window are missing from it."""
    names = list(pids)
    scrapers = [Scraper(p) for p in (ports or {}).values()]
    for sc in scrapers:  # connect before the window, like a scraper that has been running
        sc.get()
    start = {n: read_proc(pids[n]) for n in names}
    peak = {n: start[n][2] for n in names}
    t0 = time.monotonic()
    tick = 0
    while time.monotonic() - t0 < seconds:
        tick += 1
        time.sleep(max(0.0, t0 + tick - time.monotonic()))
        for sc in scrapers:
            sc.get()
        for n in names:
            peak[n] = max(peak[n], read_proc(pids[n])[2])
    wall = time.monotonic() - t0
    res = {}
    for n in names:
        end = read_proc(pids[n])
        run = sum(v - start[n][1].get(tid, 0.0) for tid, v in end[1].items())
        res[n] = (end[0] - start[n][0], run, end[2], peak[n], len(end[1]))
    for sc in scrapers:
        sc.close()
    return res, wall


def print_cpu(res: dict, wall: float, scrapes: int = 0, idle=None):
    """With scrapes and the idle window's (res, wall): also the CPU each scrape added."""
    for n, (ticks, run, rss, peak, threads) in res.items():
        extra = ""
        if scrapes and idle and n[0] != "(":
            base = idle[0][n][1] / idle[1] * wall  # what the window would have cost unscraped
            extra = f"  {(run - base) / scrapes * 1000:+.2f} ms CPU per scrape over idle"
        print(f"  {n:<16} utime+stime {ticks * 1000:5.0f} ms ({ticks / wall:.3%} of a core)"
              f"  schedstat {run * 1000:7.2f} ms ({run / wall:.4%})  VmRSS {rss} kB "
              f"(peak {peak} kB)  {threads} thread{'s' * (threads != 1)}{extra}")
    a, b = res["coold"], res["node_exporter"]
    print(f"  coold / node_exporter: CPU (ticks) {ratio(a[0], b[0])}  CPU (schedstat) "
          f"{ratio(a[1], b[1])}  RSS {ratio(a[2], b[2])}")


def bench_idle(args, pids: dict, ports: dict):
    print(f"\n== 3. idle CPU and RSS over {args.idle_s:.0f} s (coold polls coolsim every 1 s; "
          "nobody scrapes) ==")
    idle = cpu_window(pids, args.idle_s)
    print_cpu(*idle)
    print(f"  (utime+stime counts {1000 // CLK_TCK} ms ticks; schedstat is ns-exact but misses "
          "threads that ended in the window)")
    print(f"\n   3b. the same, both scraped once a second over {args.scraped_s:.0f} s "
          "(one keep-alive connection each)")
    res, wall = cpu_window(pids, args.scraped_s, ports)
    print_cpu(res, wall, scrapes=round(wall), idle=idle)


def bench_metrics(args, ports: dict):
    print(f"\n== 2. /metrics latency: {args.requests} sequential GETs, one keep-alive connection ==")
    res = {}
    for n, port in ports.items():  # warm-up, and the body sizes
        keepalive_latencies(port, 20)
    # Alternate blocks so drift on a shared 2-core box hits both servers alike.
    blocks = 4
    per = max(1, args.requests // blocks)
    lat = {n: [] for n in ports}
    size = {}
    recon = {n: 0 for n in ports}
    for _ in range(blocks):
        for n, port in ports.items():
            l, s, rc = keepalive_latencies(port, per)
            lat[n] += l
            size[n] = s
            recon[n] += rc
    gz = {}
    for n, port in ports.items():
        _, gsize, _ = keepalive_latencies(port, 3, {"Accept-Encoding": "gzip"})
        gz[n] = gsize
    for n in ports:
        l = lat[n]
        res[n] = (statistics.median(l), pct(l, 99))
        note = f"  ({recon[n]} reconnects: server closed keep-alive)" if recon[n] else ""
        print(f"  {n:<16} median {fmt_ms(res[n][0])}  p99 {fmt_ms(res[n][1])}  "
              f"mean {fmt_ms(statistics.fmean(l))}  max {fmt_ms(max(l))}  "
              f"body {size[n]} B (gzip {gz[n]} B){note}")
    a, b = res["coold"], res["node_exporter"]
    print(f"  coold / node_exporter: median {ratio(a[0], b[0])}  p99 {ratio(a[1], b[1])}  "
          f"body {ratio(size['coold'], size['node_exporter'])}")
    if args.curl_n and shutil.which("curl"):
        print(f"\n  curl, cold (new process + TCP connection each), {args.curl_n} runs:")
        cres = {}
        for n, port in ports.items():
            c = curl_cold(port, args.curl_n)
            if c:
                ts = [t for t, _ in c]
                cres[n] = statistics.median(ts)
                print(f"  {n:<16} time_total median {fmt_ms(cres[n])}  p90 {fmt_ms(pct(ts, 90))}")
        if len(cres) == 2:
            print(f"  coold / node_exporter (curl cold median): "
                  f"{ratio(cres['coold'], cres['node_exporter'])}")


def coold_metric(port: int, name: str):
    try:
        status, body = http_get(port)
    except OSError:
        return None
    if status != 200:
        return None
    for line in body.decode(errors="replace").splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return line.rsplit(" ", 1)[1]
    return None


def bench_daemons(args, tmp: str, procs: Procs):
    d = os.path.join(tmp, "daemons")
    os.makedirs(os.path.join(d, "hooks"))
    link = os.path.join(d, "ctl")
    sim = procs.start(
        [args.coolsim, "--scenario", "normal", "--link", link, "--log-level", "warning"],
        os.path.join(d, "coolsim.log"),
    )
    if not wait_until(lambda: os.path.islink(link), 5):
        print("  coolsim did not create its link; skipping 2 and 3")
        return
    cport, nport = free_port(), free_port()
    conf = write_coold_config(d, link, cport, os.path.join(d, "hooks"), "true")
    coold = procs.start([args.coold, "--config", conf], os.path.join(d, "coold.log"), daemon_env())
    ne_argv = [args.node_exporter, f"--web.listen-address=127.0.0.1:{nport}"]
    if not args.ne_defaults:
        ne_argv += ["--collector.disable-defaults", "--collector.cpu", "--collector.meminfo",
                    "--collector.loadavg"]
    ne = procs.start(ne_argv, os.path.join(d, "node_exporter.log"))
    up = wait_until(lambda: coold_metric(cport, "coold_controller_up") == "1", 10, 0.1)
    ne_up = wait_until(lambda: _ok(nport), 10, 0.1)
    if not up or not ne_up:
        print(f"  coold up={up} node_exporter up={ne_up}; logs in {d}; skipping 2 and 3")
        return
    print(f"\n(coold on coolsim 'normal': pid {coold.pid}, :{cport};  node_exporter "
          f"{'default collectors' if args.ne_defaults else 'cpu,meminfo,loadavg'}: "
          f"pid {ne.pid}, :{nport})")
    time.sleep(2.0)  # let start-up work settle before the idle window
    bench_idle(args, {"coold": coold.pid, "node_exporter": ne.pid, "(coolsim)": sim.pid},
               {"coold": cport, "node_exporter": nport})
    bench_metrics(args, {"coold": cport, "node_exporter": nport})
    for p in (coold, ne, sim):
        if p.poll() is not None:
            print(f"  note: pid {p.pid} exited early with {p.returncode}; logs in {d}")


def _ok(port: int) -> bool:
    try:
        return http_get(port)[0] == 200
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("mode", nargs="?", choices=["full", "quick"], default="full")
    ap.add_argument("--coold", required=True)
    ap.add_argument("--coolsim", required=True)
    ap.add_argument("--node-exporter", default="/usr/bin/prometheus-node-exporter")
    ap.add_argument("--nut-dir", default=NUT_DIR, help="where dummy-ups, upsd and upsmon are")
    ap.add_argument("--only", choices=["alarm", "daemons"], help="run one part only")
    ap.add_argument("--ne-defaults", action="store_true", help="node_exporter default collectors")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs)")
    ap.add_argument("--tmpdir", help="an empty directory to work in (default: a new one)")
    args = ap.parse_args()
    quick = args.mode == "quick"
    args.alarm_runs = 3 if quick else 7
    args.nut_runs = args.alarm_runs  # about 11 s each: start-up, a 0-5 s phase, ~7 s reaction
    args.requests = 500 if quick else 2000
    args.idle_s = 15.0 if quick else 60.0
    args.scraped_s = 10.0 if quick else 20.0
    args.curl_n = 10 if quick else 30
    random.seed(1)

    # Lead a process group of our own: bench/run's trap signals the group, which reaches every
    # daemon started below even if this interpreter dies first.
    if os.getpgrp() != os.getpid():
        os.setpgid(0, 0)
    procs = Procs()

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    tmp = args.tmpdir or tempfile.mkdtemp(prefix="coold-bench-")
    t_start = time.monotonic()
    try:
        print(f"coold bench ({args.mode}); coold={args.coold}; temp dir {tmp}")
        if args.only in (None, "alarm"):
            bench_alarm(args, tmp, procs)
        if args.only in (None, "daemons"):
            if not os.access(args.node_exporter, os.X_OK):
                print(f"\n{args.node_exporter} missing: skipping 2 and 3 "
                      "(apt-get install prometheus-node-exporter)")
            else:
                bench_daemons(args, tmp, procs)
        print(f"\n(total {time.monotonic() - t_start:.0f} s)")
    finally:
        procs.stop_all()
        if args.keep:
            print(f"logs kept in {tmp}")
        else:
            subprocess.run(["rm", "-rf", "--", tmp], check=False)


if __name__ == "__main__":
    main()
