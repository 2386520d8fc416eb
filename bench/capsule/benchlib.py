"""What every part of the capsule benchmark needs: its error, progress notes, the statistics, and
running programs and removing trees. Standard library only."""

import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path


# What a container counts to show that it sees the whole image: a missing whiteout or layer
# changes the number. (capsule adds /etc/hosts and /etc/resolv.conf as mount points; they are
# left out.)
ENTRY_COUNT = ["/bin/sh", "-c",
               "find /bin /etc /usr -xdev ! -path /etc/hosts ! -path /etc/resolv.conf | wc -l"]


class BenchError(Exception):
    pass


def note(msg):
    """Progress, on stderr, so stdout is the report alone."""
    print(f"bench: {msg}", file=sys.stderr, flush=True)


# ---- statistics ----


def percentile(values, p):
    """Nearest-rank percentile of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, -(-len(s) * p // 100) - 1))
    return s[int(k)]


def median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def summary(values):
    return {"n": len(values), "mean": sum(values) / len(values), "median": median(values),
            "p90": percentile(values, 90), "min": min(values), "max": max(values)}


def ratio(a, b):
    return f"{a / b:.2f}" if b > 0 else "n/a"


# ---- processes and files ----


def run_logged(argv, log, env=None, timeout=600, cwd=None):
    """Runs argv to completion with its output appended to log; raises BenchError with the
    log's tail when it fails. Returns (wall seconds, CPU seconds of it and its waited-for
    children)."""
    argv = [str(a) for a in argv]
    with open(log, "ab") as f:
        f.write(f"$ {shlex.join(argv)}\n".encode())
        f.flush()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                           env=env, timeout=timeout, cwd=cwd)
        elapsed = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
    if r.returncode != 0:
        tail = "\n".join(Path(log).read_text(errors="replace").splitlines()[-15:])
        raise BenchError(f"{argv[0]} exited with {r.returncode}:\n{tail}")
    return elapsed, cpu


def output_of(argv, env=None, cwd=None):
    r = subprocess.run([str(a) for a in argv], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, env=env, timeout=120, cwd=cwd)
    if r.returncode != 0:
        raise BenchError(f"{shlex.join(map(str, argv))}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout.strip()


def remove_tree(path):
    """rm -rf that also gets through directories an unpack left without write permission, and
    never follows a mount out of the tree."""
    path = Path(path)
    if not path.exists():
        return
    if subprocess.run(["rm", "-rf", "--one-file-system", str(path)],
                      stderr=subprocess.DEVNULL).returncode != 0:
        subprocess.run(["chmod", "-R", "u+rwX", str(path)], stderr=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=True)


def tree_bytes(path):
    return int(output_of(["du", "-sb", path]).split()[0])


def version_of(argv):
    try:
        return output_of(argv).splitlines()[0]
    except (BenchError, OSError, IndexError):
        return "?"
