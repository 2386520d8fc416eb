"""capsule run with GPUs against a stand-in driver tree (capsule/tests/driver-tree) and the fake
NVML (two H200s, GPU 1 in MIG mode: tests/fixtures/nvml/capsule-h200-mig.json), in a small glibc
image (capsule/tests/gpu/build-glibc-image.sh) pulled from a real registry: the tree's nvidia-smi
runs inside and finds the injected libnvidia-ml.so.1 through the container's refreshed ld cache;
only the selected device nodes are there; the stale driver's library is not; the image's
NVIDIA_REQUIRE_CUDA is enforced; an ordinary user gets the same."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import capsuleutil as cu

GPU0 = "GPU-3f2a9c10-7d4e-4b1a-9c8e-0a1b2c3d4e5f"
GPU1 = "GPU-8b7c6d5e-1a2b-4c3d-8e9f-112233445566"
MIG2 = "MIG-0c1d2e3f-4a5b-5c6d-8e7f-8091a2b3c4d5"
V = "580.159.04"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
FIXTURE_SOURCE = cu.REPO / "tests" / "fixtures" / "nvml" / "capsule-h200-mig.json"
# What a test asks inside the container: device nodes, the library links, the environment.
PROBE = ("for f in /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl /dev/nvidia-uvm "
         "/dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap21 "
         "/dev/nvidia-caps/nvidia-cap22; do "
         "if [ -e $f ]; then echo \"$f=$(cat $f)\"; else echo \"$f=absent\"; fi; done; "
         f"echo libcuda.so.1=$(readlink {LIBDIR}/libcuda.so.1); "
         f"ls {LIBDIR} | grep -c 470 | sed 's/^/stale=/'; "
         "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; "
         "echo CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}")


def fixture_path():
    """The fixture, copied where a test user can read it (the checkout may not be)."""
    return cu.reachable_copy(FIXTURE_SOURCE) / FIXTURE_SOURCE.name


@pytest.fixture(scope="module")
def gpu_world():
    """The driver tree and the image (tags gpu: no GPU request; gpu-req: NVIDIA_VISIBLE_DEVICES
    all and NVIDIA_REQUIRE_CUDA cuda>=13.1), built once; (tree, layout)."""
    d = cu.short_tmpdir("capsule-gpu-")
    try:
        tree = cu.make_driver_tree(d / "tree")
        subprocess.run(["chmod", "-R", "a+rX", str(d)], check=True)
        lay = cu.Layout(d / "oci")
        subprocess.run([cu.REPO / "capsule" / "tests" / "gpu" / "build-glibc-image.sh",
                        lay.path, "gpu"], check=True, capture_output=True)
        lay.umoci("config", "--image", f"{lay.path}:gpu", "--tag", "gpu-req",
                  "--config.env", "NVIDIA_VISIBLE_DEVICES=all",
                  "--config.env", "NVIDIA_REQUIRE_CUDA=cuda>=13.1")
        yield tree, lay
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def gpu_image(gpu_world, registry, home):
    """Both tags pushed and pulled into the test's home; (tree, image name, gpu-req name)."""
    tree, lay = gpu_world
    names = []
    for tag in ("gpu", "gpu-req"):
        lay.push(tag, registry.host, f"gpu/{tag}:1")
        name = f"{registry.host}/gpu/{tag}:1"
        r = home.capsule("pull", "-q", name)
        assert r.returncode == 0, r.stderr
        names.append(name)
    return tree, names[0], names[1]


def capsule_run(home, tree, *args, env=None, user=None):
    """capsule run with the tree as driver root and the fixture visible inside; the caller's
    environment is exactly home's plus env (no GPU variables of whoever runs the tests)."""
    fixture = fixture_path()
    full = {k: v for k, v in os.environ.items() if k not in cu.GPU_REQUEST_VARIABLES}
    full.update(home.env())
    full["FAKE_NVML_FIXTURE"] = str(fixture)
    full.update(env or {})
    argv = [cu.capsule_binary(user), "run", "--pull", "never", "--no-home", "--driver-root", tree,
            "--mount", f"{fixture.parent}:{fixture.parent}:ro",
            "-e", f"FAKE_NVML_FIXTURE={fixture}", *args]
    r = subprocess.run(cu.as_user(user, argv), capture_output=True, text=True, timeout=120,
                       env=full, stdin=subprocess.DEVNULL)
    assert not any(m in r.stdout + r.stderr for m in cu.SANITIZER_MARKERS), r.stderr
    return r


def probe(home, tree, *args, **kw):
    r = capsule_run(home, tree, *args, "sh", "-c", PROBE, **kw)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return dict(line.split("=", 1) for line in r.stdout.splitlines())


def test_nvidia_smi_runs_inside(gpu_image, home):
    tree, image, _ = gpu_image
    r = capsule_run(home, tree, "--gpus", "0", image, "nvidia-smi", "-L")
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    # The fake NVML answers from the whole fixture; that it answers at all inside proves the
    # library, its soname link and the container's ld cache.
    assert f"GPU 0: NVIDIA H200 (UUID: {GPU0})" in r.stdout.splitlines(), r.stdout
    assert "MIG 1g.18gb" in r.stdout, r.stdout
    r = capsule_run(home, tree, "--gpus", "0", image, "nvidia-smi")
    assert f"Driver Version: {V}" in r.stdout and "CUDA Version: 13.0" in r.stdout, r.stdout


def test_only_selected_devices(gpu_image, home):
    tree, image, _ = gpu_image
    got = probe(home, tree, "--gpus", "0", image)
    assert got["/dev/nvidia0"] == "nvidia0"
    assert got["/dev/nvidia1"] == "absent"
    assert got["/dev/nvidiactl"] == "nvidiactl" and got["/dev/nvidia-uvm"] == "nvidia-uvm"
    assert got["/dev/nvidia-caps/nvidia-cap21"] == "absent"
    assert got["libcuda.so.1"] == f"libcuda.so.{V}"
    assert got["stale"] == "0"
    assert got["NVIDIA_VISIBLE_DEVICES"] == GPU0
    assert got["CUDA_VISIBLE_DEVICES"] == "unset"


def test_mig_device(gpu_image, home):
    tree, image, _ = gpu_image
    got = probe(home, tree, "--gpus", MIG2, image)
    assert got["/dev/nvidia1"] == "nvidia1" and got["/dev/nvidia0"] == "absent"
    assert got["/dev/nvidia-caps/nvidia-cap21"] == "nvidia-cap21"
    assert got["/dev/nvidia-caps/nvidia-cap22"] == "nvidia-cap22"
    assert got["/dev/nvidia-caps/nvidia-cap12"] == "absent"
    assert got["NVIDIA_VISIBLE_DEVICES"] == MIG2


def test_slurm_allocation_renumbered(gpu_image, home):
    tree, image, _ = gpu_image
    got = probe(home, tree, image, env={"CUDA_VISIBLE_DEVICES": "1"})
    assert got["/dev/nvidia1"] == "nvidia1" and got["/dev/nvidia0"] == "absent"
    assert got["NVIDIA_VISIBLE_DEVICES"] == GPU1
    assert got["CUDA_VISIBLE_DEVICES"] == "0"


def test_no_request_no_gpus(gpu_image, home):
    tree, image, _ = gpu_image
    got = probe(home, tree, image)
    assert got["/dev/nvidia0"] == "absent" and got["/dev/nvidiactl"] == "absent"
    assert got["NVIDIA_VISIBLE_DEVICES"] == ""
    r = capsule_run(home, tree, image, "sh", "-c", "command -v nvidia-smi || echo none")
    assert r.stdout.strip() == "none", r.stdout


def test_unknown_gpu_named(gpu_image, home):
    tree, image, _ = gpu_image
    r = capsule_run(home, tree, "--gpus", "3", image, "true")
    assert r.returncode != 0
    assert "no GPU '3'" in r.stderr and GPU0 in r.stderr and GPU1 in r.stderr, r.stderr


def test_image_requirement_enforced(gpu_image, home):
    tree, _, image_req = gpu_image
    # The image asks for every GPU and a CUDA this driver does not have.
    r = capsule_run(home, tree, image_req, "true")
    assert r.returncode != 0, r.stdout
    assert "cuda>=13.1" in r.stderr and "NVIDIA_REQUIRE_CUDA" in r.stderr, r.stderr
    assert f"driver {V} supports CUDA 13.0" in r.stderr, r.stderr
    # Without GPUs there is nothing to check; the user may switch the check off.
    assert capsule_run(home, tree, "--gpus", "none", image_req, "true").returncode == 0
    r = capsule_run(home, tree, image_req, "sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES",
                    env={"NVIDIA_DISABLE_REQUIRE": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{GPU0},{GPU1}"


def test_ordinary_user(gpu_world, registry, workdir, capsule_users):
    tree, lay = gpu_world
    uid, gid = capsule_users.user("gpu")
    home = cu.Home(workdir / "gpu-user", owner=(uid, gid))
    lay.push("gpu", registry.host, "gpu/gpu:1")
    image = f"{registry.host}/gpu/gpu:1"
    r = home.capsule("pull", "-q", image)
    assert r.returncode == 0, r.stderr
    r = capsule_run(home, tree, "--gpus", "all", image, "nvidia-smi", "-L", user=(uid, gid))
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert f"GPU 1: NVIDIA H200 (UUID: {GPU1})" in r.stdout.splitlines(), r.stdout


def test_capsule_check_reports_driver(gpu_world, home):
    tree, _ = gpu_world
    r = home.capsule("check", "--driver-root", str(tree),
                     env={"FAKE_NVML_FIXTURE": str(fixture_path())})
    out = r.stdout + r.stderr
    assert f"driver {V}, CUDA 13.0, 2 GPUs" in out, out
    assert f"compute: libcuda.so.{V}" in out, out
    assert "ignored 1 file of another driver" in out, out
