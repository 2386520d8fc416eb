"""A container job: gpuqd runs `capsule run` as the job's user (no namespace code in the root
daemon), with the job's GPUs and names passed into the container."""

import subprocess

import capsuleutil as cu
import gpuqutil as gu
from gpuqutil import QUEUES, submit

FIXTURE = "capsule-h200-mig"


def test_container_job_through_capsule(gpuqd, workdir, users):
    ann = users.user("ann")
    lay = cu.Layout(workdir / "oci")
    lay.new_image("base", cu.busybox_rootfs)
    reg = cu.Registry(workdir / "registry")
    try:
        lay.push("base", reg.host, "lab/tools:1")
        tree = cu.make_driver_tree(workdir / "tree")
        home = cu.Home(workdir / "ann", owner=ann)
        home.write_config(driver_root=str(tree))
        subprocess.run(["chmod", "a+rx", str(workdir / "ann")], check=True)
        # The stand-in driver tree is the H200 fixture's driver: gpuqd sees the same GPUs.
        fixture = cu.reachable_copy(gu.FIXTURES / f"{FIXTURE}.json") / f"{FIXTURE}.json"
        d = gpuqd(config=QUEUES, fixture=FIXTURE, extra=f"capsule = {gu.capsule_paths()}\n")
        env = dict(home.env(), FAKE_NVML_FIXTURE=str(fixture))
        jid = submit(d, "--image", f"{reg.host}/lab/tools:1", "--mig", "1g.18gb:1", "--",
                     "sh", "-c", 'echo "job=$GPUQ_JOB_ID nv=$NVIDIA_VISIBLE_DEVICES"; '
                                 'cat /etc/hello; echo "uid=$(id -u)"',
                     user=ann, cwd=workdir / "shared", env=env)
        job = d.wait_state(jid, ("COMPLETED", "FAILED"), timeout=120)
        log = d.joblog(jid)
        assert job["state"] == "COMPLETED", log
        _, mig = gu.fixture_gpus(FIXTURE)
        assert f"job={jid} " in log
        assert job["allocated"] == [mig[1]]
        assert f"nv={mig[1]}\n" in log, log
        assert f"uid={ann[0]}\n" in log  # capsule keeps the user's own id inside
        assert job["uid"] == ann[0]
    finally:
        reg.stop()


def test_container_job_on_the_node_cache(gpuqd, workdir, users):
    """A job whose user's capsule.conf names the node cache: the job's `capsule run` takes the
    layers another user's pull put in the node cache (nothing downloaded again) and mounts them
    with fuse-overlayfs, showing the image's own files and modes, with the job's GPU."""
    ann, bob = users.user("ann"), users.user("bob")
    lay = cu.Layout(workdir / "oci")
    lay.new_image("base", cu.busybox_rootfs)
    lay.add_layer("base", [("etc", "dir", None, 0o755),
                           ("etc/job-note", "file", b"from the second layer\n", 0o600)])
    reg = cu.Registry(workdir / "registry")
    node = cu.NodeCache(workdir, users, config={"insecure_registries": reg.host})
    try:
        lay.push("base", reg.host, "lab/tools:2")
        name = f"{reg.host}/lab/tools:2"
        layers = reg.image("lab/tools", "2")[2]
        tree = cu.make_driver_tree(workdir / "tree")
        homes = {who: cu.Home(workdir / who, owner=uid) for who, uid in (("ann", ann),
                                                                          ("bob", bob))}
        homes["ann"].write_config(node_cache=str(node.socket), driver_root=str(tree))
        homes["bob"].write_config(node_cache=str(node.socket))
        subprocess.run(["chmod", "a+rx", str(workdir / "ann"), str(workdir / "bob")], check=True)
        # bob's pull puts the image in the node cache.
        r = homes["bob"].capsule("pull", "-q", name)
        assert r.returncode == 0, r.stderr + node.proc.tail()
        assert [reg.blob_gets(digest) for digest in layers] == [1, 1]
        fixture = cu.reachable_copy(gu.FIXTURES / f"{FIXTURE}.json") / f"{FIXTURE}.json"
        d = gpuqd(config=QUEUES, fixture=FIXTURE, extra=f"capsule = {gu.capsule_paths()}\n")
        env = dict(homes["ann"].env(), FAKE_NVML_FIXTURE=str(fixture))
        jid = submit(d, "--image", name, "--mig", "1g.18gb:1", "--", "sh", "-c",
                     'cat /etc/hello /etc/job-note; id -u; echo "nv=$NVIDIA_VISIBLE_DEVICES"; '
                     "busybox stat -c '%a %u %n' /etc/secret /private; ls /dev/nvidia-caps; "
                     "ls /usr/bin/nvidia-smi; "
                     "echo ---; cat /proc/self/mountinfo",
                     user=ann, cwd=workdir / "shared", env=env)
        job = d.wait_state(jid, ("COMPLETED", "FAILED"), timeout=120)
        log = d.joblog(jid)
        assert job["state"] == "COMPLETED", log + node.proc.tail()
        out, _, mountinfo = log.partition("---\n")
        _, mig = gu.fixture_gpus(FIXTURE)
        lines = out.splitlines()
        # The job's own pull first, then its command: the image's files and modes (its owner is
        # the job's user inside), the job's GPU and the driver's files over the node's layers.
        assert lines[0].startswith(f"{name}: id ") and ", 2 layers," in lines[0], log
        assert lines[1:] == [
            "hello", "from the second layer", str(ann[0]), f"nv={mig[1]}",
            f"600 {ann[0]} /etc/secret", f"700 {ann[0]} /private", "nvidia-cap21",
            "nvidia-cap22", "/usr/bin/nvidia-smi"], log
        assert cu.root_fstype(mountinfo) == "fuse.fuse-overlayfs", mountinfo
        # ann's job pulled through the service: her record names the layers bob's pull put in
        # the node cache, and nothing was downloaded again.
        rec = homes["ann"].images_json()
        assert len(rec) == 1 and rec[0]["node_cache"] is True, rec
        assert rec[0]["layer_paths"] == homes["bob"].images_json()[0]["layer_paths"]
        assert all(p.startswith(f"{node.dir}/layers/") for p in rec[0]["layer_paths"]), rec
        assert [reg.blob_gets(digest) for digest in layers] == [1, 1]
        assert f"uid {ann[0]}: {reg.host}/lab/tools@" in node.proc.log(), node.proc.tail()
    finally:
        node.stop()
        reg.stop()
