#!/usr/bin/python3
"""gpumon benchmark harness (standard library only): gpumon against the exporter people write
first, a small HTTP server that runs `nvidia-smi --query-gpu=... --format=csv` on every scrape.

Both run in this invocation on this machine; every figure is printed next to the peer's and as
a ratio. The scrape figure also has a floor: static-server (bench/gpumon/static-server.c) serving
the bytes of one gpumon page from the same HTTP server, and gpumon's latency as a ratio of it.
Not a test: nothing passes or fails. bench/gpumon/run prepares the environment (the
fake NVML and fake-nvidia-smi here); gpumon/tests/gpu/check-gpu.sh runs it against the real
driver and the real nvidia-smi on the GPU machine. See bench/gpumon/README.md for the figures.

Internal mode: `gpumonbench.py --serve-peer PORT --nvidia-smi PATH` is the peer exporter.
"""

import argparse
import gzip
import http.client
import http.server
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# What the peer asks nvidia-smi for: the default dcgm-exporter gauges nvidia-smi can give.
PEER_QUERY = [
    ("index", None),
    ("uuid", None),
    ("name", None),
    ("pci.bus_id", None),
    ("utilization.gpu", "DCGM_FI_DEV_GPU_UTIL"),
    ("utilization.memory", "DCGM_FI_DEV_MEM_COPY_UTIL"),
    ("memory.used", "DCGM_FI_DEV_FB_USED"),
    ("memory.free", "DCGM_FI_DEV_FB_FREE"),
    ("memory.total", "DCGM_FI_DEV_FB_TOTAL"),
    ("temperature.gpu", "DCGM_FI_DEV_GPU_TEMP"),
    ("power.draw", "DCGM_FI_DEV_POWER_USAGE"),
    ("clocks.sm", "DCGM_FI_DEV_SM_CLOCK"),
    ("clocks.mem", "DCGM_FI_DEV_MEM_CLOCK"),
]

# Fixture calls that cost real time on real hardware (DESIGN.md, measured on an H200):
# total energy ~4 ms, PCIe throughput ~21 ms per call. The fake sleeps that long in them.
FIXTURE_DELAYS_US = {
    "nvmlDeviceGetTotalEnergyConsumption": 4000,
    "nvmlDeviceGetPcieThroughput": 21000,
}

CLK_TCK = os.sysconf("SC_CLK_TCK")

# The floor figure's requests: what Prometheus 2.x sends by default (it then gets text 0.0.4,
# gzip-encoded), and a plain GET like the latency figure's (http.client then sends
# "Accept-Encoding: identity"). The timed scrapes and the fetch of the page the floor serves use
# the same headers, so both servers send the same kind of bytes.
FLOOR_VARIANTS = [
    ("prometheus, gzip", {
        "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                  "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
        "Accept-Encoding": "gzip",
        "User-Agent": "Prometheus/2.53.0",
        "X-Prometheus-Scrape-Timeout-Seconds": "10",
    }),
    ("plain", {}),
]
FLOOR_GOAL = 1.2  # the goal: gpumon's p50 and p99 within 1.2x of the floor's


# ---- the peer exporter ----


class PeerHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as Prometheus scrapes
    # Headers and body go out in two writes; with Nagle on, the second waits for the client's
    # delayed ACK (40 ms) and the peer would look slower than its nvidia-smi makes it.
    disable_nagle_algorithm = True
    nvidia_smi = "nvidia-smi"

    def log_message(self, fmt, *args):
        pass

    def _send(self, code, body, ctype):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path != "/metrics":
            self._send(404, "not found\n", "text/plain")
            return
        fields = ",".join(f for f, _ in PEER_QUERY)
        r = subprocess.run([self.nvidia_smi, f"--query-gpu={fields}",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True)
        if r.returncode != 0:
            self._send(500, f"nvidia-smi failed: {r.stderr}", "text/plain")
            return
        self._send(200, render_peer(r.stdout), "text/plain; version=0.0.4; charset=utf-8")


def render_peer(csv_text):
    """The nvidia-smi CSV as dcgm-exporter-named gauges with its GPU labels."""
    rows = [[c.strip() for c in line.split(",")] for line in csv_text.splitlines() if line]
    out = []
    for col, (field, name) in enumerate(PEER_QUERY):
        if name is None:
            continue
        out.append(f"# HELP {name} {field} (nvidia-smi)\n# TYPE {name} gauge\n")
        for row in rows:
            if len(row) != len(PEER_QUERY):
                continue
            value = row[col]
            try:
                float(value)
            except ValueError:
                continue  # "[N/A]"
            out.append(f'{name}{{gpu="{row[0]}",UUID="{row[1]}",modelName="{row[2]}",'
                       f'pci_bus_id="{row[3]}"}} {value}\n')
    return "".join(out)


def serve_peer(port, nvidia_smi):
    PeerHandler.nvidia_smi = nvidia_smi
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), PeerHandler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever()
    return 0


# ---- measuring ----


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu(pid):
    """(own CPU seconds, CPU seconds of waited-for children) from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the comm field: state is [0], utime [11], stime [12], cutime [13], cstime [14].
    own = (int(fields[11]) + int(fields[12])) / CLK_TCK
    children = (int(fields[13]) + int(fields[14])) / CLK_TCK
    return own, children


def proc_mem(pid):
    """(VmRSS, VmHWM) in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    return out.get("VmRSS", 0), out.get("VmHWM", 0)


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, int(round(p / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


class Target:
    """One exporter under test: its process, port and keep-alive connection."""

    def __init__(self, name, argv, env, port, log_path):
        self.name = name
        self.port = port
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.conn = None
        self.body = b""
        self.reply_headers = None
        self.sizes = set()  # body sizes of the timed scrapes

    def get(self, path="/metrics", headers=None):
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                self.conn.request("GET", path, headers=headers or {})
                r = self.conn.getresponse()
                body = r.read()
                break
            except (ConnectionError, http.client.HTTPException):
                # A server may close a keep-alive connection that sat idle (the CPU windows);
                # a scraper reconnects then, and so do we, once.
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        if r.status != 200:
            raise RuntimeError(f"{self.name}: GET {path}: {r.status} {body[:200]!r}")
        self.reply_headers = r.headers
        return body

    def wait_ready(self, check, timeout=30):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                body = self.get()
                if check(body.decode()):
                    return
            except (OSError, RuntimeError, http.client.HTTPException) as exc:
                last = exc
                self.conn = None
            time.sleep(0.2)
        self.stop()
        tail = Path(self.log_path).read_text(errors="replace")[-2000:]
        raise SystemExit(f"bench: {self.name} not ready ({last!r}); log:\n{tail}")

    def timed_scrapes(self, n, headers=None):
        """n scrapes, each timed from the request to its last body byte; the bodies are read
        as they come (a gzip one stays compressed, as a scraper's network layer sees it)."""
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            self.body = self.get(headers=headers)
            times.append(time.perf_counter() - t0)
            self.sizes.add(len(self.body))
        return times

    def stop(self):
        if self.conn:
            self.conn.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def cpu_window(targets, seconds, scrape_every=None):
    """CPU seconds per hour of each target over a window, optionally scraped every
    `scrape_every` seconds (each over its own keep-alive connection, from its own thread)."""
    before = {t.name: proc_cpu(t.proc.pid) for t in targets}
    stop = threading.Event()
    threads = []
    if scrape_every:
        def scraper(t):
            nxt = time.monotonic()
            while not stop.is_set():
                t.get()
                nxt += scrape_every
                stop.wait(max(0.0, nxt - time.monotonic()))
        threads = [threading.Thread(target=scraper, args=(t,), daemon=True) for t in targets]
        for th in threads:
            th.start()
    t0 = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    after = {t.name: proc_cpu(t.proc.pid) for t in targets}
    stop.set()
    for th in threads:
        th.join(timeout=30)
    out = {}
    for t in targets:
        own = after[t.name][0] - before[t.name][0]
        children = after[t.name][1] - before[t.name][1]
        out[t.name] = ((own + children) * 3600 / elapsed, own * 3600 / elapsed)
    return out


def alternating_scrapes(targets, scrapes, headers=None, warmup=20, blocks=4):
    """Sorted scrape times (s) of each target: `scrapes` each, after `warmup` unmeasured ones,
    in alternating blocks so that machine noise hits every target alike."""
    times = {t.name: [] for t in targets}
    for t in targets:
        t.timed_scrapes(warmup, headers)
        t.sizes.clear()
    for _ in range(blocks):
        for t in targets:
            times[t.name] += t.timed_scrapes(scrapes // blocks, headers)
    return {name: sorted(v) for name, v in times.items()}


# ---- the run ----


def prepare_fixture(src, tmpdir, name="fixture.json"):
    """A copy of the fixture with every GPU's slow calls slowed down as on real hardware, and
    what it holds: "8 GPUs, 7 MIG instances"."""
    data = json.loads(Path(src).read_text())
    for g in data.get("gpus", []):
        delays = dict(g.get("delay_us") or {})
        delays.update(FIXTURE_DELAYS_US)
        g["delay_us"] = delays
    path = Path(tmpdir) / name
    path.write_text(json.dumps(data, indent=1))
    gpus = data.get("gpus", [])
    mig = sum(len(g["mig"].get("instances", [])) for g in gpus
              if g.get("mig", {}).get("enabled"))
    return path, f"{len(gpus)} GPUs, {mig} MIG instances"


def gpumon_build_type(gpumon):
    """meson's buildtype of the build dir gpumon is in, or of the bundle it came with (the
    MANIFEST make-bundle.sh writes): an -O0 build makes gpumon look slower than it is."""
    here = Path(gpumon).resolve()
    try:
        opts = json.loads((here.parents[1] / "meson-info" / "intro-buildoptions.json").read_text())
        return next(o["value"] for o in opts if o["name"] == "buildtype")
    except (OSError, ValueError, StopIteration):
        pass
    try:
        for line in (here.parents[1] / "MANIFEST").read_text().splitlines():
            if line.startswith("# buildtype "):
                return line.split()[2]
    except OSError:
        pass
    return "unknown"


def nvidia_smi_cost(nvidia_smi, env, runs=10):
    fields = ",".join(f for f, _ in PEER_QUERY)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([nvidia_smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                       capture_output=True, env=env, check=True)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def series_count(text):
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def fmt_ratio(a, b):
    if not b or b != b or a != a:
        return "n/a"
    return f"{a / b:.1f}x"


def fmt_ratio2(a, b):
    """A ratio near 1 (gpumon against its floor), where a tenth is too coarse."""
    if not b or b != b or a != a:
        return "n/a"
    return f"{a / b:.2f}x"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve-peer", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--gpumon", help="the gpumon binary")
    ap.add_argument("--gpumon-lib-path", default="", help="LD_LIBRARY_PATH for gpumon")
    ap.add_argument("--fixture", help="fake NVML fixture (only with the fake library)")
    ap.add_argument("--nvidia-smi", default="nvidia-smi", help="nvidia-smi (or the stand-in)")
    ap.add_argument("--peer-lib-path", default=None, help="LD_LIBRARY_PATH for the peer")
    ap.add_argument("--stand-in", action="store_true",
                    help="the peer's nvidia-smi is bench/gpumon/fake-nvidia-smi")
    ap.add_argument("--static-server",
                    help="bench/gpumon/static-server: the floor of the scrape figure (without "
                         "it, no floor figure)")
    ap.add_argument("--floor-fixture", action="append", default=[],
                    help="also run the floor figure on this fixture, with a gpumon of its own "
                         "(repeatable)")
    ap.add_argument("--floor-only", action="store_true",
                    help="only the floor figure: no peer, no memory or CPU figures")
    ap.add_argument("--floor-span", type=float,
                    help="seconds the floor figure spreads each request's scrapes over")
    ap.add_argument("--quick", action="store_true", help="fewer scrapes, shorter windows")
    ap.add_argument("--scrapes", type=int, help="timed scrapes per exporter")
    ap.add_argument("--window", type=float, help="seconds per CPU window")
    ap.add_argument("--pcie", default="yes", help="gpumon's pcie_throughput (yes/no)")
    ap.add_argument("--tmpdir", help="work dir (default: a new one, removed at the end)")
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    if a.serve_peer:
        return serve_peer(a.serve_peer, a.nvidia_smi)
    if not a.gpumon:
        ap.error("--gpumon is required")
    if a.floor_only and not a.static_server:
        ap.error("--floor-only needs --static-server")
    if a.floor_fixture and not a.fixture:
        ap.error("--floor-fixture needs the fake NVML (--fixture)")
    scrapes = a.scrapes or (300 if a.quick else 2000)
    window = a.window or (10.0 if a.quick else 60.0)
    a.floor_span = a.floor_span or (3.0 if a.quick else 10.0)
    own_tmp = a.tmpdir is None
    tmpdir = Path(a.tmpdir or tempfile.mkdtemp(prefix="gpumon-bench-"))
    try:
        return run(a, scrapes, window, tmpdir)
    finally:
        if own_tmp:
            shutil.rmtree(tmpdir, ignore_errors=True)


def clean_env():
    return {k: v for k, v in os.environ.items()
            if k not in ("LD_LIBRARY_PATH", "FAKE_NVML_FIXTURE")}


def fixture_env(a, fixture, tmpdir, tag):
    """The environment both exporters share for one fixture (its slowed-down copy) and the
    fixture's description, or the plain environment and None with the real driver."""
    env = clean_env()
    if not fixture:
        return env, None
    path, what = prepare_fixture(fixture, tmpdir, f"fixture-{tag}.json")
    env["FAKE_NVML_FIXTURE"] = str(path)
    return env, f"{Path(fixture).name} ({what})"


def start_gpumon(a, env, tmpdir, tag):
    genv = dict(env)
    if a.gpumon_lib_path:
        genv["LD_LIBRARY_PATH"] = a.gpumon_lib_path
    conf = tmpdir / "gpumon.conf"
    conf.write_text(f"[gpumon]\npcie_throughput = {a.pcie}\n")
    port = free_port()
    gpumon = Target("gpumon", [a.gpumon, "--config", str(conf), "--listen", f"127.0.0.1:{port}",
                               "--interval", "1s", "--hostname", "bench"],
                    genv, port, tmpdir / f"gpumon-{tag}.log")
    # The sampler publishes its first snapshot complete, slow fields and MIG included, before
    # it serves, so the first page is as big as any later one.
    gpumon.wait_ready(lambda t: re.search(r"^gpumon_up 1", t, re.M)
                      and re.search(r"^DCGM_FI_DEV_GPU_TEMP\{", t, re.M))
    return gpumon


def run(a, scrapes, window, tmpdir):
    figures = {"scrapes": scrapes, "window_s": window, "floor": []}
    fixtures = [a.fixture] + a.floor_fixture
    for i, fixture in enumerate(fixtures):
        env, where = fixture_env(a, fixture, tmpdir, i)
        if i == 0:
            figures["where"] = where
        gpumon = start_gpumon(a, env, tmpdir, i)
        try:
            if i == 0 and not a.floor_only:
                figures.update(peer_figures(a, gpumon, env, scrapes, window, tmpdir))
            if a.static_server:
                figures["floor"].append(floor_figure(a, gpumon, scrapes, tmpdir, i, where))
        finally:
            gpumon.stop()
    report(a, figures)
    if a.json:
        Path(a.json).write_text(json.dumps(slim_figures(figures), indent=1))
    return 0


def slim_figures(figures):
    """The figures with each list of scrape times cut down to its p50 and p99."""
    def slim(lat):
        return {k: {"p50": percentile(v, 50), "p99": percentile(v, 99)} for k, v in lat.items()}
    out = dict(figures)
    if "latency" in out:
        out["latency"] = slim(out["latency"])
    out["floor"] = [dict(fl, variants=[dict(v, latency=slim(v["latency"]))
                                       for v in fl["variants"]]) for fl in out["floor"]]
    return out


# ---- gpumon against the peer ----


def peer_figures(a, gpumon, env, scrapes, window, tmpdir):
    """Latency, memory and CPU of gpumon and the peer, started here on the same fixture."""
    penv = dict(env)
    if a.peer_lib_path:
        penv["LD_LIBRARY_PATH"] = a.peer_lib_path
    pport = free_port()
    peer = Target("peer", [sys.executable, os.path.abspath(__file__), "--serve-peer", str(pport),
                           "--nvidia-smi", a.nvidia_smi], penv, pport, tmpdir / "peer.log")
    targets = [gpumon, peer]
    try:
        peer.wait_ready(lambda t: "DCGM_FI_DEV_GPU_TEMP{" in t)
        smi_cost = nvidia_smi_cost(a.nvidia_smi, penv)
        latency = alternating_scrapes(targets, scrapes)
        mem = {t.name: proc_mem(t.proc.pid) for t in targets}
        idle = cpu_window(targets, window)
        scraped = cpu_window(targets, window, scrape_every=1.0)
        mem_end = {t.name: proc_mem(t.proc.pid) for t in targets}
        gpumon_text = gpumon.body.decode()
        peer_text = peer.body.decode()
    finally:
        peer.stop()
    return {
        "nvidia_smi_s": smi_cost, "latency": latency,
        "mem": mem_end, "mem_after_latency": mem,
        "cpu_idle": idle, "cpu_scraped": scraped,
        "series": {"gpumon": series_count(gpumon_text), "peer": series_count(peer_text)},
        "bytes": {"gpumon": len(gpumon_text), "peer": len(peer_text)},
    }


# ---- gpumon against its floor ----


def header_names(headers):
    # Date differs by the second and says nothing about the work done.
    return sorted(k.lower() for k in headers.keys() if k.lower() != "date")


def start_floor(a, gpumon, headers, tmpdir, stem):
    """static-server serving the page gpumon sent last, for these request headers: its plain
    bytes, and its gzip bytes as gpumon sent them."""
    reply = gpumon.reply_headers
    encoding = reply.get("Content-Encoding")
    plain = gzip.decompress(gpumon.body) if encoding == "gzip" else gpumon.body
    plain_path = tmpdir / f"{stem}.body"
    plain_path.write_bytes(plain)
    argv = [a.static_server, "--body", str(plain_path), "--content-type", reply["Content-Type"]]
    if encoding == "gzip":
        gz_path = tmpdir / f"{stem}.body.gz"
        gz_path.write_bytes(gpumon.body)
        argv += ["--gzip-body", str(gz_path)]
    port = free_port()
    floor = Target("floor", argv + ["--listen", f"127.0.0.1:{port}"], clean_env(), port,
                   tmpdir / f"{stem}.log")
    try:
        floor.wait_ready(lambda t: True)
        if floor.get(headers=headers) != gpumon.body:
            raise SystemExit(f"bench: {a.static_server} does not serve the bytes of gpumon's page")
    except BaseException:
        floor.stop()
        raise
    return floor, plain


def settle(gpumon, quiet_s=2.0, timeout=30):
    """Waits until gpumon's page has kept its series for quiet_s: some come only after the first
    samples (rates need two, the fixture's XIDs come at their time), and the floor must serve a
    page as big as the ones gpumon serves while it is timed."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        n = series_count(gpumon.get().decode())
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.25)


def paced_pairs(targets, pairs, span_s, headers, warmup=20):
    """Sorted scrape times (s) of each target, one scrape of each per pair in random order,
    the pairs evenly spread over span_s. Back to back, 2000 scrapes of 0.1 ms take a fifth of
    a second: whether gpumon's once-a-second render (a few ms of CPU) falls into them is a
    coin toss that decides the p99. Spread over many sampling intervals, the scrapes meet the
    sampler at every phase, as a scraper does; pairs put any noise on both targets alike."""
    times = {t.name: [] for t in targets}
    for t in targets:
        t.timed_scrapes(warmup, headers)
        t.sizes.clear()
    gap = span_s / pairs
    due = time.monotonic()
    for _ in range(pairs):
        for t in random.sample(targets, len(targets)):
            times[t.name] += t.timed_scrapes(1, headers)
        due += gap
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    return {name: sorted(v) for name, v in times.items()}


def floor_figure(a, gpumon, scrapes, tmpdir, tag, where):
    """gpumon's scrape latency against static-server's on the bytes of one gpumon page, for
    each request of FLOOR_VARIANTS. gpumon renders its pages in its sampler thread, once a
    second; what is timed here is serving them, at every phase of that second."""
    settle(gpumon)
    out = {"fixture": where, "span_s": a.floor_span, "variants": []}
    for i, (label, headers) in enumerate(FLOOR_VARIANTS):
        gpumon.body = gpumon.get(headers=headers)
        floor, plain = start_floor(a, gpumon, headers, tmpdir, f"page-{tag}-{i}")
        try:
            latency = paced_pairs([gpumon, floor], scrapes, a.floor_span, headers)
            names = {"gpumon": header_names(gpumon.reply_headers),
                     "floor": header_names(floor.reply_headers)}
        finally:
            floor.stop()
        out["variants"].append({
            "label": label,
            "content_type": gpumon.reply_headers["Content-Type"],
            "encoding": gpumon.reply_headers.get("Content-Encoding") or "identity",
            "bytes": len(floor.body), "plain_bytes": len(plain),
            "gpumon_bytes": [min(gpumon.sizes), max(gpumon.sizes)],
            "series": series_count(plain.decode()),
            "headers": names, "latency": latency,
        })
    return out


# ---- the report ----


def latency_stats(times):
    """(p50, p99, mean, max) in ms of sorted times in seconds."""
    s = [x * 1000 for x in times]
    return percentile(s, 50), percentile(s, 99), sum(s) / len(s), s[-1]


def report(a, f):
    p = print
    where = (f"fake NVML, fixture {f['where']}, delays "
             + ", ".join(f"{k} {v / 1000:g} ms" for k, v in FIXTURE_DELAYS_US.items())
             if a.fixture else "the real NVML driver")
    p(f"gpumon benchmark: {where}")
    p(f"gpumon build type: {gpumon_build_type(a.gpumon)}; {os.cpu_count()} CPUs; "
      f"pcie_throughput={a.pcie}; gpumon --interval 1s")
    if "latency" in f:
        report_peer(a, f)
    if a.static_server:
        for fl in f["floor"]:
            report_floor(f, fl)
    else:
        p("")
        p("scrape vs static floor: not measured (no --static-server)")


def report_peer(a, f):
    p = print
    smi = f["nvidia_smi_s"] * 1000
    if a.stand_in:
        p(f"peer: python http.server running {Path(a.nvidia_smi).name} per scrape. NOTE: this is"
          f" a STAND-IN for nvidia-smi ({smi:.1f} ms a call here, the real nvidia-smi takes"
          " ~30 ms), so every ratio below UNDERSTATES gpumon's advantage.")
    else:
        p(f"peer: python http.server running {a.nvidia_smi} per scrape ({smi:.1f} ms a call)")
    p(f"expositions: gpumon {f['series']['gpumon']} series / {f['bytes']['gpumon']} bytes, "
      f"peer {f['series']['peer']} series / {f['bytes']['peer']} bytes")
    p("")
    p(f"scrape latency, {f['scrapes']} keep-alive GETs each in 4 alternating blocks (ms)")
    p(f"  {'':18}{'p50':>10}{'p99':>10}{'mean':>10}{'max':>10}")
    stats = {}
    for name, times in f["latency"].items():
        stats[name] = latency_stats(times)
        p(f"  {name:18}" + "".join(f"{v:10.3f}" for v in stats[name]))
    p(f"  {'ratio peer/gpumon':18}" + "".join(
        f"{fmt_ratio(b, g):>10}" for g, b in zip(stats["gpumon"], stats["peer"])))
    p("")
    p("memory (MiB)          VmRSS     VmHWM")
    for name in ("gpumon", "peer"):
        rss, hwm = f["mem"][name]
        p(f"  {name:18}{rss / 1024:8.1f}  {hwm / 1024:8.1f}")
    p(f"  {'ratio peer/gpumon':18}{fmt_ratio(f['mem']['peer'][0], f['mem']['gpumon'][0]):>8}"
      f"  {fmt_ratio(f['mem']['peer'][1], f['mem']['gpumon'][1]):>8}")
    p("  (the peer's nvidia-smi runs are processes of their own, not counted above)")
    p("")
    p(f"CPU seconds per hour, from /proc utime+stime over {f['window_s']:g} s windows "
      "(peer: its nvidia-smi children included)")
    p(f"  {'':18}{'idle':>12}{'scraped 1/s':>14}")
    for name in ("gpumon", "peer"):
        p(f"  {name:18}{f['cpu_idle'][name][0]:12.1f}{f['cpu_scraped'][name][0]:14.1f}")
    p(f"  {'ratio peer/gpumon':18}"
      f"{fmt_ratio(f['cpu_idle']['peer'][0], f['cpu_idle']['gpumon'][0]):>12}"
      f"{fmt_ratio(f['cpu_scraped']['peer'][0], f['cpu_scraped']['gpumon'][0]):>14}")
    if a.fixture:
        p("  NOTE: part of gpumon's figure here is the fake NVML: its nvmlEventSetWait_v2 wakes"
          " every 100 ms (the real driver blocks), and it stats its fixture file at most every"
          " 100 ms.")
    p("  idle: gpumon samples every 1 s by itself; the peer reads nothing until scraped.")
    p("  scraped 1/s: both serve a Prometheus-like scrape every second; the fair comparison.")
    p(f"  (clock ticks are 1/{CLK_TCK} s: a figure below {3600 / CLK_TCK / f['window_s']:.0f} "
      "s/h is at the resolution limit)")


def report_floor(f, fl):
    p = print
    p("")
    p(f"scrape vs static floor: {fl['fixture'] or 'the real NVML driver'}; "
      f"{f['scrapes']} keep-alive GETs each, in pairs of random order spread over "
      f"{fl['span_s']:g} s (ms)")
    p("  floor: static-server, the same HTTP server replying with the bytes of one gpumon page")
    for v in fl["variants"]:
        gzipped = (f", {v['bytes']} bytes gzip-encoded" if v["encoding"] == "gzip" else "")
        p(f"  {v['label']}: {v['content_type']}, {v['series']} series, "
          f"{v['plain_bytes']} bytes{gzipped}")
        p(f"    {'':16}{'p50':>10}{'p99':>10}{'mean':>10}{'max':>10}")
        stats = {name: latency_stats(times) for name, times in v["latency"].items()}
        for name in ("gpumon", "floor"):
            p(f"    {name:16}" + "".join(f"{x:10.3f}" for x in stats[name]))
        ratios = [fmt_ratio2(g, b) for g, b in zip(stats["gpumon"], stats["floor"])]
        met = all(stats["gpumon"][k] <= FLOOR_GOAL * stats["floor"][k] for k in (0, 1))
        p(f"    {'gpumon/floor':16}" + "".join(f"{r:>10}" for r in ratios)
          + f"   goal: p50, p99 <= {FLOOR_GOAL:g}x ({'met' if met else 'NOT met'})")
        lo, hi = v["gpumon_bytes"]
        if lo < 0.98 * v["bytes"] or hi > 1.02 * v["bytes"]:
            p(f"    NOTE: gpumon's pages were {lo}-{hi} bytes while timed, the floor's "
              f"{v['bytes']}: the comparison is off by that much")
        if v["headers"]["gpumon"] != v["headers"]["floor"]:
            p(f"    NOTE: the reply headers differ: gpumon {v['headers']['gpumon']}, "
              f"floor {v['headers']['floor']}")


if __name__ == "__main__":
    sys.exit(main())
