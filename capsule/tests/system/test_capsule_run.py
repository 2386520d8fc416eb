"""capsule run and the named-container commands on images pulled from a real registry: Docker's
Entrypoint/Cmd/Env/WorkingDir rules, exit codes, signals, a read-only root, whiteouts seen
through the overlay, mounts and home, an ordinary user with and without --remap-root,
create/start/exec/ps/rm, and what a crash leaves behind (nothing)."""

import os
import re
import signal
import select
import shutil
import subprocess
import time

import pytest

import capsuleutil as cu

IMAGE_TAG = "multi:1"


def ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r


@pytest.fixture(scope="module")
def env(images):
    """One registry and one capsule home with "multi" pulled, shared by the tests of this module:
    they only run containers, which leave the cache as it was."""
    d = cu.short_tmpdir("capsule-run-")
    reg = cu.Registry(d / "registry")
    images.push("multi", reg.host, IMAGE_TAG)
    home = cu.Home(d / "user")
    os.chmod(d, 0o755)
    name = f"{reg.host}/{IMAGE_TAG}"
    ok(home.capsule("pull", "-q", name))
    yield home, name, reg
    reg.stop()
    shutil.rmtree(d, ignore_errors=True)


def test_image_entrypoint_cmd_env_workdir(env):
    home, name, _ = env
    # Entrypoint /bin/sh + Cmd ["-c", "echo hi"]: the image's own command.
    assert ok(home.capsule("run", "--no-home", name)).stdout == "hi\n"
    # Arguments replace Cmd, not Entrypoint; WorkingDir and Env apply.
    r = ok(home.capsule("run", "--no-home", name, "-c", 'echo "$A $PATH $(pwd)"'))
    assert r.stdout == "1 /bin /data\n"
    # --entrypoint drops the image's Cmd; -w and -e override.
    r = ok(home.capsule("run", "--no-home", "--entrypoint", "/bin/echo", name, "x", "y"))
    assert r.stdout == "x y\n"
    r = ok(home.capsule("run", "--no-home", "-w", "/etc", "-e", "A=2", "-e", "HOSTVAR", name,
                        "-c", 'echo "$A $HOSTVAR $(pwd) $container"',
                        env={"HOSTVAR": "from-host"}))
    assert r.stdout == "2 from-host /etc capsule\n"


def test_exit_codes(env):
    home, name, _ = env
    assert home.capsule("run", "--no-home", name, "-c", "exit 7").returncode == 7
    r = home.capsule("run", "--no-home", name, "-c", "kill -TERM $$")
    assert r.returncode == 128 + signal.SIGTERM
    r = home.capsule("run", "--no-home", "--entrypoint", "/no/such/program", name)
    assert r.returncode == 127 and "/no/such/program" in r.stderr, r.stderr
    r = home.capsule("run", "--no-home", "--entrypoint", "/etc/hello", name)
    assert r.returncode == 126 and "/etc/hello" in r.stderr, r.stderr
    r = home.capsule("run", "--no-home", "--pull", "never", name.replace("multi", "absent"))
    assert r.returncode == 125 and "absent" in r.stderr, r.stderr
    # A config file named on the command line must exist (a typo would go unnoticed).
    r = home.capsule("--config", "/nonexistent/capsule.conf", "run", "--no-home", name)
    assert r.returncode == 125 and "/nonexistent/capsule.conf" in r.stderr, r.stderr
    # A bare command name that is nowhere in PATH: said where it was looked for.
    r = home.capsule("run", "--no-home", "--entrypoint", "no-such-program", name)
    assert r.returncode == 127 and "not found in PATH=/bin" in r.stderr, r.stderr


def test_signal_reaches_the_command(env, workdir):
    home, name, _ = env
    script = "trap 'echo got-term; exit 42' TERM; echo ready; while :; do busybox sleep 0.1; done"
    p = home.popen("run", "--no-home", name, "-c", script, log=workdir / "sig.log")
    cu.wait_for(lambda: "ready" in p.log(), 20, "the container to start")
    p.popen.send_signal(signal.SIGTERM)
    assert p.wait(20) == 42
    assert "got-term" in p.log()


def test_root_is_read_only_unless_writable(env):
    home, name, _ = env
    r = home.capsule("run", "--no-home", name, "-c", "echo x > /etc/new-file")
    assert r.returncode != 0 and "Read-only" in r.stderr, r.stderr
    ok(home.capsule("run", "--no-home", "--writable", name, "-c",
                    "echo x > /etc/new-file && cat /etc/new-file"))
    # An anonymous run's writes go with it.
    r = home.capsule("run", "--no-home", name, "-c", "cat /etc/new-file")
    assert r.returncode == 1 and "No such file" in r.stderr, (r.returncode, r.stderr)
    # /tmp is always writable.
    ok(home.capsule("run", "--no-home", name, "-c", "echo t > /tmp/t && cat /tmp/t"))


def test_layers_seen_through_the_overlay(env):
    home, name, _ = env
    r = ok(home.capsule("run", "--no-home", name, "-c",
                        "cat /etc/hello; ls /data; ls /opt; test -e /etc/gone || echo gone-hidden"))
    assert r.stdout.split("\n") == ["changed", "fresh", "plain", "zstd", "gone-hidden", ""]


def test_rootfs_copy_mode_shows_the_same(env, workdir):
    home, name, _ = env
    home.write_config(rootfs="copy")
    try:
        r = ok(home.capsule("run", "--no-home", name, "-c",
                            "cat /etc/hello; ls /data; test -e /etc/gone || echo gone-hidden"))
        assert r.stdout == "changed\nfresh\ngone-hidden\n"
    finally:
        home.config_path.unlink()


def test_mounts_and_home(env, workdir):
    home, name, _ = env
    data = workdir / "data"
    data.mkdir()
    (data / "in").write_text("input\n")
    os.chmod(workdir, 0o755)
    r = ok(home.capsule("run", "--no-home", "--mount", f"{data}:/in:ro", "--mount",
                        f"{data}:/out", name, "-c",
                        "cat /in/in; echo result > /out/result; echo x > /in/x || echo ro"))
    assert r.stdout == "input\nro\n"
    assert (data / "result").read_text() == "result\n"
    # The home directory is mounted at its own path unless --no-home.
    (home.home / "notes").write_text("mine\n")
    r = ok(home.capsule("run", name, "-c", 'cat "$HOME/notes"'))
    assert r.stdout == "mine\n"
    r = home.capsule("run", "--no-home", name, "-c", f"cat {home.home}/notes")
    assert r.returncode == 1 and "No such file" in r.stderr, (r.returncode, r.stderr)
    r = home.capsule("run", "--no-home", "--mount", "relative:/x", name)
    assert r.returncode == 2 and "relative" in r.stderr
    # Targets are cleaned as Docker does; the root and /proc cannot be covered.
    r = ok(home.capsule("run", "--no-home", "--mount", f"{data}:/a/../b/./c/:ro", name, "-c",
                        "cat /b/c/in"))
    assert r.stdout == "input\n"
    for target in ("/", "/x/..", "/proc/"):
        r = home.capsule("run", "--no-home", "--mount", f"{data}:{target}", name, "-c", "true")
        assert r.returncode == 2 and "cannot be replaced" in r.stderr, r.stderr
    # A file on a directory: said in words, not as the kernel's "Not a directory".
    r = home.capsule("run", "--no-home", "--mount", f"{data}/in:/etc", name, "-c", "true")
    assert r.returncode == 125 and "the source is a file, the target a directory" in r.stderr


def test_mount_the_host_root(env, workdir):
    """--mount /:/host shows the host's root with its mounts, in every spelling (a path that
    leads there, a symbolic link to it), read-only when asked: never capsule's own staging
    tmpfs, which is stacked on / while the container is built."""
    home, name, _ = env
    link = workdir / "to-root"
    link.symlink_to("/")
    marker = workdir / "marker"
    marker.write_text("host\n")
    want = sorted(os.listdir("/"))
    for source in ("/", "/usr/..", str(link)):
        r = ok(home.capsule("run", "--no-home", "--mount", f"{source}:/host:ro", name, "-c",
                            f"ls -a /host; cat /host{marker}; echo x > /host{marker} || echo ro"))
        lines = r.stdout.splitlines()
        assert [n for n in lines[:-2] if n not in (".", "..")] == want, (source, r.stdout)
        assert lines[-2:] == ["host", "ro"], (source, r.stdout)
    # Read-write, it is the host's file that changes; the mounts below / come along (/proc here).
    r = ok(home.capsule("run", "--no-home", "--mount", "/:/host", name, "-c",
                        f"echo changed > /host{marker}; test -r /host/proc/self/status && echo proc"))
    assert r.stdout == "proc\n"
    assert marker.read_text() == "changed\n"


def test_standard_mounts_through_image_links(images, registry, home, workdir):
    """An image's symbolic links decide where /tmp, /etc/hosts and the others land, inside the
    root, as in Docker; one that leads under a later mount (here a --mount) would make that host
    directory the container's /tmp: refused, saying which link, and nothing written there."""
    tag = f"links-{os.getpid()}"
    images.copy_tag("base", tag)
    images.add_layer(tag, [("tmp", "symlink", "/data/x", 0o777),
                           ("etc", "dir", None, 0o755),
                           ("etc/hosts", "symlink", "/opt/hosts", 0o777)], "gzip")
    images.push(tag, registry.host, f"{tag}:1")
    name = f"{registry.host}/{tag}:1"
    ok(home.capsule("pull", "-q", name))
    data = workdir / "data"
    data.mkdir()
    r = home.capsule("run", "--no-home", "--mount", f"{data}:/data", name, "/bin/sh", "-c",
                     "echo leaked > /tmp/f")
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert "the image's /tmp -> /data/x leads where a later mount" in r.stderr, r.stderr
    assert list(data.iterdir()) == []
    # Without that mount the link's target is the container's own: /tmp is its tmpfs there,
    # and /etc/hosts (-> /opt/hosts) is the host's file, read-only.
    r = ok(home.capsule("run", "--no-home", name, "/bin/sh", "-c",
                        "echo t > /tmp/f && cat /tmp/f; cat /etc/hosts; "
                        "echo x >> /etc/hosts || echo hosts-ro"))
    with open("/etc/hosts") as f:
        assert r.stdout == "t\n" + f.read() + "hosts-ro\n", r.stdout


def test_image_links_through_proc_are_refused_by_name(images, registry, home):
    """An image whose /tmp or /etc/resolv.conf is a link through a process's link in /proc (which
    would lead out of the root) does not run, and the message names the image's link."""
    cases = [("tmp", "/proc/self/cwd", "mount tmpfs on '/tmp'"),
             ("etc/resolv.conf", "/proc/self/root/etc/passwd",
              "mount '/etc/resolv.conf' on '/etc/resolv.conf': mount point")]
    for i, (path, target, what) in enumerate(cases):
        tag = f"proclink{i}-{os.getpid()}"
        images.copy_tag("base", tag)
        images.add_layer(tag, [("etc", "dir", None, 0o755), (path, "symlink", target, 0o777)],
                         "gzip")
        images.push(tag, registry.host, f"{tag}:1")
        name = f"{registry.host}/{tag}:1"
        ok(home.capsule("pull", "-q", name))
        r = home.capsule("run", "--no-home", name, "/bin/sh", "-c", "echo ran")
        assert r.returncode == 125 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
        assert f"{what}: too many symbolic links, or one through a process's link in /proc" \
            in r.stderr, r.stderr
        assert r.stderr.rstrip().endswith(f"(the link /{path} -> {target})"), r.stderr
    # Behind a link that resolves (merged /usr: /lib -> usr/lib), the one that does not is named.
    tag = f"proclink-usr-{os.getpid()}"
    images.copy_tag("base", tag)
    images.add_layer(tag, [("usr", "dir", None, 0o755), ("usr/lib", "dir", None, 0o755),
                           ("usr/lib/ro", "symlink", "/proc/self/cwd", 0o777),
                           ("lib", "symlink", "usr/lib", 0o777)])
    images.push(tag, registry.host, f"{tag}:1")
    name = f"{registry.host}/{tag}:1"
    ok(home.capsule("pull", "-q", name))
    r = home.capsule("run", "--no-home", "--mount", f"{home.root}:/lib/ro/newdir", name,
                     "/bin/sh", "-c", "echo ran")
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.rstrip().endswith("(the link /lib/ro -> /proc/self/cwd)"), r.stderr


def test_cache_is_read_only_inside(images, registry, workdir):
    """The image cache and the named containers live in the home directory that every container
    mounts (~/.cache/capsule, ~/.local/share/capsule): no container may change them, nor a root
    of the container (--remap-root --writable) undo that, however it reaches them."""
    home = cu.Home(workdir / "u")
    # capsule's defaults, below $HOME
    env = {"XDG_CACHE_HOME": "", "XDG_DATA_HOME": "", "XDG_CONFIG_HOME": ""}
    images.push("multi", registry.host, "multi:1")
    name = f"{registry.host}/multi:1"
    ok(home.capsule("pull", "-q", name, env=env))
    cache = home.home / ".cache" / "capsule"
    layer = next((cache / "layers" / "sha256").iterdir())
    before = sorted(str(p) for p in cache.rglob("*"))
    attempts = (f"touch {layer}/planted; echo x > {cache}/images/planted; "
                f"mkdir -p {home.home}/.local/share/capsule/x")
    r = home.capsule("run", name, "-c", attempts + "; echo done", env=env)
    assert r.returncode == 0 and r.stdout == "done\n", r
    assert r.stderr.count("Read-only file system") == 3, r.stderr
    # Root of the container, with a writable root: no unmounting, remounting, or binding the
    # home directory again without the cache's mount.
    escape = (f"busybox umount {cache}; busybox umount -l {cache}; "
              f"busybox mount -o remount,rw {cache}; "
              f"busybox mkdir -p /x && busybox mount -o bind {home.home} /x; "
              f"touch {layer}/planted /x/.cache/capsule/planted; echo done")
    r = home.capsule("run", "--remap-root", "--writable", name, "-c", escape, env=env)
    assert r.returncode == 0 and r.stdout.endswith("done\n"), r
    assert "Read-only file system" in r.stderr, r.stderr
    # Another path to it (the host's root), and capsule exec into a running container.
    r = home.capsule("run", "--no-home", "--mount", "/:/host", name, "-c",
                     f"touch /host{layer}/planted; echo done", env=env)
    assert r.stdout == "done\n" and "Read-only file system" in r.stderr, r
    ok(home.capsule("run", "-d", "--name", "guarded", "--pid", "--remap-root", name, "-c",
                    "exec busybox sleep 60", env=env))
    try:
        r = home.capsule("exec", "guarded", "sh", "-c",
                         f"busybox umount {cache}; touch {layer}/planted; echo done", env=env)
        assert r.stdout == "done\n" and "Read-only file system" in r.stderr, r
    finally:
        ok(home.capsule("rm", "-f", "guarded", env=env))
    # Nor by moving a directory above them aside and putting a copy in its place, nor by
    # rewriting capsule's settings (which name the cache), nor under a mount that covers them.
    swap = (f"cd {home.home} && mv .cache .cache.old; mv .local .local.old; "
            f"echo 'cache_dir = /tmp' > .config/capsule/capsule.conf; mv .config .config.old; "
            "echo done")
    r = home.capsule("run", "--remap-root", name, "-c", swap, env=env)
    assert r.stdout == "done\n", r
    assert r.stderr.count("resource busy") == 3 and "Read-only" in r.stderr, r.stderr
    assert not (home.home / ".config" / "capsule" / "capsule.conf").exists()
    cover = workdir / "cover"
    cover.mkdir()
    r = home.capsule("run", "--remap-root", "--mount", f"{cover}:{home.home}/.cache", name, "-c",
                     f"busybox umount {home.home}/.cache; touch {layer}/planted; echo done",
                     env=env)
    assert r.stdout == "done\n" and "Invalid argument" in r.stderr, r
    # A --mount of something inside the cache is read-only too.
    r = home.capsule("run", "--no-home", "--mount", f"{cache}/layers:/l", name, "-c",
                     "touch /l/planted; echo done", env=env)
    assert r.stdout == "done\n" and "Read-only file system" in r.stderr, r
    assert sorted(str(p) for p in cache.rglob("*")) == before
    # A writable named container's own layer (in the protected data directory) still works.
    ok(home.capsule("create", "--name", "keeps", "--writable", name, "-c",
                    "echo run >> /state; busybox wc -l < /state", env=env))
    assert ok(home.capsule("start", "keeps", env=env)).stdout.strip() == "1"
    assert ok(home.capsule("start", "keeps", env=env)).stdout.strip() == "2"
    ok(home.capsule("rm", "keeps", env=env))


def test_remap_root_owner_changes_succeed(env):
    """--remap-root maps one id: giving a file to another user, or a process another id, would
    fail (dpkg's chown, apt's drop to _apt). As in enroot's root mode a seccomp filter makes those
    calls succeed without effect; without --remap-root nothing is filtered."""
    home, name, _ = env
    probe = ("grep '^Seccomp:' /proc/self/status; touch /etc/owned; "
             "busybox chown 42:42 /etc/owned && echo chown-ok; busybox chgrp 7 /etc/owned && "
             "echo chgrp-ok; busybox stat -c '%u:%g' /etc/owned")
    r = ok(home.capsule("run", "--no-home", "--remap-root", "--writable", name, "-c", probe))
    assert r.stdout.split("\n") == ["Seccomp:\t2", "chown-ok", "chgrp-ok", "0:0", ""], r.stdout
    r = home.capsule("run", "--no-home", "--writable", name, "-c", probe)
    assert r.stdout.startswith("Seccomp:\t0\n") and "chown-ok" not in r.stdout, r.stdout
    # capsule exec into such a container runs under the same filter.
    ok(home.capsule("run", "-d", "--name", "rooted", "--no-home", "--remap-root", name, "-c",
                    "exec busybox sleep 60"))
    try:
        r = ok(home.capsule("exec", "rooted", "sh", "-c", "grep ^Seccomp: /proc/self/status"))
        assert r.stdout == "Seccomp:\t2\n", r.stdout
    finally:
        ok(home.capsule("rm", "-f", "rooted"))


def test_remap_root_lets_apt_download_as_root(images, registry, home):
    """apt drops to _apt for downloads and then checks that its ids changed, which under the
    filter they never do ("Could not switch group"): as in enroot's root mode, an image with apt
    run with --remap-root is told to download as root, in the container's own files only. An
    image without apt (distroless has /etc/debian_version and no /etc/apt) gets nothing, and one
    whose file is a fifo still starts."""
    def image(suffix, entries):
        tag = f"debianish-{suffix}-{os.getpid()}"
        images.copy_tag("base", tag)
        images.add_layer(tag, [("etc", "dir", None, 0o755),
                               ("etc/debian_version", "file", b"12.8\n", 0o644)] + entries)
        images.push(tag, registry.host, f"{tag}:1")
        ok(home.capsule("pull", "-q", f"{registry.host}/{tag}:1"))
        return f"{registry.host}/{tag}:1"

    apt_dirs = [("etc/apt", "dir", None, 0o755), ("etc/apt/apt.conf.d", "dir", None, 0o755)]
    debian = image("apt", apt_dirs)
    distroless = image("noapt", [])
    fifo = image("fifo", apt_dirs + [("etc/apt/apt.conf.d/00capsule-remap-root", "fifo", None,
                                      0o644)])
    conf = "/etc/apt/apt.conf.d/00capsule-remap-root"
    show = f"busybox cat {conf} 2>/dev/null || echo none; ls /etc/apt >/dev/null 2>&1 || echo no-apt"
    for args in (["--writable"], []):
        r = ok(home.capsule("run", "--no-home", "--remap-root", *args, debian, "/bin/sh", "-c",
                            show))
        assert 'APT::Sandbox::User "root";' in r.stdout.splitlines(), r.stdout
    assert ok(home.capsule("run", "--no-home", debian, "/bin/sh", "-c", show)).stdout == "none\n"
    r = ok(home.capsule("run", "--no-home", "--remap-root", distroless, "/bin/sh", "-c", show))
    assert r.stdout == "none\nno-apt\n", r.stdout
    r = ok(home.capsule("run", "--no-home", "--remap-root", fifo, "/bin/sh", "-c",
                        f"test -p {conf} && echo still-a-fifo", timeout=30))
    assert r.stdout == "still-a-fifo\n", r.stdout
    images.push("base", registry.host, "debianish-plain:1")
    other = f"{registry.host}/debianish-plain:1"
    ok(home.capsule("pull", "-q", other))
    r = ok(home.capsule("run", "--no-home", "--remap-root", other, "/bin/sh", "-c", show))
    assert r.stdout == "none\nno-apt\n", r.stdout


class Terminal:
    """capsule on a pseudo-terminal of the test's own, as a login shell starts it: the terminal
    is its controlling terminal and it is in the foreground, with a window size set first."""

    def __init__(self, argv, env, rows=30, cols=100):
        import fcntl
        import struct
        import termios

        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.modes = termios.tcgetattr(slave)
        self.slave = slave
        self.proc = subprocess.Popen(
            [str(a) for a in argv], stdin=slave, stdout=slave, stderr=slave, env=env,
            start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        self.out = b""

    def read_until(self, text, timeout=20):
        deadline = time.monotonic() + timeout
        while text.encode() not in self.out:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.master], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"no {text!r} on the terminal; it shows {self.out!r}")
            try:
                self.out += os.read(self.master, 65536)
            except OSError:
                raise AssertionError(f"terminal closed before {text!r}: {self.out!r}") from None
        return self.out.decode(errors="replace")

    def resize(self, rows, cols):
        import fcntl
        import struct
        import termios
        # The kernel tells the terminal's foreground job, capsule, with SIGWINCH.
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def close(self):
        import termios
        rc = self.proc.wait(20)
        modes = termios.tcgetattr(self.slave)
        os.close(self.slave)
        os.close(self.master)
        return rc, modes


def test_interactive_run_has_a_terminal(env):
    """With stdin and stdout on a terminal the command gets one of its own (/dev/pts/0 of the
    container) with the caller's window size; a resize reaches it; Ctrl-C reaches it once, as a
    signal of its terminal; the caller's terminal is as it was afterwards."""
    home, name, _ = env
    full = {**os.environ, **home.env()}
    script = ("tty; stty size; trap 'echo resized; stty size' WINCH; echo ready; "
              "while true; do busybox sleep 0.1; done")
    t = Terminal([cu.capsule_binary(), "run", "--no-home", name, "-c", script], full)
    text = t.read_until("ready")
    assert "/dev/pts/0" in text and "30 100" in text, text
    t.resize(40, 120)
    t.read_until("40 120")
    os.write(t.master, b"\x03")
    rc, modes = t.close()
    assert rc == 130, (rc, t.out)
    assert modes == t.modes, "capsule left the terminal in raw mode"
    # Output that goes elsewhere keeps its bytes: no terminal then, unless -t asks for one.
    r = subprocess.run([cu.capsule_binary(), "run", "--no-home", name, "-c", "tty"], env=full,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert r.stdout == "not a tty\n", r.stdout
    r = subprocess.run([cu.capsule_binary(), "run", "-t", "--no-home", name, "-c",
                        "tty; read x; echo got $x"], env=full, input="hi\n",
                       capture_output=True, text=True, timeout=60)
    # The container's terminal echoes the piped line; when the echo lands depends on when the
    # bytes arrive against the shell's first output, so it may come before or after `tty`.
    lines = r.stdout.replace("\r", "").splitlines()
    if "hi" in lines:
        lines.remove("hi")
    assert r.returncode == 0 and lines == ["/dev/pts/0", "got hi"], (r.returncode, r.stdout,
                                                                      r.stderr)
    # With a terminal of its own, the command's init (--pid) keeps none of the caller's, whose
    # keys a root of the container could otherwise read through /proc/1/fd/0.
    t = Terminal([cu.capsule_binary(), "run", "--pid", "--remap-root", "--no-home", name, "-c",
                  "echo init=$(readlink /proc/1/fd/0)"], full)
    t.read_until("init=/dev/null")
    assert t.close()[0] == 0
    # The caller's terminal as stdin but no terminal of its own (output to a pipe): the command
    # is in a session of its own, so it cannot push input into the caller's shell (TIOCSTI).
    master, slave = os.openpty()
    r = subprocess.run([cu.capsule_binary(), "run", "--no-home", name, "-c",
                        "echo $$ $(cut -d' ' -f6 /proc/self/stat)"], env=full, stdin=slave,
                       capture_output=True, text=True, timeout=60)
    os.close(slave)
    os.close(master)
    pid, sid = r.stdout.split()
    assert r.returncode == 0 and sid == pid, r.stdout
    # -it, as Docker users type it.
    t = Terminal([cu.capsule_binary(), "run", "-it", "--no-home", name, "-c",
                  "read line; echo got $line"], full)
    os.write(t.master, b"typed\r")
    t.read_until("got typed")
    assert t.close()[0] == 0
    # capsule exec -it into a running container, as docker exec -it.
    ok(home.capsule("run", "-d", "--name", "term", "--no-home", name, "-c",
                    "exec busybox sleep 60"))
    try:
        t = Terminal([cu.capsule_binary(), "exec", "-it", "term", "sh", "-c",
                      "tty; stty size"], full, rows=25, cols=90)
        text = t.read_until("25 90")
        assert "/dev/pts/" in text, text
        assert t.close()[0] == 0
    finally:
        ok(home.capsule("rm", "-f", "term"))


def test_background_job_leaves_the_terminal_alone(env):
    """`capsule run ... &` from an interactive shell: the job is not in the terminal's foreground,
    so it must neither put the terminal in raw mode nor read it (either stops the job with
    SIGTTOU or SIGTTIN, and the shell shows it as Stopped). Its command runs without a terminal
    of its own, and the output still reaches the caller's terminal."""
    home, name, _ = env
    full = {**os.environ, **home.env()}
    # set -m: job control, so the background job gets a process group of its own, as in a
    # login shell; the shell waits for it and reports how it ended.
    script = ('set -m; "$0" run --no-home "$1" -c "tty; echo bg-done" & '
              'wait $!; echo "job-status=$?"; jobs -l')
    t = Terminal(["/bin/sh", "-c", script, cu.capsule_binary(), name], full)
    text = t.read_until("job-status=")
    rc, modes = t.close()
    text = t.out.decode(errors="replace")
    assert "bg-done" in text and "job-status=0" in text, text
    assert "/dev/pts/0" not in text and "Stopped" not in text, text
    assert rc == 0 and modes == t.modes, (rc, text)


def test_read_only_cache_runs(images, registry, workdir, capsule_users):
    """A cache the user may only read (a node's, kept by root) runs its images: the copy that
    another user's layers need goes to $TMPDIR when the cache takes no scratch directory."""
    shared = cu.Home(workdir / "node")
    images.push("multi", registry.host, "multi:1")
    name = f"{registry.host}/multi:1"
    ok(shared.capsule("pull", "-q", name))
    subprocess.run(["chmod", "-R", "a+rX,go-w", str(workdir)], check=True)
    uid, gid = capsule_users.user("reader")
    user = cu.Home(workdir / "reader", owner=(uid, gid))
    user.write_config(cache_dir=str(shared.cache))
    r = user.capsule("run", "--no-home", name, "-c", "cat /etc/hello",
                     env={"TMPDIR": str(user.root)})
    assert r.returncode == 0 and r.stdout == "changed\n", (r.returncode, r.stderr)


def test_ordinary_user_identity(env, workdir, capsule_users):
    home, name, reg = env
    uid, gid = capsule_users.user("runner")
    login = capsule_users.name("runner")
    user_home = cu.Home(workdir / "runner", owner=(uid, gid))
    os.chmod(workdir, 0o755)
    # The user runs this build's capsule-pull, the one beside the capsule it runs (a copy it can
    # reach), and no installed one.
    here = os.path.dirname(cu.capsule_binary((uid, gid)))
    r = ok(user_home.capsule("version"))
    assert r.stdout.splitlines()[1].endswith(f"({here}/capsule-pull)"), r.stdout
    ok(user_home.capsule("pull", "-q", name))
    r = ok(user_home.capsule("run", "--no-home", name, "-c",
                             f"busybox id -u; busybox id -g; grep {login} /etc/passwd"))
    lines = r.stdout.splitlines()
    assert lines[0] == str(uid) and lines[1] == str(gid)
    assert lines[2].startswith(f"{login}:x:{uid}:{gid}:")
    r = ok(user_home.capsule("run", "--no-home", "--remap-root", name, "-c",
                             "busybox id -u; cat /etc/secret"))
    # Root inside, but only over the user's own files: the image's 0600 file is readable.
    assert r.stdout == "0\nsecret\n"
    # The host's root-only files stay out of reach.
    r = user_home.capsule("run", "--mount", "/root:/hostroot", "--remap-root", "--no-home", name,
                          "-c", "ls /hostroot")
    assert r.returncode == 1 and "Permission denied" in r.stderr, (r.returncode, r.stderr)


def test_pid_namespace(env):
    home, name, _ = env
    r = ok(home.capsule("run", "--no-home", "--pid", name, "-c",
                        "echo $$; ls /proc | grep -c '^[0-9]'"))
    pid, count = r.stdout.split()
    # The command is one of the first processes of its own namespace, and sees only them.
    assert int(pid) <= 2
    assert int(count) <= 4, r.stdout


def test_named_container_lifecycle(env):
    home, name, _ = env
    ok(home.capsule("create", "--name", "keeper", "--writable", "--no-home", name, "-c",
                    "echo run >> /state; busybox wc -l < /state"))
    r = ok(home.capsule("ps", "-a"))
    assert "keeper" in r.stdout and "created" in r.stdout
    assert ok(home.capsule("start", "keeper")).stdout.strip() == "1"
    # Its writable layer is its own and survives between starts.
    assert ok(home.capsule("start", "keeper")).stdout.strip() == "2"
    assert "exited (0)" in ok(home.capsule("ps", "-a")).stdout
    assert "keeper" not in ok(home.capsule("ps")).stdout
    r = home.capsule("create", "--name", "keeper", name)
    assert r.returncode != 0 and "already exists" in r.stderr
    ok(home.capsule("rm", "keeper"))
    assert "keeper" not in ok(home.capsule("ps", "-a")).stdout
    # capsule's own failures are 125 (cli.h), never a status the command could have returned.
    r = home.capsule("start", "keeper")
    assert r.returncode == 125 and "no container 'keeper'" in r.stderr, r.stderr
    r = home.capsule("exec", "keeper", "/bin/true")
    assert r.returncode == 125 and "no container 'keeper'" in r.stderr, r.stderr


def test_exec_into_a_running_container(env, workdir):
    home, name, _ = env
    p = home.popen("run", "--no-home", "--name", "svc", name, "-c",
                   "echo inside > /tmp/mark; echo ready; busybox sleep 60",
                   log=workdir / "svc.log")
    cu.wait_for(lambda: "ready" in p.log(), 20, "the container to start")
    r = ok(home.capsule("ps"))
    assert "svc" in r.stdout and "running" in r.stdout
    # exec sees the container's own files (its tmpfs /tmp) and environment.
    r = ok(home.capsule("exec", "svc", "/bin/sh", "-c", 'cat /tmp/mark; echo "$A"; pwd'))
    # The container's environment and, as docker exec, the image's WorkingDir.
    assert r.stdout == "inside\n1\n/data\n"
    assert ok(home.capsule("exec", "-w", "/etc", "svc", "/bin/sh", "-c", "pwd")).stdout == "/etc\n"
    assert home.capsule("exec", "svc", "/bin/sh", "-c", "exit 5").returncode == 5
    r = home.capsule("rm", "svc")
    assert r.returncode != 0 and "running" in r.stderr
    ok(home.capsule("rm", "-f", "svc"))
    p.wait(20)
    assert "svc" not in ok(home.capsule("ps", "-a")).stdout
    ok(home.capsule("create", "--name", "idle", "--no-home", name))
    r = home.capsule("exec", "idle", "/bin/true")
    assert r.returncode == 125 and "not running" in r.stderr, r.stderr
    ok(home.capsule("rm", "idle"))


def test_a_killed_runner_leaves_nothing(env, workdir):
    home, name, _ = env
    p = home.popen("run", "--no-home", "--name", "doomed", name, "-c",
                   "echo ready; busybox sleep 60", log=workdir / "doomed.log")
    cu.wait_for(lambda: "ready" in p.log(), 20, "the container to start")
    p.popen.send_signal(signal.SIGKILL)
    p.wait(10)
    # The container dies with its runner; the next command sweeps its entry away.
    cu.wait_for(lambda: "doomed" not in home.capsule("ps", "-a").stdout, 20,
                "the dead container to be swept")
    r = ok(home.capsule("run", "--no-home", "--name", "doomed", name, "-c", "echo again"))
    assert r.stdout == "again\n"


def test_a_killed_copy_leaves_nothing_after_gc(env, workdir):
    """rootfs = copy puts the image's copy in the cache's tmp/, private and locked while the
    container runs: gc keeps it then, and removes it once its runner was killed."""
    home, name, _ = env
    home.write_config(rootfs="copy")
    tmp = home.cache / "tmp"
    host_tmp_before = set(os.listdir("/tmp"))
    ok(home.capsule("gc"))  # what earlier tests' killed runners left
    try:
        p = home.popen("run", "--no-home", name, "-c", "echo ready; busybox sleep 60",
                       log=workdir / "copy.log")
        cu.wait_for(lambda: "ready" in p.log(), 20, "the container to start")
        runs = [e for e in os.listdir(tmp) if e.startswith("run-")]
        assert len(runs) == 1, os.listdir(tmp)
        assert (tmp / runs[0]).stat().st_mode & 0o777 == 0o700
        r = ok(home.capsule("gc"))
        assert "kept 1 temporary entry in use" in r.stdout, r.stdout
        assert (tmp / runs[0]).exists()
        p.popen.send_signal(signal.SIGKILL)
        p.wait(10)
        p.stop()
        ok(home.capsule("run", "--no-home", name, "-c", "true"))
        r = ok(home.capsule("gc"))
        assert "1 temporary entry" in r.stdout and "kept" not in r.stdout, r.stdout
        assert os.listdir(tmp) == []
        assert not [f for f in os.listdir(home.cache / "locks") if f.startswith("run-")]
    finally:
        home.config_path.unlink()
    # Nothing of the copy went to the host's /tmp.
    assert not [f for f in set(os.listdir("/tmp")) - host_tmp_before
                if f.startswith("capsule-root-")]


def test_run_by_image_id(env):
    """An ID prefix of a cached image wins over the Docker Hub name the same hex string parses as
    (docker.io/library/<hex>:latest), as in Docker: with every pull policy but "always"."""
    home, name, _ = env
    image_id = next(i["id"] for i in home.images_json() if i["name"] == name)
    hexid = cu.hexpart(image_id)
    for arg, policy in ((hexid[:12], "never"), (hexid[:12], "missing"), (f"sha256:{hexid}", "never"),
                        (hexid[:4], "never")):
        r = ok(home.capsule("run", "--pull", policy, "--no-home", arg, "-c", "cat /etc/hello"))
        assert r.stdout == "changed\n", (arg, policy)
    r = ok(home.capsule("create", "--name", "by-id", "--no-home", hexid[:12], "-c", "true"))
    assert "by-id" in ok(home.capsule("ps", "-a")).stdout
    ok(home.capsule("rm", "by-id"))
    # Hex that no cached image has is still a name, and --pull never says it is not cached.
    r = home.capsule("run", "--pull", "never", "--no-home", "0000aaaa0000", "true")
    assert r.returncode == 125 and "docker.io/library/0000aaaa0000:latest" in r.stderr, r.stderr


def test_docker_habits(env):
    """What Docker users type out of habit: -i and --rm are what run does anyway; -it together."""
    home, name, _ = env
    p = subprocess.run([cu.capsule_binary(), "run", "-i", "--rm", "--no-home", name, "-c",
                        "read x; echo got $x"], env={**os.environ, **home.env()},
                       input="hello\n", capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "got hello\n", (p.returncode, p.stdout, p.stderr)
    r = ok(home.capsule("run", "--rm", "--name", "gone", "--no-home", name, "-c", "echo hi"))
    assert r.stdout == "hi\n"
    assert "gone" not in ok(home.capsule("ps", "-a")).stdout
    r = ok(home.capsule("run", "--help"))
    for flag in ("-d, --detach", "-i", "--rm"):
        assert flag in r.stdout, flag
    # create keeps its container: -d and --rm belong to run.
    for flag in ("-d", "--rm"):
        r = home.capsule("create", flag, "--name", "x", name)
        assert r.returncode == 2 and "is for run" in r.stderr, r.stderr


def test_detached_run(env):
    home, name, _ = env
    r = ok(home.capsule("run", "-d", "--name", "bg", "--no-home", name, "-c",
                        "echo started; echo oops >&2; exec sleep 60"))
    assert r.stdout == "bg\n" and r.stderr == "", r
    ps = ok(home.capsule("ps")).stdout
    assert "bg" in ps and "running" in ps, ps
    cu.wait_for(lambda: ok(home.capsule("logs", "bg")).stdout == "started\noops\n", 10,
                "the detached container's output in its log")
    assert ok(home.capsule("exec", "bg", "cat", "/etc/hello")).stdout == "changed\n"
    ok(home.capsule("rm", "-f", "bg"))
    assert "bg" not in ok(home.capsule("ps", "-a")).stdout
    # rm removes the log with the container, as docker rm does.
    r = home.capsule("logs", "bg")
    assert r.returncode == 1 and "no log" in r.stderr, r
    # Without --name, a name is made up and printed; the container goes when its command ends.
    r = ok(home.capsule("run", "-d", "--no-home", name, "-c", "echo anon"))
    made = r.stdout.strip()
    assert re.fullmatch(r"capsule-[0-9a-f]{8}", made), r.stdout
    cu.wait_for(lambda: made not in ok(home.capsule("ps", "-a")).stdout, 10,
                "the detached container to end")
    # The log stays after the container has ended, until rm.
    assert ok(home.capsule("logs", made)).stdout == "anon\n"
    assert ok(home.capsule("rm", made)).stdout == made + "\n"
    assert home.capsule("logs", made).returncode == 1
    r = home.capsule("rm", made)
    assert r.returncode == 1 and f"no container '{made}'" in r.stderr, r
    r = home.capsule("logs", "../containers/x")
    assert r.returncode == 2 and "../containers/x" in r.stderr, r
    # A command that cannot start is reported here, not only in the log.
    r = home.capsule("run", "-d", "--no-home", "--entrypoint", "/no/such", name)
    assert r.returncode == 127, (r.returncode, r.stderr)
    assert "/no/such" in r.stderr, r.stderr
    r = home.capsule("logs", "never-ran")
    assert r.returncode == 1 and "no log of a container 'never-ran'" in r.stderr, r.stderr


def test_run_pulls_a_missing_image(env, images, workdir):
    _, name, reg = env
    fresh = cu.Home(workdir / "fresh")
    r = ok(fresh.capsule("run", "--no-home", name, "-c", "cat /etc/hello"))
    assert r.stdout == "changed\n"
    assert [i["name"] for i in fresh.images_json()] == [name]


def test_check_reports_this_host(env):
    home, _, _ = env
    r = home.capsule("check")
    assert r.returncode == 0, r.stdout + r.stderr
    for what in ("user namespaces", "overlayfs in userns", "image cache"):
        assert any(line.startswith("ok") and what in line for line in r.stdout.splitlines()), \
            r.stdout


def test_pull_while_a_container_uses_a_shared_layer(env, images, workdir):
    """A running container holds its layers' locks shared for as long as it runs (so gc leaves
    them alone); pulling another image that shares one must not wait for it to end (a Slurm
    job's container runs for days)."""
    home, name, reg = env
    images.push("other", reg.host, "other:1")
    p = home.popen("run", "--no-home", name, "-c", "echo ready; busybox sleep 60",
                   log=workdir / "long.log")
    try:
        cu.wait_for(lambda: "ready" in p.log(), 20, "the container to start")
        r = home.capsule("pull", "-q", f"{reg.host}/other:1", timeout=30)
        assert r.returncode == 0, r.stderr
    finally:
        p.stop()
