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
