"""Part 3 of the capsule benchmark: the node cache (capsule-cached, docs/capsule.md).

What a second user pays to start an image that another user of the node already pulled, next
to what the same user pays without the node cache (a cold start: pull, unpack, start) and to
the warm floor (the image in that user's own cache). Everything runs as test users made for the
part (gntest.TestUsers): the node cache tells users apart by their uid, and its service runs as
a system account of its own (capsuleutil.NodeCache). See bench/capsule/README.md.
"""

import json
import os
import pwd
import random
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

import capsuleutil as cu
import gntest
from benchlib import (
    ENTRY_COUNT,
    BenchError,
    median,
    note,
    output_of,
    ratio,
    remove_tree,
    run_logged,
    summary,
)

# The same user starts the same image four ways; and, to split (b), pulls it alone.
COLD, NODE, WARM, WARM_NODE, NODE_PULL = "cold", "node", "warm", "warm node", "node pull"
LABELS = {
    COLD: "(a) cold: own cache, empty",
    NODE: "(b) node cache, first start",
    WARM: "(c) warm: own cache",
    WARM_NODE: "(d) warm: node cache",
    NODE_PULL: "for scale: (b)'s pull alone",
}
HOW = {
    COLD: "pull + unpack + start, kernel overlay",
    NODE: "manifest + config, service, fuse-overlayfs",
    WARM: "record and layers there, kernel overlay",
    WARM_NODE: "record there, fuse-overlayfs",
    NODE_PULL: "capsule -q pull, node cache, empty own cache",
}
FIRST = (COLD, NODE, NODE_PULL)  # a new home every time
# Test users "cbn-<role>-<pid>": TestUsers removes those of a harness that was killed.
USER_PREFIX = "cbn-"
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds_of(pid):
    """User + system time of a running process (clock ticks: 10 ms steps)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def pids_of(uids, comm=None):
    """Processes whose real uid is in `uids` (and whose name is `comm`, if given)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["Uid"].split()[0]) in uids and comm in (None, fields["Name"].strip()):
            found.append(int(entry.name))
    return found


class NodeBench:
    """The node-cache part. prepare() makes the users, starts capsule-cached and fills the warm
    caches; measure() times the four starts and the pull; close() stops the service, ends what
    the test users still run and removes them, whatever state the part is left in."""

    def __init__(self, tmp, logs, capsule, cached, ref, rounds, warm_per_round):
        self.dir = Path(tmp) / "node"
        self.logs = Path(logs)
        self.capsule_src = Path(capsule)
        self.cached_src = Path(cached)
        self.ref = ref
        self.rounds, self.warm_per_round = rounds, warm_per_round
        self.users = self.node = self.child = self.log = None
        self.results = {}

    # ---- setup ----

    def cannot(self):
        """Why this part cannot run here, or None."""
        if os.geteuid() != 0:
            return "it makes test users and a service account: run as root"
        if not os.access(self.cached_src, os.X_OK):
            return (f"capsule-cached is not built at {self.cached_src} (ninja -C BUILD "
                    "capsule/capsule-cached, or set CAPSULE_CACHED)")
        if not shutil.which("fuse-overlayfs"):
            return "fuse-overlayfs not found (apt-get install fuse-overlayfs)"
        return None

    def prepare(self):
        why = self.cannot()
        if why:
            raise BenchError(f"node cache part: {why}")
        self.dir.mkdir()
        self.log = open(self.logs / "node.log", "ab")
        self.users = cu.TestUsers(USER_PREFIX)
        self.first = self.users.user("first")
        self.second = self.users.user("second")
        self.cache_user = self.users.name("cache")  # NodeCache's account
        self.names = {role: self.users.name(role) for role in ("first", "second")}
        self.capsule = self.copy_programs()
        self.node = self.start_service()
        note("node cache: the first user pulls the image through it")
        self.pull(self.home("first", self.first, node=True), self.first)
        note("node cache: the second user fills their own cache and pulls through the node cache")
        self.warm = self.home("warm", self.second, node=False)
        self.warm_node = self.home("warm-node", self.second, node=True)
        for h in (self.warm, self.warm_node):
            self.pull(h, self.second)
        self.check_homes()

    def copy_programs(self):
        """capsule and capsule-pull where a test user can run them (the checkout may be below a
        folder only root can enter); inside the temp dir, so `run`'s trap removes them."""
        bin_dir = self.dir / "bin"
        bin_dir.mkdir()
        pull = Path(os.environ.get("CAPSULE_PULL") or self.capsule_src.parent / "capsule-pull")
        for src in (self.capsule_src, pull):
            shutil.copy2(src, bin_dir / src.name)
            (bin_dir / src.name).chmod(0o755)
        bin_dir.chmod(0o755)
        return bin_dir / self.capsule_src.name

    def start_service(self):
        """capsuleutil.NodeCache with the service's default log level. NodeCache runs the
        capsule-cached of $GPUNODE_BUILD/capsule/, so that is pointed at a folder holding a
        copy of ours: any capsule-cached can be measured, not only one of a meson build."""
        fake_build = self.dir / "build" / "capsule"
        fake_build.mkdir(parents=True)
        shutil.copy2(self.cached_src, fake_build / "capsule-cached")
        os.environ["GPUNODE_BUILD"] = str(fake_build.parent)
        # The bench's registry is a local plain-HTTP one, which the service takes only when its
        # config lists it.
        host = self.ref.split("/", 1)[0]
        local = host.startswith(("127.0.0.1:", "localhost:", "[::1]:"))
        config = {"insecure_registries": host} if local else {}
        try:
            return cu.NodeCache(self.dir, self.users, extra_args=["--log-level", "info"],
                                config=config)
        except AssertionError as exc:  # wait_for's timeout and ProcessDied
            raise BenchError(f"capsule-cached did not start: {exc}") from None

    def home(self, name, user, node):
        """A capsule home owned by `user`, with the node cache configured or not."""
        h = cu.Home(self.dir / name, owner=user)
        if node:
            h.write_config(node_cache=self.node.socket)
        return h

    def env(self, home):
        env = {k: v for k, v in os.environ.items() if k not in cu.GPU_REQUEST_VARIABLES}
        env.update(home.env(), CAPSULE_PULL=str(self.capsule.parent / "capsule-pull"))
        return env

    def pull(self, home, user):
        run_logged(cu.as_user(user, [self.capsule, "-q", "pull", self.ref]),
                   self.logs / "node.log", env=self.env(home), cwd=home.home)

    def as_second(self, home, *args):
        return output_of(cu.as_user(self.second, [self.capsule, *args]), env=self.env(home),
                         cwd=home.home)

    def check_homes(self):
        """The node-cache record must point at the service's layers, with none in the user's
        own cache, and both caches must show the same tree (a whiteout lost by fuse-overlayfs
        would show in the count)."""
        rec = json.loads(self.as_second(self.warm_node, "images", "--format", "json"))[0]
        paths = rec.get("layer_paths") or []
        if not paths or not all(p.startswith(str(self.node.dir) + "/") for p in paths):
            raise BenchError(f"the node-cache record does not use the node cache: {rec}")
        own_layers = self.warm_node.cache / "layers" / "sha256"
        if own_layers.exists() and any(own_layers.iterdir()):
            raise BenchError(f"layers in the user's own cache despite the node cache: "
                             f"{own_layers}")
        counts = [self.as_second(h, "run", "--no-home", self.ref, *ENTRY_COUNT)
                  for h in (self.warm, self.warm_node)]
        self.sanity_tree = f"entries under /bin /etc /usr: own cache {counts[0]}, node cache " \
                           f"{counts[1]}"
        if counts[0] != counts[1]:
            note(f"warning: the trees differ: {self.sanity_tree}")

    # ---- the timed part ----

    def metrics(self):
        m = gntest.parse_metrics(gntest.scrape(self.node.port).text())
        return (m.get(("capsule_cached_layers_fetched_total", ()), 0),
                m.get(("capsule_cached_layer_hits_total", ()), 0))

    def measure(self):
        """`rounds` timed rounds after one untimed one; in each, the cold and the node-cache
        first start and the node-cache pull once and each warm start `warm_per_round` times, in
        an order shuffled every round (a fixed seed): a busy spell of the machine, or the
        writeback of a cold start's unpack, then lands on any of them alike."""
        note(f"part 3: node cache: {self.rounds} rounds of a cold and a node-cache first start "
             f"(and pull) and {self.warm_per_round} of each warm start, shuffled, after one "
             "untimed round")
        order = list(FIRST) + [WARM, WARM_NODE] * self.warm_per_round
        shuffle = random.Random(15).shuffle
        times = {v: [] for v in LABELS}
        cpu = {v: [] for v in LABELS}
        service_cpu = []
        fetched0, hits0 = self.metrics()
        for r in range(1 + self.rounds):
            shuffle(order)
            for variant in order:
                s0 = cpu_seconds_of(self.node.proc.pid)
                wall, c = self.start(variant, r)
                if r == 0:
                    continue
                times[variant].append(wall)
                cpu[variant].append(c)
                if variant in (NODE, NODE_PULL):
                    service_cpu.append(cpu_seconds_of(self.node.proc.pid) - s0)
        fetched1, hits1 = self.metrics()
        self.results = {v: dict(summary(t), cpu=median(cpu[v])) for v, t in times.items()}
        self.service_cpu = sum(service_cpu) / len(service_cpu)
        leftover = len(pids_of(self.user_uids(), comm="fuse-overlayfs"))
        self.sanity_node = (f"node cache fetched {fetched1 - fetched0:.0f} layer(s) and found "
                            f"{hits1 - hits0:.0f} during the timed runs (all rounds); "
                            f"fuse-overlayfs left running: {leftover}")

    def start(self, variant, r):
        """One `capsule run` of the image (or pull) as the second user; the first starts get a
        new home each time, removed afterwards (outside the timing, synced so that its
        writeback does not land on the next start)."""
        if variant in FIRST:
            home = self.home(f"{variant.replace(' ', '-')}-{r}", self.second,
                             node=variant != COLD)
        else:
            home = self.warm if variant == WARM else self.warm_node
        argv = [self.capsule, "run", "--no-home", self.ref, "/bin/true"]
        if variant == NODE_PULL:
            argv = [self.capsule, "-q", "pull", self.ref]
        try:
            return self.timed(home, argv)
        finally:
            if variant in FIRST:
                remove_tree(home.root)
                os.sync()

    def timed(self, home, argv):
        """Runs argv as the second user (setuid in the forked child: no setpriv exec to time);
        returns (wall seconds, CPU seconds of it and the children it waited for)."""
        argv = [str(a) for a in argv]
        env = self.env(home)
        uid, gid = self.second
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        self.child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=self.log, env=env, cwd=home.home, user=uid,
                                      group=gid, extra_groups=[])
        status = self.child.wait()
        elapsed = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.child = None
        if status != 0:
            raise BenchError(f"{' '.join(argv)} as {self.names['second']}: exit {status}; "
                             f"see {self.logs / 'node.log'}")
        return elapsed, ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime

    # ---- the report ----

    def report(self, big_layers):
        r = self.results
        print(f"\n== 3. node cache: `capsule run --no-home IMAGE /bin/true` of big ({big_layers} "
              f"layers) as one user, {r[COLD]['n']} rounds, shuffled, after one untimed round")
        print(f"  {'':32} {'':44} {'runs':>4} {'median':>8} {'min':>8} {'max':>8} "
              f"{'CPU':>8}  (ms)")
        for v, label in LABELS.items():
            s = r[v]
            print(f"  {label:32} {HOW[v]:44} {s['n']:4} " +
                  " ".join(f"{s[f] * 1e3:8.1f}" for f in ("median", "min", "max", "cpu")))

        def line(what, a, b, extra):
            print(f"  {what:36} {ratio(r[a]['median'], r[b]['median']):>6}{extra}")

        print("  ratios (median wall):")
        line("(b) node first start / (a) cold", NODE, COLD, "   (< 1: what the node cache saves)")
        line("(b) node first start / (c) warm", NODE, WARM, "   (a first start over the floor)")
        line("(d) warm node / (c) warm", WARM_NODE, WARM,
             "   (fuse-overlayfs against the kernel overlay)")
        print("  CPU: median user+system time of capsule and the children it waited for "
              "(capsule-pull,\n  fuse-overlayfs); capsule-cached's, per (b) start or pull: "
              f"{self.service_cpu * 1e3:.1f} ms (mean, in 10 ms clock ticks)")
        print(f"  users: {self.names['second']} starts; {self.names['first']} pulled the image "
              f"first; capsule-cached runs as {self.cache_user}")
        print(f"  sanity: {self.sanity_node}")
        print(f"  sanity: {self.sanity_tree}")

    # ---- cleanup ----

    def close(self):
        """Stops the service, ends what the test users still run (a start interrupted by
        Ctrl-C) and removes the users; safe to call twice."""
        if self.child and self.child.poll() is None:
            self.child.kill()
            self.child.wait()
        self.child = None
        if self.node:
            self.node.stop()
            self.node = None
        if self.users:
            self.end_user_processes()
            self.users.remove()
            self.users = None
        if self.log:
            self.log.close()
            self.log = None

    def user_uids(self):
        uids = set()
        for name in self.users.users.values():
            try:
                uids.add(pwd.getpwnam(name).pw_uid)
            except KeyError:
                pass  # not made yet, or gone
        return uids

    def end_user_processes(self):
        """SIGKILL, by pid, to what the test users run (only this part started anything as
        them), until nothing is left: userdel refuses a user with processes."""
        uids = self.user_uids()
        deadline = time.monotonic() + 10
        while (pids := pids_of(uids=uids)) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
