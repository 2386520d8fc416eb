#!/usr/bin/env python3
"""gpm_compare.py: gpumon's DCGM_FI_PROF_* fields against `nvidia-smi dmon --gpm-metrics`, and
against pynvml's GPM calls where pynvml is installed, idle and under a known load (gpm-load).

Run by check-gpu.sh while the gpumon under test serves on --port (standard library only; the GPU
machine has python3 but no pip). Per GPU:
  * gpumon shows whole-GPU DCGM_FI_PROF_* series: their medians over a window, in GPM's units
    (ratio x 100 = percent, bytes/s / 2^20 = MiB/s), against the references' medians over the
    same window: utilisations within max(5 points, 15 %), PCIe rates within max(100 MiB/s, 50 %)
    (dmon's own rounding and unit are not documented). Windows: idle (before the load; near 0 is
    expected and said, but only agreement is required) and under gpm-load, which must have
    lifted SM activity above 20 % in gpumon or the reference, else the load did not run and
    nothing is compared;
  * gpumon shows them per MIG GPU instance only: not compared (dmon is asked for device-level
    figures);
  * gpumon shows none: its gpumon_profiling_unavailable_info reason, and dmon must have no GPM
    figures for that GPU either.
Where dmon's GPM columns are: the header of `dmon --gpm-metrics IDS` compared with that of plain
`dmon`; the extra columns, in id order (the ids are asked in ascending order). NVIDIA does not
document their names, so none are assumed; the table shows which column was taken.

With --dry-run (the fake NVML and the stand-in nvidia-smi) there is no load: gpumon is compared
with the stand-in's dmon on the fixture's constant GPM values, which proves the plumbing (the
scrape, the units, the column finding), not the numbers.

Writes the summary to OUT/gpm-compare.txt and the raw material to OUT/gpm-dmon.txt (dmon's
commands and output) and OUT/gpm-samples.txt (every sample of gpumon and pynvml, gpm-load's
output). Exit status: 0 agreement, 1 a mismatch, 2 could not run (no reference, the load failed
or did not load the GPU).
"""
import argparse
import http.client
import os
import re
import statistics
import subprocess
import sys
import threading
import time

MIB = 1048576.0
# GPM metric id -> (gpumon family, kind, what). The ids are NVML's nvmlGpmMetricId_t.
METRICS = {
    1: ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "util", "graphics engine"),
    2: ("DCGM_FI_PROF_SM_ACTIVE", "util", "SM activity"),
    3: ("DCGM_FI_PROF_SM_OCCUPANCY", "util", "SM occupancy"),
    5: ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "util", "tensor pipe"),
    10: ("DCGM_FI_PROF_DRAM_ACTIVE", "util", "DRAM activity"),
    12: ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "util", "FP32 pipe"),
    20: ("DCGM_FI_PROF_PCIE_TX_BYTES", "rate", "PCIe TX"),
    21: ("DCGM_FI_PROF_PCIE_RX_BYTES", "rate", "PCIe RX"),
}
IDS = sorted(METRICS)
SM_ID = 2
LOAD_FLOOR = 20.0  # % SM activity the load must reach
IDLE_CEILING = 5.0  # % SM activity that still counts as idle
FAMILY_ID = {fam: i for i, (fam, _, _) in METRICS.items()}

SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


class CouldNotRun(Exception):
    pass


# ---- gpumon ----

def scrape(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        r = c.getresponse()
        body = r.read().decode()
        if r.status != 200:
            raise CouldNotRun(f"gpumon /metrics answered {r.status}")
    finally:
        c.close()
    series = []
    for line in body.splitlines():
        m = SAMPLE.match(line)
        if m and not line.startswith("#"):
            series.append((m.group(1), dict(LABEL.findall(m.group(2) or "")),
                           float(m.group(3))))
    return series


def gpumon_view(series):
    """gpu index -> {"prof": {id: value in GPM's unit}, "instances": bool, "reason": str}."""
    gpus = {}
    for name, labels, value in series:
        gpu = labels.get("gpu")
        if gpu is None:
            continue
        g = gpus.setdefault(gpu, {"prof": {}, "instances": False, "reason": None})
        if name == "gpumon_profiling_unavailable_info":
            g["reason"] = labels.get("reason")
        elif name.startswith("DCGM_FI_PROF_") and "GPU_I_ID" in labels:
            g["instances"] = True
        elif name in FAMILY_ID:
            i = FAMILY_ID[name]
            g["prof"][i] = value * 100.0 if METRICS[i][1] == "util" else value / MIB
    return gpus


# ---- nvidia-smi dmon ----

def log_run(log, argv, rc, out, err):
    log.append(f"$ {' '.join(argv)}\n# exit {rc}\n{out}" + (f"# stderr:\n{err}" if err else ""))


def finish_run(p, timeout):
    """(exit status or "timeout", stdout, stderr) of a Popen with text pipes."""
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return "timeout", out, err


def run_dmon(smi, args, timeout, log):
    argv = [smi, "dmon"] + args
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rc, out, err = finish_run(p, timeout)
    log_run(log, argv, rc, out, err)
    return rc, out, err


def parse_dmon(text):
    """(column names, rows): names from the last '#' header line that is not the units line
    ('# Idx ...'), rows as (gpu index, tokens) for lines with one token per name."""
    names, rows = None, []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            tokens = s.lstrip("#").split()
            if tokens and tokens[0].lower() != "idx":
                names = [t.lower() for t in tokens]
            continue
        tokens = s.split()
        if names and len(tokens) == len(names):
            gpu_col = names.index("gpu") if "gpu" in names else 0
            rows.append((tokens[gpu_col], tokens))
    return names, rows


def gpm_columns(names, baseline, ids):
    """id -> column index of dmon's GPM figures, and how they were found; None if not."""
    if not names:
        return None, "no header"
    left = list(baseline or [])
    extra = []
    for i, n in enumerate(names):
        if n in left:
            left.remove(n)
        else:
            extra.append(i)
    if baseline:
        if len(extra) == len(ids):
            return dict(zip(ids, extra)), "the columns plain dmon lacks"
        return None, f"{len(extra)} columns more than plain dmon's for {len(ids)} metrics"
    # Without plain dmon's header to compare with, the GPM columns are taken to come last.
    if len(names) > len(ids):
        cols = list(range(len(names) - len(ids), len(names)))
        return dict(zip(ids, cols)), "by position: the last columns"
    return None, f"{len(names)} columns for {len(ids)} metrics"


def number(token):
    try:
        return float(token)
    except ValueError:
        return None  # "-", "N/A"


class Dmon:
    """How dmon is asked for GPM figures here, found out on the first window."""

    def __init__(self, smi, log):
        self.smi, self.log = smi, log
        self.variants = [["--gpm-metrics", ",".join(map(str, IDS))],
                         ["--gpm-metrics", ",".join(map(str, IDS)), "--gpm-options", "d"]]
        self.args = None
        self.why = None
        # Plain dmon's header, to tell the GPM columns by; its output is also what dmon shows
        # where it refuses --gpm-metrics.
        rc, out, _ = run_dmon(smi, ["-c", "1"], 30, log)
        self.baseline = parse_dmon(out)[0] if rc == 0 else None

    def start(self, seconds):
        """Starts one run of `seconds` samples; returns a handle for finish()."""
        args = self.args or (self.variants[0] if self.variants else None)
        if args is None:
            return None
        argv = [self.smi, "dmon"] + args + ["-c", str(seconds), "-d", "1"]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return (argv, args, p, seconds)

    def finish(self, run):
        """gpu -> {id: [values]} and a description of the columns, or (None, why)."""
        if run is None:
            return None, self.why
        argv, args, p, seconds = run
        rc, out, err = finish_run(p, seconds + 30)
        log_run(self.log, argv, rc, out, err)
        names, rows = parse_dmon(out) if rc == 0 else (None, [])
        cols, how = gpm_columns(names, self.baseline, IDS) if rc == 0 else (None, err.strip())
        if cols is None:
            return self._next_variant(args, rc, how)
        self.args = args
        figures = {}
        for gpu, tokens in rows:
            f = figures.setdefault(gpu, {i: [] for i in IDS})
            for i, c in cols.items():
                v = number(tokens[c])
                if v is not None:
                    f[i].append(v)
        desc = ", ".join(f"{i}={names[c]}" for i, c in cols.items())
        return figures, f"`{' '.join(['dmon'] + args)}`, columns {how}: {desc}"

    def _next_variant(self, args, rc, how):
        self.why = (f"`dmon {' '.join(args)}`: exit {rc}, {how or 'no GPM columns'} (plain "
                    "dmon's output is in gpm-dmon.txt)")
        if self.args is None and args in self.variants:
            self.variants.remove(args)
        return None, self.why


# ---- pynvml ----

class Pynvml:
    """pynvml's GPM calls, one sample per GPU each call of sample(): NVIDIA's own bindings, a
    reference that shares no code with gpumon."""

    def __init__(self, gpus):
        self.why, self.gpus = None, {}
        try:
            import pynvml
        except ImportError:
            self.why = "pynvml is not installed"
            return
        self.nv = pynvml
        if not hasattr(pynvml, "nvmlGpmMetricsGet"):
            self.why = "this pynvml has no GPM calls"
            return
        try:
            pynvml.nvmlInit()
            for gpu in gpus:
                h = pynvml.nvmlDeviceGetHandleByIndex(int(gpu))
                if not pynvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice:
                    continue
                s = [pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()]
                pynvml.nvmlGpmSampleGet(h, s[0])
                self.gpus[gpu] = {"handle": h, "samples": s, "last": 0}
        except Exception as e:  # pynvml.NVMLError and anything a binding mismatch raises
            self.why = f"pynvml: {e!r}"
            self.gpus = {}

    def sample(self):
        """gpu -> {id: value or None} over the interval since the last call."""
        nv, got = self.nv, {}
        for gpu, g in self.gpus.items():
            try:
                nxt = 1 - g["last"]
                nv.nvmlGpmSampleGet(g["handle"], g["samples"][nxt])
                q = nv.c_nvmlGpmMetricsGet_t()
                q.version = nv.NVML_GPM_METRICS_GET_VERSION
                q.numMetrics = len(IDS)
                q.sample1, q.sample2 = g["samples"][g["last"]], g["samples"][nxt]
                for k, i in enumerate(IDS):
                    q.metrics[k].metricId = i
                nv.nvmlGpmMetricsGet(q)
                g["last"] = nxt
                got[gpu] = {i: (q.metrics[k].value if q.metrics[k].nvmlReturn == 0 else None)
                            for k, i in enumerate(IDS)}
            except Exception as e:
                got[gpu] = {"error": repr(e)}
        return got

    def close(self):
        if self.why:
            return
        for g in self.gpus.values():
            for s in g["samples"]:
                try:
                    self.nv.nvmlGpmSampleFree(s)
                except Exception:
                    pass
        self.nv.nvmlShutdown()


# ---- the load ----

class Load:
    """gpm-load in the background; its output is collected as it comes."""

    def __init__(self, path, seconds, device):
        env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")  # CUDA's index = NVML's
        env.pop("LD_LIBRARY_PATH", None)  # the machine's libcuda, not a bundle's libraries
        self.lines, self.running = [], threading.Event()
        self.p = subprocess.Popen([path, str(seconds), str(device)], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("gpm-load: running"):
                self.running.set()
        self.running.set()  # it ended: nobody waits any longer

    def wait(self, timeout):
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = "timeout"
        self.t.join(5)
        return rc

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


# ---- windows and comparisons ----

def observe(label, seconds, port, dmon, pyn, samples_log):
    """Samples gpumon and pynvml every second while one dmon run of `seconds` samples goes on.
    Returns {"gpumon": gpu -> id -> [values], "dmon": ..., "pynvml": ..., "dmon_how": str}."""
    run = dmon.start(seconds)
    try:
        ours, theirs_py = sample_window(label, seconds, port, pyn, samples_log)
    except BaseException:
        if run:
            run[2].kill()  # gpumon stopped answering: no dmon left behind
        raise
    figures, how = dmon.finish(run)
    return {"gpumon": ours, "dmon": figures, "pynvml": theirs_py, "dmon_how": how}


def sample_window(label, seconds, port, pyn, samples_log):
    """gpumon's and pynvml's figures, a sample a second for `seconds` seconds."""
    ours, theirs_py = {}, {}
    t0 = time.monotonic()
    for k in range(seconds + 1):
        time.sleep(max(0.0, t0 + k + 0.5 - time.monotonic()))
        view = gpumon_view(scrape(port))
        py = pyn.sample() if pyn.gpus else {}
        samples_log.append(f"{label} t={time.monotonic() - t0:5.1f}s gpumon "
                           + " ".join(f"gpu{g}:{_fmt_dict(v['prof'])}" for g, v in view.items())
                           + (" pynvml " + " ".join(f"gpu{g}:{_fmt_dict(v)}"
                                                    for g, v in py.items()) if py else ""))
        if k == 0:
            continue  # these cover the second before the window
        for gpu, v in view.items():
            f = ours.setdefault(gpu, {i: [] for i in IDS})
            for i, x in v["prof"].items():
                f[i].append(x)
        for gpu, v in py.items():
            f = theirs_py.setdefault(gpu, {i: [] for i in IDS})
            for i in IDS:
                if v.get(i) is not None:
                    f[i].append(v[i])
    return ours, theirs_py


def _fmt_dict(d):
    return "{" + ",".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in d.items()) + "}"


def median(values):
    return statistics.median(values) if values else None


def _cell(v):
    return "-" if v is None else f"{v:.1f}"


def tolerance(kind, ref):
    return max(5.0, 0.15 * ref) if kind == "util" else max(100.0, 0.5 * ref)


class Report:
    def __init__(self):
        self.rows, self.notes = [], []
        self.mismatches, self.could_not = 0, []
        self.compared = 0  # rows with gpumon's figure and at least one reference's

    def row(self, window, gpu, i, ours, refs):
        """One metric: gpumon's median against each reference's that has one."""
        kind = METRICS[i][1]
        have = {name: v for name, v in refs.items() if v is not None}
        if not have:
            result, tol = "no reference", None
        elif ours is None:
            result, tol = "MISMATCH  absent in gpumon", None
        else:
            bad = [n for n, v in have.items() if abs(ours - v) > tolerance(kind, v)]
            tol = max(tolerance(kind, v) for v in have.values())
            result = "MISMATCH  vs " + ", ".join(bad) if bad else "ok"
            self.compared += 1
        self.mismatches += result.startswith("MISMATCH")
        self.rows.append(f"{window:<6} {gpu:>3}  {METRICS[i][2] + f' ({i})':<20} "
                         f"{_cell(ours):>8} {_cell(refs.get('dmon')):>8} "
                         f"{_cell(refs.get('pynvml')):>8} "
                         f"{('±' + format(tol, '.1f')) if tol is not None else '':>8}  {result}")


def compare_window(window, obs, gpumon, report, load_gpu=None):
    """Rows for every GPU gpumon shows whole-GPU profiling figures for; returns the GPU's
    median SM activity per source (for the idle and load notes)."""
    sm = {}
    for gpu in sorted(gpumon, key=int):
        g = gpumon[gpu]
        if not g["prof"]:
            continue
        ours = obs["gpumon"].get(gpu, {})
        dm = (obs["dmon"] or {}).get(gpu, {})
        py = obs["pynvml"].get(gpu, {})
        med = {i: (median(ours.get(i, [])), median(dm.get(i, [])), median(py.get(i, [])))
               for i in IDS}
        sm[gpu] = med[SM_ID]
        if gpu == load_gpu and not any(v is not None and v > LOAD_FLOOR for v in med[SM_ID]):
            report.could_not.append(
                f"the load did not run on GPU {gpu}: SM activity gpumon {_pct(med[SM_ID][0])}, "
                f"dmon {_pct(med[SM_ID][1])}, pynvml {_pct(med[SM_ID][2])} (need > "
                f"{LOAD_FLOOR:g} %); its figures are not compared")
            continue
        for i in IDS:
            o, d, p = med[i]
            report.row(window, gpu, i, o, {"dmon": d, "pynvml": p})
    return sm


def _pct(v):
    return "-" if v is None else f"{v:.1f} %"


def check_unavailable(gpumon, obs, report):
    """GPUs gpumon shows no profiling figures for: its reason, and dmon must have none."""
    for gpu in sorted(gpumon, key=int):
        g = gpumon[gpu]
        if g["prof"]:
            continue
        if g["instances"]:
            report.notes.append(f"GPU {gpu}: MIG mode; gpumon shows DCGM_FI_PROF_* per GPU "
                                "instance, dmon was asked for device figures: not compared")
            continue
        dm = (obs["dmon"] or {}).get(gpu, {})
        theirs = {i: v for i, v in dm.items() if v}
        reason = g["reason"] or "(no gpumon_profiling_unavailable_info either)"
        ok = not theirs and g["reason"]
        report.mismatches += not ok
        report.compared += 1
        report.rows.append(f"{'-':<6} {gpu:>3}  {'profiling':<20} {'none':>8} "
                           f"{'some' if theirs else 'none':>8} {'':>8} {'':>8}  "
                           f"{'ok' if ok else 'MISMATCH'}  gpumon: {reason}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, help="gpumon's port on 127.0.0.1")
    ap.add_argument("--nvidia-smi", help="nvidia-smi, or bench/gpumon/fake-nvidia-smi")
    ap.add_argument("--load", help="gpm-load (absent: no load window)")
    ap.add_argument("--window", type=int, default=10, help="seconds sampled under load")
    ap.add_argument("--idle", type=int, default=5, help="seconds sampled before the load")
    ap.add_argument("--out", help="folder for gpm-compare.txt, gpm-dmon.txt, gpm-samples.txt")
    ap.add_argument("--dry-run", action="store_true",
                    help="fake NVML and stand-in nvidia-smi: no load, constants compared")
    ap.add_argument("--self-test", action="store_true",
                    help="only check the dmon parsing on made-up outputs")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if a.port is None or a.nvidia_smi is None:
        ap.error("--port and --nvidia-smi are needed")

    report, dmon_log, samples_log = Report(), [], []
    try:
        run(a, report, dmon_log, samples_log)
    except CouldNotRun as e:
        report.could_not.append(str(e))
    except OSError as e:  # gpumon stopped answering, or nvidia-smi is not there
        report.could_not.append(f"{e.__class__.__name__}: {e}")
    if not report.compared and not report.could_not:
        report.could_not.append("nothing was compared: no GPU had both gpumon's and a "
                                "reference's figures")
    text = summary(report)
    print(text, end="")
    if a.out:
        for name, body in (("gpm-compare.txt", text), ("gpm-dmon.txt", "\n".join(dmon_log)),
                           ("gpm-samples.txt", "\n".join(samples_log) + "\n")):
            with open(os.path.join(a.out, name), "w") as f:
                f.write(body)
    if report.mismatches:
        return 1
    return 2 if report.could_not else 0


def wait_for_prof(port, deadline_s=8):
    """gpumon's view once every GPU it shows has profiling figures or a reason (the figures
    need two passes), or after deadline_s."""
    end = time.monotonic() + deadline_s
    while True:
        view = gpumon_view(scrape(port))
        if all(g["prof"] or g["reason"] or g["instances"] for g in view.values()) or \
                time.monotonic() > end:
            return view
        time.sleep(0.5)


def run(a, report, dmon_log, samples_log):
    gpumon = wait_for_prof(a.port)
    if not gpumon:
        raise CouldNotRun("gpumon shows no GPU")
    dmon = Dmon(a.nvidia_smi, dmon_log)
    pyn = Pynvml([g for g in gpumon if gpumon[g]["prof"]])
    report.notes.append("pynvml: " + (pyn.why or (f"GPU(s) {', '.join(pyn.gpus)}" if pyn.gpus
                                                  else "no GPU with GPM")))
    try:
        windows(a, report, gpumon, dmon, pyn, samples_log)
    finally:
        pyn.close()


def windows(a, report, gpumon, dmon, pyn, samples_log):
    # The idle window doubles as the probe of dmon's options: a refused variant is retried once
    # with the next before the references are given up.
    idle = observe("idle", a.idle, a.port, dmon, pyn, samples_log)
    if idle["dmon"] is None and dmon.variants and dmon.args is None:
        idle = observe("idle", a.idle, a.port, dmon, pyn, samples_log)
    report.notes.append(f"dmon: {idle['dmon_how']}")
    if idle["dmon"] is None and not pyn.gpus:
        raise CouldNotRun(f"no reference: dmon has no GPM figures ({idle['dmon_how']}) and "
                          f"{pyn.why or 'pynvml sees no GPM GPU'}")
    check_unavailable(gpumon, idle, report)
    label = "const" if a.dry_run else "idle"
    sm = compare_window(label, idle, gpumon, report)
    for gpu, (o, d, p) in sm.items():
        near = all(v is None or v <= IDLE_CEILING for v in (o, d, p))
        report.notes.append(f"idle GPU {gpu}: SM activity gpumon {_pct(o)}, dmon {_pct(d)}, "
                            f"pynvml {_pct(p)}: "
                            + ("near 0 as expected" if near else
                               "not near 0 (the fixture's constants)" if a.dry_run else
                               "not near 0: something else uses the GPU"))
    if a.dry_run:
        report.notes.append("load: skipped (dry run: the fake NVML's GPM figures are constants; "
                            "this proves the plumbing, not the numbers)")
        return
    if not a.load:
        report.notes.append("load: skipped (the bundle has no gpm-load: built without nvcc)")
        return
    load_gpu = next((g for g in sorted(gpumon, key=int) if gpumon[g]["prof"]), None)
    if load_gpu is None:
        report.notes.append("load: skipped (no GPU with profiling figures)")
        return
    under_load(a, report, gpumon, dmon, pyn, samples_log, load_gpu)


def under_load(a, report, gpumon, dmon, pyn, samples_log, load_gpu):
    # The load outlasts the window: 1.5 s before it, and dmon's start and last line after.
    load = Load(a.load, a.window + 5, load_gpu)
    try:
        started = load.running.wait(90)
        ended = load.p.poll()
        if not started or ended is not None:
            why = f"exited {ended}" if ended is not None else "did not start within 90 s"
            raise CouldNotRun(f"gpm-load {why}: " + " | ".join(load.lines[-5:]))
        time.sleep(1.5)  # one whole gpumon interval under load before the window
        obs = observe("load", a.window, a.port, dmon, pyn, samples_log)
        rc = load.wait(a.window + 60)
    finally:
        load.stop()
        samples_log.extend(load.lines)
    report.notes.append("load: " + " | ".join(load.lines))
    if rc != 0:
        raise CouldNotRun(f"gpm-load exited {rc}")
    compare_window("load", obs, gpumon, report, load_gpu=load_gpu)


def summary(report):
    head = ("GPM: gpumon's DCGM_FI_PROF_* against nvidia-smi dmon --gpm-metrics and pynvml "
            "(medians; % and MiB/s)\n"
            f"{'window':<6} {'gpu':>3}  {'metric (GPM id)':<20} {'gpumon':>8} {'dmon':>8} "
            f"{'pynvml':>8} {'tol':>8}  result\n")
    lines = report.rows + [f"note: {n}" for n in report.notes] + \
        [f"COULD NOT RUN: {c}" for c in report.could_not]
    return head + "\n".join(lines) + f"\n{report.mismatches} GPM mismatch(es)\n"


SELF_TEST_BASE = """\
# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk
# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz
    0     75     31     40      0      0      0      0      0      0   3201    345
"""
SELF_TEST_GPM = """\
# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk   aa   bb   cc   dd   ee   ff   gg   hh
# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz    %    %    %    %    %    %  MB/s  MB/s
    0     75     31     40      0      0      0      0      0      0   3201    345    -    -    -    -    -    -    -    -
    0    610     45     52    100     55      0      0      0      0   3201   1980 97.0 99.0 40.0 30.0 33.0 31.0  2.0  5.0
# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk   aa   bb   cc   dd   ee   ff   gg   hh
    0    612     45     52    100     55      0      0      0      0   3201   1980 97.0 98.0 41.0 30.0 33.0 31.0  2.0  5.0
Unexpected line the parser must skip
"""


def self_test():
    """The dmon parsing on made-up outputs (the real one is not documented); 0 when right."""
    base = parse_dmon(SELF_TEST_BASE)[0]
    names, rows = parse_dmon(SELF_TEST_GPM)
    cols, how = gpm_columns(names, base, IDS)
    checks = [
        (base[0] == "gpu" and len(base) == 12, "baseline header"),
        (len(rows) == 3 and all(g == "0" for g, _ in rows), "three rows of GPU 0"),
        (how.startswith("the columns plain dmon lacks"), f"found by difference ({how})"),
        (cols == dict(zip(IDS, range(12, 20))), f"columns in id order ({cols})"),
        (number(rows[0][1][cols[SM_ID]]) is None, "'-' is no value"),
        (number(rows[2][1][cols[SM_ID]]) == 98.0, "a value after a repeated header"),
        (gpm_columns(names, None, IDS)[1].startswith("by position"), "by position without base"),
        (gpm_columns(base, base, IDS)[0] is None, "dmon ignoring --gpm-metrics: no columns"),
        (gpm_columns(["gpu", "sm"], ["gpu", "sm"], IDS)[0] is None, "too few columns"),
    ]
    for ok, what in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
