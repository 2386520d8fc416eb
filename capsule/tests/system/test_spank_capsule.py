"""spank_capsule.so in a real Slurm (slurmctld + slurmd on this host, tests/pylib/slurmtest.py),
used as Pyxis is: srun, salloc and sbatch with --container-* flags, as an ordinary user, with the
test images in a real registry. What a user relies on: the command runs in the image as
themselves, the tasks of a step share one container, named containers live on across the steps
of a job, mounts and workdir and environment follow Pyxis' rules, errors stop the step at once
with one readable line, and nothing is left behind."""

import os
import re
import shutil
import subprocess
import time

import pytest

import capsuleutil as cu
import slurmtest

pytestmark = pytest.mark.skipif(slurmtest.missing() is not None,
                                reason=f"Slurm is not installed ({slurmtest.missing()})")


class World:
    """A registry (the site's mirror of Docker Hub), a test user with a capsule home, and a Slurm
    with the plugin; plugstack_extra: more plugin arguments."""

    def __init__(self, images, users, plugstack_extra=""):
        self.dir = cu.short_tmpdir("capsule-slurm-")
        os.chmod(self.dir, 0o755)
        self.reg = cu.Registry(self.dir / "registry")
        # The nodes of most clusters reach no public registry: images come through the site's
        # mirror, under Docker Hub's names (capsule.conf registry_mirrors).
        images.push("multi", self.reg.host, "library/multi:1")
        images.push("other", self.reg.host, "other:1")
        lay = cu.Layout(self.dir / "oci")
        cu.build_entrypoint_image(lay, "entry")
        lay.push("entry", self.reg.host, "library/entry:1")
        self.image = "multi:1"
        self.user = users.user("slurm")
        self.home = cu.Home(self.dir / "user", owner=self.user)
        self.home.write_config(registry_mirrors=f"docker.io=http://{self.reg.host}")
        os.chmod(self.dir / "user", 0o755)
        plugin = slurmtest.plain_plugin(
            cu.need_built(cu.build_dir() / "capsule" / "spank_capsule.so", "spank_capsule.so"))
        self.runtime = self.dir / "run"
        capsule = cu.capsule_binary(self.user)
        self.slurm = slurmtest.Slurm(
            self.dir / "slurm",
            plugstack=f"required {plugin} runtime_path={self.runtime} capsule={capsule} "
                      f"{plugstack_extra}")

    def env(self, extra=None):
        e = {k: v for k, v in os.environ.items() if k not in cu.GPU_REQUEST_VARIABLES
             and not k.startswith(("SLURM_", "PYXIS_"))}
        e.update(self.home.env())
        e["SLURM_CONF"] = str(self.slurm.conf)
        e["PWD"] = str(self.home.home)  # where run() starts srun, as a shell would say
        e.update(extra or {})
        return e

    def run(self, *argv, env=None, timeout=120):
        r = subprocess.run(cu.as_user(self.user, argv), capture_output=True, text=True,
                           env=self.env(env), cwd=self.home.home, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        assert not any(m in r.stdout + r.stderr for m in cu.SANITIZER_MARKERS), r.stderr
        return r

    def srun(self, *args, **kw):
        return self.run("srun", "-N1", *args, **kw)

    def close(self):
        self.slurm.stop()
        self.reg.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def world(images, capsule_users):
    w = World(images, capsule_users)
    yield w
    w.close()


def ok(r, world=None):
    assert r.returncode == 0, (f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}" +
                               (("\n" + world.slurm.logs()) if world else ""))
    return r


def holders(world):
    """The capsule processes holding a container for this Slurm's steps."""
    r = subprocess.run(["pgrep", "-f", f"hold --fd 3 --data-dir {world.runtime}/"],
                       capture_output=True, text=True)
    return r.stdout.split()


def test_srun_runs_the_command_in_the_image_as_the_user(world):
    r = ok(world.srun(f"--container-image={world.image}", "sh", "-c",
                      'cat /etc/hello; id -u; echo "$A"; echo "$SLURM_JOB_ID"; pwd'), world)
    lines = r.stdout.splitlines()
    assert lines[0] == "changed"  # the image's file, from its second layer
    assert lines[1] == str(world.user[0])
    assert lines[2] == "1"  # the image's Env
    assert lines[3].isdigit()  # Slurm's environment reaches the task
    assert lines[4] == "/data"  # the image's WorkingDir, as Pyxis does without --container-workdir


def test_tasks_of_a_step_share_one_container(world):
    r = ok(world.srun("-n2", f"--container-image={world.image}", "sh", "-c",
                      'echo "$SLURM_PROCID $(readlink /proc/self/ns/mnt)"'), world)
    lines = sorted(r.stdout.splitlines())
    assert [l.split()[0] for l in lines] == ["0", "1"]
    ns = {l.split()[1] for l in lines}
    assert len(ns) == 1 and ns != {os.readlink("/proc/self/ns/mnt")}


def test_sbatch_runs_the_script_in_the_container(world, tmp_path):
    script = world.home.home / "job.sh"
    script.write_text(f"#!/bin/sh\n#SBATCH --container-image={world.image}\ncat /etc/hello\n")
    out = world.home.home / "out.txt"
    world.home.chown()
    ok(world.run("sbatch", "--wait", "-o", str(out), str(script)), world)
    assert out.read_text() == "changed\n"
    script.write_text("#!/bin/sh\ncat /etc/other\n")
    world.home.chown()
    ok(world.run("sbatch", "--wait", "-o", str(out),
                 f"--container-image={world.reg.host}/other:1", str(script)), world)
    assert out.read_text() == "other\n"


def test_named_container_lives_across_steps_of_a_job(world):
    script = (f"srun --container-image={world.image} --container-name=dev --container-writable "
              "sh -c 'echo made > /etc/mark' && "
              "srun --container-name=dev cat /etc/mark && "
              f"srun --container-image={world.image} --container-name=dev:create true; "
              "echo create=$?")
    r = ok(world.run("salloc", "-n1", "sh", "-c", script), world)
    assert "made" in r.stdout and "create=1" in r.stdout, r.stdout + r.stderr
    assert "already exists" in r.stderr
    # A job's named containers go with the job (container_scope=job).
    r = world.srun("--container-name=dev", "true")
    assert r.returncode != 0 and "no image to create it from" in r.stderr, r.stderr


def test_mounts_workdir_and_env(world, tmp_path):
    data = world.dir / "shared data"
    data.mkdir(exist_ok=True)
    (data / "f").write_text("host file\n")
    os.chmod(data, 0o755)
    r = ok(world.srun(f"--container-image={world.image}",
                      f"--container-mounts={data}:/in:ro,tmpfs:/scratch:size=1M",
                      "--container-workdir=/in", "sh", "-c",
                      "cat f; pwd; echo x > /in/g; echo w=$?; echo y > /scratch/t && cat /scratch/t"),
           world)
    assert r.stdout.splitlines()[:2] == ["host file", "/in"]
    assert "w=1" in r.stdout and "y" in r.stdout.splitlines()[-1]
    r = world.srun(f"--container-image={world.image}", "--container-mounts=/no/such/dir:/x", "true")
    assert r.returncode != 0 and "source path does not exist: /no/such/dir" in r.stderr, r.stderr
    # The image's A wins over the job's, unless --container-env names it.
    r = ok(world.srun(f"--container-image={world.image}", "sh", "-c", 'echo "$A"',
                      env={"A": "job"}), world)
    assert r.stdout == "1\n"
    r = ok(world.srun(f"--container-image={world.image}", "--container-env=A", "sh", "-c",
                      'echo "$A"', env={"A": "job"}), world)
    assert r.stdout == "job\n"


def test_pyxis_environment_defaults(world):
    r = ok(world.srun("sh", "-c", "cat /etc/hello",
                      env={"PYXIS_CONTAINER_IMAGE": world.image}), world)
    assert r.stdout == "changed\n"
    # The command line wins.
    r = ok(world.srun(f"--container-image={world.reg.host}#other:1", "cat", "/etc/other",
                      env={"PYXIS_CONTAINER_IMAGE": world.image}), world)
    assert r.stdout == "other\n"
    r = world.srun("true", env={"PYXIS_CONTAINER_IMAGE": world.image,
                                "PYXIS_CONTAINER_WRITABLE": "maybe"})
    assert r.returncode != 0 and "PYXIS_CONTAINER_WRITABLE" in r.stderr, r.stderr


def test_invalid_arguments_are_refused_before_anything_starts(world):
    for args, said in [
        (["--container-name=a:later"], 'flag must be "auto"'),
        (["--container-mounts=/tmp:"], "invalid format: /tmp:"),
        (["--container-image=Not/Valid"], "--container-image"),
        (["--container-writable", "--container-readonly"], "both --container-writable"),
        (["--container-image=x", "--container-image=y"], "specified multiple times"),
    ]:
        t0 = time.monotonic()
        r = world.srun(*args, "true")
        assert r.returncode != 0 and said in r.stderr, (args, r.stderr)
        assert time.monotonic() - t0 < 30


def test_a_bad_image_fails_the_step_fast_with_one_line(world):
    t0 = time.monotonic()
    r = world.srun("--container-image=127.0.0.1:1/nothing/here:1", "echo", "ran")
    assert r.returncode != 0 and "ran" not in r.stdout
    assert "capsule:" in r.stderr and "nothing/here" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 60
    assert not holders(world)


def test_scancel_leaves_nothing_behind(world):
    job = world.run("sbatch", "--parsable", f"--container-image={world.image}",
                    "--container-name=long", "--wrap", "sleep 300")
    ok(job, world)
    jid = job.stdout.strip().split(";")[0]
    job_dir = world.runtime / str(world.user[0]) / "jobs" / jid
    try:
        cu.wait_for(lambda: (job_dir / "containers" / "long").is_dir() and holders(world), 60,
                    "the batch step's named container")
    finally:
        ok(world.run("scancel", jid))
    cu.wait_for(lambda: not holders(world), 60, "the container to go with the job")
    try:
        cu.wait_for(lambda: not job_dir.exists(), 60, "the job's epilog to remove its folder")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{world.slurm.logs()}") from None


GPU_PROBE = ("for d in /dev/nvidia0 /dev/nvidia1; do [ -e $d ] && echo $d; done; "
             "echo CUDA=${CUDA_VISIBLE_DEVICES-unset} NVIDIA=${NVIDIA_VISIBLE_DEVICES-unset}")
GPU0 = "GPU-3f2a9c10-7d4e-4b1a-9c8e-0a1b2c3d4e5f"


def test_gpus_are_exactly_the_allocations(world):
    """Stand-in GPUs: Slurm's GRES (File=/dev/zero, /dev/full) and the fake NVML behind a
    stand-in driver tree, whose two GPUs are Slurm's two."""
    tree = cu.make_driver_tree(world.dir / "driver")
    fixture = cu.reachable_copy(cu.REPO / "tests" / "fixtures" / "nvml" / "capsule-h200-mig.json")
    fixture = fixture / "capsule-h200-mig.json"
    world.home.write_config(registry_mirrors=f"docker.io=http://{world.reg.host}",
                            driver_root=str(tree))
    env = {"FAKE_NVML_FIXTURE": str(fixture)}
    try:
        r = ok(world.srun("--gres=gpu:1", f"--container-image={world.image}", "sh", "-c",
                          GPU_PROBE, env=env), world)
        # The step's one GPU, numbered 0 inside; the other one is not there.
        assert r.stdout.splitlines() == ["/dev/nvidia0", f"CUDA=0 NVIDIA={GPU0}"], r.stdout
        r = ok(world.srun("--gres=gpu:2", f"--container-image={world.image}", "sh", "-c",
                          GPU_PROBE, env=env), world)
        assert r.stdout.splitlines()[:2] == ["/dev/nvidia0", "/dev/nvidia1"], r.stdout
        assert r.stdout.splitlines()[2].startswith("CUDA=0,1 "), r.stdout
        # --gpus-per-task: each task sees its own GPU, numbered as the container numbers them.
        r = ok(world.srun("-n2", "--gpus-per-task=1", f"--container-image={world.image}", "sh",
                          "-c", 'echo "$SLURM_PROCID $CUDA_VISIBLE_DEVICES"', env=env), world)
        assert sorted(r.stdout.splitlines()) == ["0 0", "1 1"], r.stdout + r.stderr
        # CUDA_VISIBLE_DEVICES set by the user decides nothing.
        r = ok(world.srun(f"--container-image={world.image}", "sh", "-c", GPU_PROBE,
                          env=dict(env, CUDA_VISIBLE_DEVICES="0,1")), world)
        assert "/dev/nvidia" not in r.stdout, r.stdout
        r = ok(world.srun(f"--container-image={world.image}", "sh", "-c", GPU_PROBE, env=env),
               world)
        # A step without GPUs gets none.
        assert r.stdout.splitlines() == ["CUDA=unset NVIDIA=unset"], r.stdout
    finally:
        world.home.write_config(registry_mirrors=f"docker.io=http://{world.reg.host}")


def test_a_killed_slurmstepd_leaves_no_container(world):
    job = ok(world.run("sbatch", "--parsable", f"--container-image={world.image}",
                       "--container-name=doomed", "--wrap", "sleep 300"), world)
    jid = job.stdout.strip().split(";")[0]
    job_dir = world.runtime / str(world.user[0]) / "jobs" / jid
    try:
        cu.wait_for(lambda: (job_dir / "containers" / "doomed").is_dir() and holders(world), 60,
                    "the batch step's named container")
        stepd = subprocess.run(["pgrep", "-f", f"slurmstepd: \\[{jid}.batch\\]"],
                               capture_output=True, text=True).stdout.split()
        assert stepd, "no slurmstepd for the batch step"
    except AssertionError:
        world.run("scancel", jid)
        raise
    for pid in stepd:
        os.kill(int(pid), 9)
    # The holder's socket closed with slurmstepd: the container goes at once.
    cu.wait_for(lambda: not holders(world), 30, "the container to go with its slurmstepd")
    world.run("scancel", jid)
    cu.wait_for(lambda: not job_dir.exists(), 90, "the job's folder to be removed")


def test_entrypoint_runs_when_asked(world):
    # Not by default (Pyxis' execute_entrypoint=0): the command runs in the image's WORKDIR.
    r = ok(world.srun("--container-image=entry:1", "sh", "-c", 'echo "${FROM_ENTRY-no}"; pwd'),
           world)
    assert r.stdout == "no\n/\n"
    r = ok(world.srun("--container-image=entry:1", "--container-entrypoint",
                      "--container-entrypoint-log", "sh", "-c", 'echo "$FROM_ENTRY"; pwd'), world)
    # The environment and directory the entrypoint set up, and its output.
    assert r.stdout == "yes\n/etc\n", r.stdout + r.stderr
    assert "capsule: entrypoint: entry ran" in r.stderr
    r = ok(world.srun("--container-image=entry:1", "sh", "-c", 'echo "${FROM_ENTRY-no}"',
                      env={"PYXIS_CONTAINER_ENTRYPOINT": "1"}), world)
    assert r.stdout == "yes\n"


def test_mpi_tasks_keep_their_pmi_connection(world):
    # PMI-2: Slurm hands each task its rank and a socket to the PMI server (PMI_FD); inside the
    # container they are the task's own.
    r = ok(world.srun("--mpi=pmi2", "-n2", f"--container-image={world.image}", "sh", "-c",
                      'echo "$PMI_RANK/$PMI_SIZE $(readlink /proc/self/fd/$PMI_FD | cut -c1-7)"'),
           world)
    assert sorted(r.stdout.splitlines()) == ["0/2 socket:", "1/2 socket:"], r.stdout


def test_global_scope_and_no_sbatch_support(images, capsule_users, workdir):
    """container_scope=global: a named container outlives the job; sbatch_support=0: sbatch does
    not take the flags. And an argument the plugin does not know keeps slurmd from starting."""
    plugin = slurmtest.plain_plugin(cu.build_dir() / "capsule" / "spank_capsule.so")
    with pytest.raises(AssertionError) as bad:
        slurmtest.Slurm(workdir / "bad", plugstack=f"required {plugin} use_squashfuse=1")
    assert "unknown configuration option: use_squashfuse" in str(bad.value)
    w = World(images, capsule_users, "container_scope=global sbatch_support=0")
    try:
        ok(w.srun(f"--container-image={w.image}", "--container-name=kept", "--container-writable",
                  "sh", "-c", "echo from-job-1 > /etc/mark"), w)
        r = ok(w.srun("--container-name=kept", "cat", "/etc/mark"), w)
        assert r.stdout == "from-job-1\n"
        assert (w.runtime / str(w.user[0]) / "global" / "containers" / "kept").is_dir()
        r = w.run("sbatch", f"--container-image={w.image}", "--wrap", "true")
        assert r.returncode != 0 and "container-image" in r.stderr, r.stderr
    finally:
        w.close()


def test_container_save_and_run_the_file(world):
    # Relative to the job's working directory (the home here), as Pyxis takes it.
    saved = world.home.home / "env.tar"
    r = ok(world.srun("-n2", f"--container-image={world.image}", "--container-writable",
                      "--container-save=env.tar", "sh", "-c",
                      'if [ "$SLURM_PROCID" = 0 ]; then echo kept > /etc/mark; fi'), world)
    assert "saved the container to " + str(saved) in r.stderr, r.stderr
    assert saved.is_file() and saved.stat().st_uid == world.user[0]
    r = ok(world.srun("--container-image=./env.tar", "cat", "/etc/mark", "/etc/hello"), world)
    assert r.stdout == "kept\nchanged\n"
    r = world.srun(f"--container-image={world.image}", "--container-save=/nonexistent/dir/x.tar",
                   "true")
    assert r.returncode != 0 and "--container-save" in r.stderr, r.stderr


def test_a_running_named_container_is_joined(world):
    """--container-name's flags, as Pyxis has them: auto joins a container another step holds
    (it sees that step's files in /tmp, a tmpfs of the container's own), exec only joins, and
    exec of one that is not running fails."""
    script = (f"srun -n1 --overlap --container-image={world.image} --container-name=svc sh -c "
              "'echo from-first > /tmp/f; sleep 30' & first=$!; "
              "for i in $(seq 50); do srun -n1 --overlap --container-name=svc:exec true "
              "2>/dev/null && break; sleep 0.2; done; "
              "srun -n1 --overlap --container-name=svc cat /tmp/f; "
              "srun -n1 --overlap --container-name=svc:exec cat /tmp/f; "
              "srun -n1 --overlap --container-name=svc:no_exec true; echo no_exec=$?; "
              "kill $first; wait; "
              # The first step's container is let go in slurmstepd's exit, after srun returns.
              "for i in $(seq 50); do srun -n1 --overlap --container-name=svc:exec true "
              "2>/dev/null || break; sleep 0.2; done; "
              "srun -n1 --overlap --container-name=svc:exec true; echo exec=$?")
    r = ok(world.run("salloc", "-n2", "sh", "-c", script), world)
    assert r.stdout.count("from-first") == 2, r.stdout + r.stderr
    assert "no_exec=1" in r.stdout and "exec=1" in r.stdout, r.stdout + r.stderr
    assert "already running" in r.stderr and "is not running" in r.stderr, r.stderr
    # slurmd said which Slurm the plugin was built for.
    log = (world.slurm.dir / "log" / "d.log").read_text(errors="replace")
    assert re.search(r"capsule: spank_capsule \S+, built for Slurm \d+\.\d+\.\d+", log)


def test_pmix_tasks_reach_their_server(world):
    # PMIx (Slurm's mpi/pmix with Debian's libpmix2): each task has its rank, the server's
    # address (TCP on the loopback, which the container shares with the host) and its directory
    # with the shared-memory store, bound where Slurm has it.
    r = ok(world.srun("--mpi=pmix", "-n2", f"--container-image={world.image}", "sh", "-c",
                      'echo "$PMIX_RANK ${PMIX_SERVER_URI41%%;*} '
                      '$(ls "$PMIX_SERVER_TMPDIR" | grep -c pmix_dstor)"'), world)
    lines = sorted(r.stdout.splitlines())
    assert [l.split()[0] for l in lines] == ["0", "1"], r.stdout + r.stderr
    assert all(l.split()[1].startswith("pmix-server.") and int(l.split()[2]) > 0
               for l in lines), r.stdout + r.stderr


def run_as(world, user, home, *argv, timeout=120):
    """world.run() as another user of the same Slurm, with that user's capsule home."""
    env = world.env()
    env.update(home.env())
    env["PWD"] = str(home.home)
    r = subprocess.run(cu.as_user(user, argv), capture_output=True, text=True, env=env,
                       cwd=home.home, timeout=timeout, stdin=subprocess.DEVNULL)
    assert not any(m in r.stdout + r.stderr for m in cu.SANITIZER_MARKERS), r.stderr
    return r


NODE_PROBE = ("cat /etc/hello; ls /data; cat /opt/plain /opt/zstd; id -u; "
              "busybox stat -c '%a %u %n' /etc/secret /private; echo ---; cat /proc/self/mountinfo")


def test_steps_run_on_the_node_cache(images, capsule_users):
    """Users whose capsule.conf names the node cache: a step's implicit pull goes through
    capsule-cached (one download per layer for the node, whoever asks next), and the step's
    container mounts the service's layers with fuse-overlayfs, showing the image's own files,
    modes and deletions; a named container on them lives across the steps of a job; a running
    step holds its layers locked; without the service, what the user has still starts."""
    w = World(images, capsule_users)
    node = cu.NodeCache(w.dir, capsule_users, config={"insecure_registries": w.reg.host})
    try:
        image = f"{w.reg.host}/library/multi:1"
        layers = w.reg.image("library/multi", "1")[2]
        w.home.write_config(node_cache=str(node.socket))
        r = ok(w.srun(f"--container-image={image}", "sh", "-c", NODE_PROBE), w)
        out, _, mountinfo = r.stdout.partition("---\n")
        uid = w.user[0]
        assert out.splitlines() == ["changed", "fresh", "plain", "zstd", str(uid),
                                    f"600 {uid} /etc/secret", f"700 {uid} /private"], r.stdout
        assert cu.root_fstype(mountinfo) == "fuse.fuse-overlayfs", mountinfo
        # The step's pull was the service's: the user's record names its layer directories, the
        # registry served each layer once, and the service says whom it served.
        rec = w.home.images_json()
        assert len(rec) == 1 and rec[0]["node_cache"] is True, rec
        paths = rec[0]["layer_paths"]
        assert len(paths) == 5 and all(
            os.path.dirname(p) == str(node.dir / "layers") for p in paths), paths
        assert [w.reg.blob_gets(d) for d in layers] == [1] * 5
        assert f"uid {uid}: {w.reg.host}/library/multi@" in node.proc.log(), node.proc.tail()
        # Another step of the same user, and a step of another user, download no layer again.
        ok(w.srun(f"--container-image={image}", "true"), w)
        other = capsule_users.user("slurmb")
        home2 = cu.Home(w.dir / "user2", owner=other)
        home2.write_config(node_cache=str(node.socket))
        os.chmod(w.dir / "user2", 0o755)
        r = run_as(w, other, home2, "srun", "-N1", f"--container-image={image}", "sh", "-c",
                   NODE_PROBE)
        ok(r, w)
        out, _, mountinfo = r.stdout.partition("---\n")
        assert out.splitlines()[4:] == [str(other[0]), f"600 {other[0]} /etc/secret",
                                        f"700 {other[0]} /private"], r.stdout
        assert cu.root_fstype(mountinfo) == "fuse.fuse-overlayfs", mountinfo
        assert [w.reg.blob_gets(d) for d in layers] == [1] * 5
        rec2 = home2.images_json()
        assert rec2[0]["node_cache"] is True and rec2[0]["layer_paths"] == paths, rec2
        assert f"uid {other[0]}: {w.reg.host}/library/multi@" in node.proc.log()
        # A named container on the node's layers: the first step's change is there in the
        # second, over the same layers.
        script = (f"srun --container-image={image} --container-name=nc --container-writable "
                  "sh -c 'echo made > /etc/mark; rm /etc/new' && "
                  "srun --container-name=nc sh -c 'cat /etc/mark /etc/hello; ls /etc/new; "
                  "busybox stat -c %a /etc/secret'")
        r = ok(w.run("salloc", "-n1", "sh", "-c", script), w)
        assert r.stdout.splitlines() == ["made", "changed", "600"], r.stdout + r.stderr
        assert "/etc/new: No such file" in r.stderr, r.stderr  # the first step deleted it
        # While a step's container runs, its capsule holds the layers locked, so that
        # `capsule gc --node` and the service's eviction leave them.
        job = ok(w.run("sbatch", "--parsable", f"--container-image={image}", "--wrap",
                       "sleep 60"), w)
        jid = job.stdout.strip().split(";")[0]
        try:
            cu.wait_for(lambda: all(cu.layer_locked(p) for p in paths), 60,
                        "the batch step's container to hold the node layers")
        finally:
            ok(w.run("scancel", jid))
        cu.wait_for(lambda: not any(cu.layer_locked(p) for p in paths), 60,
                    "the layers' locks to go with the job")
        assert [w.reg.blob_gets(d) for d in layers] == [1] * 5
        # Without the service, an image the user has still starts (a start only mounts); one
        # to pull fails the step at once, naming the node cache.
        node.stop()
        r = ok(w.srun(f"--container-image={image}", "cat", "/etc/hello"), w)
        assert r.stdout == "changed\n"
        t0 = time.monotonic()
        r = w.srun(f"--container-image={w.reg.host}/other:1", "echo", "ran")
        assert r.returncode != 0 and "ran" not in r.stdout, r.stdout
        assert f"node cache at {node.socket}" in r.stderr, r.stderr
        assert time.monotonic() - t0 < 60 and not holders(w)
    finally:
        node.stop()
        w.close()
