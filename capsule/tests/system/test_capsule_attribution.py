"""Which container a GPU process belongs to, as gpumon tells it: a named capsule container runs in
a cgroup of its own (capsule-NAME.scope) wherever the user may make one, so gpumon's label comes
from where the process is, which the process cannot change, and not from CAPSULE_NAME, which any
process can set. Real capsule, real gpumon (fake NVML naming the container's real pid)."""

import os
import subprocess
from pathlib import Path

import pytest

import capsuleutil as cu
import gpumonutil as gu

GIB = 1 << 30


def v2_mount():
    """The cgroup v2 hierarchy: /sys/fs/cgroup on a pure v2 host, its unified/ on a hybrid one."""
    for place in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        r = subprocess.run(["stat", "-f", "-c", "%T", place], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip() == "cgroup2fs":
            return Path(place)
    pytest.skip("no cgroup v2 hierarchy on this host")


@pytest.fixture
def delegated(capsule_users):
    """A cgroup handed to a test user, as systemd's Delegate=yes or a batch system hands one:
    the directory and the files that move processes are the user's. Yields (cgroup, user)."""
    user = capsule_users.user("attr")
    cg = v2_mount() / f"gn-attr-{os.getpid()}"
    cg.mkdir()
    for p in (cg, cg / "cgroup.procs", cg / "cgroup.threads", cg / "cgroup.subtree_control"):
        os.chown(p, *user)
    yield cg, user
    # Whatever is left in it (a failed test's processes) goes first, then the cgroups.
    for d in sorted(cg.rglob("*.scope"), reverse=True) + [cg]:
        if (d / "cgroup.kill").exists():
            (d / "cgroup.kill").write_text("1")
    for d in sorted((p for p in cg.rglob("*") if p.is_dir()), reverse=True) + [cg]:
        cu.wait_for(lambda: subprocess.run(["rmdir", str(d)]).returncode == 0, 10,
                    f"{d} to be removable")


def start_in(cgroup, user, home, argv, systemd=False):
    """capsule ARGV as user, started from inside cgroup (as a job's or a service's shell is);
    with systemd, on what looks like a host whose cgroups systemd manages (/run/systemd/system,
    in a mount namespace of its own)."""
    env = {k: v for k, v in os.environ.items() if k not in cu.GPU_REQUEST_VARIABLES}
    env.update(home.env())
    script = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
    if systemd:
        script = ('mount -t tmpfs none /run && mkdir -p /run/systemd/system && ' + script)
    argv = ["sh", "-c", script, str(cgroup), *cu.as_user(user, [cu.capsule_binary(user), *argv])]
    if systemd:
        argv = ["unshare", "--mount", "--propagation", "private"] + argv
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_named_container_is_attributed_by_its_cgroup(images, registry, workdir, delegated):
    cg, user = delegated
    os.chmod(workdir, 0o755)
    home = cu.Home(workdir / "attr", owner=user)
    images.push("multi", registry.host, "multi:1")
    name = f"{registry.host}/multi:1"
    r = home.capsule("pull", "-q", name)
    assert r.returncode == 0, r.stderr
    out = workdir / "out"
    out.mkdir()
    os.chown(out, *user)
    # The command claims another container's name, as any process could.
    script = "echo $$ > /out/pid; exec env CAPSULE_NAME=victim busybox sleep 300"
    proc = start_in(cg, user, home, ["run", "--no-home", "--name", "trainer", "--mount",
                                     f"{out}:/out", name, "-c", script])
    d = None
    try:
        cu.wait_for(lambda: (out / "pid").exists() and (out / "pid").read_text().strip(), 30,
                    "the container's command to start")
        pid = int((out / "pid").read_text())
        cu.wait_for(lambda: b"CAPSULE_NAME=victim" in Path(f"/proc/{pid}/environ").read_bytes(),
                    10, "the command to exec sleep with the claimed name")
        scope = cg / "capsule-trainer.scope"
        own = Path(f"/proc/{pid}/cgroup").read_text()
        assert f"0::/{cg.name}/capsule-trainer.scope\n" in own, own
        # capsule exec joins the container's cgroup too.
        joined = start_in(cg, user, home, ["exec", "trainer", "busybox", "grep", "^0::",
                                            "/proc/self/cgroup"])
        stdout, stderr = joined.communicate(timeout=30)
        assert joined.returncode == 0 and stdout == f"0::/{cg.name}/capsule-trainer.scope\n", \
            (stdout, stderr)
        fx = gu.load_fixture("consumer-1gpu")
        fx["gpus"][0]["processes"] = [{"pid": pid, "used_memory": 2 * GIB, "type": "compute"}]
        d = gu.Gpumon(workdir, fx)
        d.wait_ready()
        s = d.wait_metric("the container's process", lambda s: gu.metric_series(
            s, "gpumon_process_memory_bytes", pid=str(pid)))
        (labels, value), = gu.metric_series(s, "gpumon_process_memory_bytes", pid=str(pid))
        assert value == 2 * GIB
        assert labels["container"] == "capsule://trainer", labels
    finally:
        if d:
            problem = gu.check_stopped(d)
        r = home.capsule("rm", "-f", "trainer")
        proc.communicate(timeout=30)
    assert not (d and problem), problem
    assert r.returncode == 0, r.stderr
    # The scope goes with the container.
    assert not scope.exists()


def test_without_a_cgroup_of_its_own_the_run_goes_on(images, registry, workdir, capsule_users):
    """Where the user may not make a cgroup (a login session's, owned by root), the container
    runs as before, attributed by CAPSULE_NAME, and nothing is said unless asked."""
    user = capsule_users.user("noattr")
    os.chmod(workdir, 0o755)
    home = cu.Home(workdir / "noattr", owner=user)
    images.push("multi", registry.host, "multi:1")
    name = f"{registry.host}/multi:1"
    assert home.capsule("pull", "-q", name).returncode == 0
    r = home.capsule("run", "--no-home", "--name", "plain", name, "-c",
                     "grep ^0:: /proc/self/cgroup; echo $CAPSULE_NAME")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    lines = r.stdout.splitlines()
    assert "capsule-plain.scope" not in lines[0] and lines[1] == "plain", r.stdout


def test_under_systemd_only_a_delegated_cgroup_gets_scopes(images, registry, workdir,
                                                            delegated):
    """Where systemd manages the cgroups, a cgroup it did not delegate is its own to change (its
    single-writer rule): capsule makes no scope there and says why under -v; a unit with
    Delegate=yes, which systemd marks with the user.delegate xattr, gets one."""
    cg, user = delegated
    os.chmod(workdir, 0o755)
    home = cu.Home(workdir / "sd", owner=user)
    images.push("multi", registry.host, "multi:1")
    name = f"{registry.host}/multi:1"
    assert home.capsule("pull", "-q", name).returncode == 0
    show = ["-v", "run", "--no-home", "--name", "svc", name, "-c", "grep ^0:: /proc/self/cgroup"]
    p = start_in(cg, user, home, show, systemd=True)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and out == f"0::/{cg.name}\n", (out, err)
    assert "did not delegate it" in err, err
    os.setxattr(cg, "user.delegate", b"1")
    p = start_in(cg, user, home, show, systemd=True)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and out == f"0::/{cg.name}/capsule-svc.scope\n", (out, err)
