"""capsule hold: a container held for host processes to join (what spank_capsule.so starts for
a Slurm step). The line it writes, joining it from the host, its end when the socket closes, and
named containers: created once, kept, joined while held, refused with --create-only."""

import json
import os
import shutil
import socket
import subprocess

import pytest

import capsuleutil as cu

IMAGE_TAG = "multi:1"


@pytest.fixture(scope="module")
def env(images):
    d = cu.short_tmpdir("capsule-hold-")
    reg = cu.Registry(d / "registry")
    images.push("multi", reg.host, IMAGE_TAG)
    # An image whose entrypoint sets up the environment and then runs its command.
    lay = cu.Layout(d / "oci")
    cu.build_entrypoint_image(lay, "entry")
    lay.push("entry", reg.host, "entry:1")
    home = cu.Home(d / "user")
    name = f"{reg.host}/{IMAGE_TAG}"
    for n in (name, f"{reg.host}/entry:1"):
        r = home.capsule("pull", "-q", n)
        assert r.returncode == 0, r.stderr
    yield home, name
    reg.stop()
    shutil.rmtree(d, ignore_errors=True)


class Held:
    """capsule hold --fd N ARGS, its line read; close() lets it end."""

    def __init__(self, home, *args):
        self.ours, theirs = socket.socketpair()
        env = {k: v for k, v in os.environ.items() if k not in cu.GPU_REQUEST_VARIABLES}
        env.update(home.env())
        fd = theirs.fileno()
        self.proc = subprocess.Popen([cu.capsule_binary(), "hold", "--fd", str(fd), *args],
                                     pass_fds=(fd,), env=env, stderr=subprocess.PIPE, text=True)
        theirs.close()
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = self.ours.recv(65536)
            if not chunk:
                break
            buf += chunk
        self.line = json.loads(buf) if buf else None

    def stderr(self):
        return self.proc.communicate(timeout=30)[1]

    def close(self):
        self.ours.close()
        return self.proc.wait(timeout=30)


def inside(pid, *cmd):
    """Runs cmd in the held container's namespaces and root, from the host (as root)."""
    return subprocess.run(["nsenter", "-t", str(pid), "-U", "-m", "-r", "-w", "--preserve-credentials",
                           *cmd], capture_output=True, text=True, timeout=30)


def test_hold_writes_its_line_and_ends_with_the_socket(env):
    home, name = env
    h = Held(home, "--no-home", "-e", "B=2", "-w", "/etc", name)
    assert h.line, h.stderr()
    pid = h.line["pid"]
    assert h.line["joined"] is False and h.line["cwd"] == "/etc"
    # The image's entrypoint and command, for a caller that wants to run them.
    assert h.line["argv"] == ["/bin/sh", "-c", "echo hi"]
    assert "A=1" in h.line["env"] and "B=2" in h.line["env"] and "PATH=/bin" in h.line["env"]
    # The held process runs nothing of the image: it is capsule's, in the container's root.
    r = inside(pid, "/bin/cat", "/etc/hello")
    assert r.stdout == "changed\n", r.stderr
    assert os.path.exists(f"/proc/{pid}")
    assert h.close() == 0
    assert not os.path.exists(f"/proc/{pid}") or \
        open(f"/proc/{pid}/stat").read().split()[2] == "Z"


def test_hold_failure_writes_nothing_and_says_why(env):
    home, _ = env
    h = Held(home, "--pull", "never", "127.0.0.1:1/nothing:here")
    assert h.line is None
    err = h.stderr()
    assert h.proc.returncode == 125 and "not in the cache" in err, err
    r = home.capsule("hold", "--no-home", "x")
    assert r.returncode == 2 and "--fd is required" in r.stderr, r.stderr
    r = home.capsule("run", "--join", "x")
    assert r.returncode == 2 and "are for `capsule hold`" in r.stderr, r.stderr


def test_named_hold_keeps_its_layer_and_joins(env, workdir):
    home, name = env
    data = workdir / "slurm-data"
    h = Held(home, "--data-dir", str(data), "--name", "keep", "--writable", "--no-home", name)
    assert h.line, h.stderr()
    r = inside(h.line["pid"], "/bin/sh", "-c", "echo kept > /etc/mark")
    assert r.returncode == 0, r.stderr
    # Held already: --join repeats the holder's line; without it, the lock refuses.
    j = Held(home, "--data-dir", str(data), "--name", "keep", "--join")
    assert j.line and j.line["joined"] is True and j.line["pid"] == h.line["pid"], j.stderr()
    busy = Held(home, "--data-dir", str(data), "--name", "keep")
    assert busy.line is None and "already running" in busy.stderr()
    assert h.close() == 0
    # Its first holder is gone, but a step that joined it is still in it: no second overlay on
    # its writable layer until that one is done.
    early = Held(home, "--data-dir", str(data), "--name", "keep", "--no-home")
    assert early.line is None and "still used by a step that joined it" in early.stderr()
    assert j.close() == 0
    # Its own layer is kept: a later hold of the name (no image needed) sees the file.
    again = Held(home, "--data-dir", str(data), "--name", "keep", "--no-home")
    assert again.line, again.stderr()
    assert inside(again.line["pid"], "/bin/cat", "/etc/mark").stdout == "kept\n"
    # Without --writable the root is read-only.
    r = inside(again.line["pid"], "/bin/sh", "-c", "echo x > /etc/other")
    assert r.returncode != 0 and "Read-only" in r.stderr, r.stderr
    assert again.close() == 0
    dup = Held(home, "--data-dir", str(data), "--name", "keep", "--create-only", name)
    assert dup.line is None and "already exists" in dup.stderr()
    missing = Held(home, "--data-dir", str(data), "--name", "nothere")
    assert missing.line is None and "no image to create it from" in missing.stderr()


def test_hold_runs_the_entrypoint_first(env, workdir):
    home, name = env
    entry = name.replace("multi:1", "entry:1")
    out = workdir / "entry.log"
    h = Held(home, "--no-home", "--run-entrypoint", "--entrypoint-output", str(out), entry)
    assert h.line, h.stderr()
    # The environment and directory the entrypoint gave its command; its output in the file.
    assert "FROM_ENTRY=yes" in h.line["env"] and h.line["cwd"] == "/etc"
    assert out.read_text() == "entry ran\n"
    assert inside(h.line["pid"], "/bin/cat", "/etc/hello").stdout == "hello\n"
    assert h.close() == 0
    # An entrypoint that ends without running its command is named.
    h = Held(home, "--no-home", "--run-entrypoint", "--entrypoint", "/bin/true", entry)
    assert h.line is None
    err = h.stderr()
    assert "entrypoint ended without running its command" in err and h.proc.returncode == 125, err


def test_save_a_held_container_and_run_the_file(env, workdir):
    """What --container-save does: the files of a running container, its changes included, as
    an image archive; `capsule run FILE` (and skopeo) take it back, with the source's settings."""
    home, name = env
    h = Held(home, "--no-home", "--writable", name)
    assert h.line, h.stderr()
    r = inside(h.line["pid"], "/bin/sh", "-c", "echo saved > /etc/mark; mkdir -p /tmp/x")
    assert r.returncode == 0, r.stderr
    out = workdir / "saved.tar"
    r = home.capsule("save", "--pid", str(h.line["pid"]), "--image", name, str(out))
    assert r.returncode == 0, r.stderr
    assert h.close() == 0
    assert (os.stat(out).st_mode & 0o777) == 0o600
    r = subprocess.run(["skopeo", "inspect", f"oci-archive:{out}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # The image's Entrypoint (/bin/sh) and Env came along; the change is in it.
    r = home.capsule("run", "--no-home", str(out), "-c", 'cat /etc/mark /etc/hello; echo "$A"')
    assert r.returncode == 0 and r.stdout == "saved\nchanged\n1\n", r.stderr
    assert [i["name"] for i in home.images_json() if i["name"].startswith("localhost/file/saved:p")]
    r = home.capsule("run", "--no-home", str(workdir / "env.sqsh"), "true")
    assert r.returncode == 125 and "squashfs images (enroot's) cannot be run" in r.stderr, r.stderr
    r = home.capsule("run", "--no-home", str(workdir / "missing.tar"), "true")
    assert r.returncode == 125 and "missing.tar" in r.stderr, r.stderr
