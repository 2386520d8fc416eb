"""capsule pull against a real docker-registry: what lands in the cache (whiteouts, opaque
directories, hard links, modes, no setuid bits, gzip/zstd/uncompressed layers), references by
tag and digest, manifest lists, Basic and token auth, tampered blobs, concurrent pulls by two
processes and two users, interrupted downloads, a registry that is down, and plain HTTP rules."""

import grp
import json
import os
import pty
import re
import select
import shutil
import signal
import stat
import subprocess
import time

import pytest

import capsuleutil as cu


def pull(home, *args, **kw):
    return home.capsule("pull", *args, **kw)


def assert_ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"


def assert_fails(r, *needles):
    assert r.returncode == 1, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    # The error comes last, once, after any progress lines.
    assert r.stderr.splitlines()[-1].startswith("capsule: "), r.stderr
    assert r.stderr.count("capsule: ") == 1, r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


def only_image(home):
    imgs = home.images_json()
    assert len(imgs) == 1, imgs
    return imgs[0]


def test_pull_unpacks_every_layer_kind(images, registry, home):
    registry.push_raw(images, "multi", "team/multi:1")
    name = f"{registry.host}/team/multi:1"
    r = pull(home, name)
    assert_ok(r)
    digest, config, layers = registry.image("team/multi", "1")
    assert layers == images.layers("multi") and len(layers) == 5
    assert [x["mediaType"].rpartition(".")[2] for x in images.manifest("multi")["layers"]] == \
        ["tar+gzip", "tar+gzip", "tar+gzip", "tar", "tar+zstd"]
    assert name in r.stdout and "5 layers" in r.stdout, r.stdout

    img = only_image(home)
    assert img["name"] == name
    assert img["digest"] == digest
    assert img["id"] == config
    assert img["layers"] == layers

    base, changes, opaque, plain, zstd = (home.layer_dir(d) for d in layers)
    # The base layer as built, minus the setuid bit; modes and hard links kept.
    busybox = base / "bin" / "busybox"
    assert busybox.stat().st_mode & 0o111
    assert os.readlink(base / "bin" / "sh") == "busybox"
    assert (base / "etc" / "hello").read_text() == "hello\n"
    a, b = (base / "etc" / "hello").stat(), (base / "etc" / "hello-link").stat()
    assert a.st_ino == b.st_ino and a.st_nlink == 2
    assert stat.S_IMODE((base / "bin" / "suidtool").stat().st_mode) == 0o755
    assert stat.S_IMODE((base / "etc" / "secret").stat().st_mode) == 0o600
    assert stat.S_IMODE((base / "private").stat().st_mode) == 0o700
    # The second layer: a deletion became the 0/0 character device overlayfs reads.
    gone = (changes / "etc" / "gone").lstat()
    assert stat.S_ISCHR(gone.st_mode) and gone.st_rdev == 0
    assert (changes / "etc" / "hello").read_text() == "changed\n"
    assert (changes / "etc" / "new").read_text() == "new\n"
    assert not (changes / "etc" / ".wh.gone").exists()
    # The opaque directory: the marker became the user.overlay xattr.
    assert os.getxattr(opaque / "data", "user.overlay.opaque") == b"y"
    assert not (opaque / "data" / ".wh..wh..opq").exists()
    assert (opaque / "data" / "fresh").read_text() == "fresh\n"
    # Uncompressed and zstd layers.
    assert stat.S_IMODE((plain / "opt" / "plain").stat().st_mode) == 0o751
    assert (zstd / "opt" / "zstd").read_text() == "zstd\n"
    # Layer blobs are dropped once unpacked; manifest and config stay; nothing half-done.
    for d in layers:
        assert not home.blob_file(d).exists(), d
    assert home.blob_file(img["digest"]).exists()
    assert home.blob_file(img["id"]).exists()
    assert home.tmp_entries() == []


def test_pull_again_fetches_nothing(images, registry, home):
    images.push("multi", registry.host, "multi:1")
    assert_ok(pull(home, "-q", f"{registry.host}/multi:1"))
    layers = registry.image("multi", "1")[2]
    assert [registry.blob_gets(d) for d in layers] == [1] * 5
    r = pull(home, "-q", f"{registry.host}/multi:1")
    assert_ok(r)
    assert r.stdout == f"{registry.host}/multi:1\n" and r.stderr == ""
    assert [registry.blob_gets(d) for d in layers] == [1] * 5


def test_keep_blobs(images, registry, home):
    images.push("other", registry.host, "other:1")
    assert_ok(pull(home, "--keep-blobs", f"{registry.host}/other:1"))
    for d in images.layers("other"):
        assert home.blob_file(d).read_bytes() == registry.blob_path(d).read_bytes()


def test_pull_by_digest(images, registry, home):
    images.push("multi", registry.host, "multi:1")
    digest = registry.image("multi", "1")[0]
    name = f"{registry.host}/multi@{digest}"
    assert_ok(pull(home, name))
    img = only_image(home)
    assert img["name"] == name and img["digest"] == digest
    # enroot's spelling of the same image is the same image.
    assert_ok(pull(home, f"docker://{registry.host}#multi@{digest}"))
    assert len(home.images_json()) == 1


def test_manifest_list_picks_platform(images, registry, home):
    images.push("multiarch", registry.host, "multiarch:1", all_platforms=True)
    name = f"{registry.host}/multiarch:1"
    assert_ok(pull(home, name))
    img = only_image(home)
    # This machine is x86-64: the amd64 entry, although arm64 comes first in the index.
    assert img["digest"] == images.manifest_digest("amd64")
    assert (home.layer_dir(img["layers"][0]) / "arch").read_text() == "amd64\n"

    assert_ok(pull(home, "--platform", "linux/arm64", name))
    img = only_image(home)
    assert img["digest"] == images.manifest_digest("arm64")
    assert (home.layer_dir(img["layers"][0]) / "arch").read_text() == "arm64\n"

    r = pull(home, "--platform", "linux/s390x", name)
    assert_fails(r, "linux/s390x", "linux/arm64", "linux/amd64")
    r = pull(home, "--platform", "linux", name)
    assert r.returncode == 2 and "--platform" in r.stderr, r.stderr


def test_basic_auth_from_netrc(images, basic_registry, home):
    images.push("other", basic_registry.host, "private/other:1", creds=("alice", "wonderland"))
    name = f"{basic_registry.host}/private/other:1"
    assert_fails(pull(home, name), "access denied", "not found in", str(home.credentials_path))
    home.write_credentials(
        f"# test credentials\nmachine {basic_registry.host}\n  login alice\n"
        f"  password {cu.USERS['alice']}\n")
    assert_ok(pull(home, name))
    assert only_image(home)["name"] == name


def test_basic_auth_from_docker_config(images, basic_registry, home):
    images.push("other", basic_registry.host, "private/other:1", creds=("alice", "wonderland"))
    home.write_docker_config({basic_registry.host: ("alice", cu.USERS["alice"])})
    assert_ok(pull(home, f"{basic_registry.host}/private/other:1"))


def test_wrong_password_refused(images, basic_registry, home):
    images.push("other", basic_registry.host, "private/other:1", creds=("alice", "wonderland"))
    home.write_docker_config({basic_registry.host: ("alice", "not-the-password")})
    r = pull(home, f"{basic_registry.host}/private/other:1")
    assert_fails(r, "private/other:1", "rejected", "401", str(home.docker_config_path))
    assert home.images_json() == []


def test_token_auth(images, token_registry, home):
    reg, ts = token_registry
    images.push("multi", reg.host, "private/multi:1", creds=("alice", "wonderland"))
    name = f"{reg.host}/private/multi:1"
    # Anonymous: the token server hands out a token without access, the registry says no.
    r = pull(home, name)
    assert_fails(r, "access denied", "not found in")
    home.write_credentials(f"machine {reg.host} login alice password {cu.USERS['alice']}\n")
    ts.requests.clear()
    assert_ok(pull(home, name))
    assert only_image(home)["name"] == name
    granted = [q for q in ts.requests if q[2] == 200]
    # One token for the whole pull (cached), for pulling only.
    assert granted == [("alice", ["repository:private/multi:pull"], 200)], ts.requests

    home.write_credentials(f"machine {reg.host} login alice password wrong\n")
    r = pull(home, name)
    assert_fails(r, "token server", "rejected", str(home.credentials_path))


def test_tampered_blob_refused(images, registry, home):
    images.push("multi", registry.host, "multi:1")
    layers = registry.image("multi", "1")[2]
    victim = layers[1]
    path = registry.blob_path(victim)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    path.write_bytes(bytes(data))
    r = pull(home, f"{registry.host}/multi:1")
    assert_fails(r, victim)
    assert "mismatch" in r.stderr
    assert not home.blob_file(victim).exists()
    assert not home.layer_dir(victim).exists()
    # Other layers' partial downloads, stopped by the failure, may stay to be resumed.
    assert [t for t in home.tmp_entries() if cu.hexpart(victim) in t] == []
    assert home.images_json() == []
    # Fixed at the source, the next pull completes.
    images_blob = images.read_blob(victim)
    path.write_bytes(images_blob)
    assert_ok(pull(home, f"{registry.host}/multi:1"))


def test_concurrent_pulls_share_the_work(images, registry, home):
    images.push("multi", registry.host, "multi:1")
    name = f"{registry.host}/multi:1"
    procs = [home.popen("pull", "-q", name, log=home.root / f"pull{i}.log") for i in range(2)]
    for p in procs:
        assert p.wait(120) == 0, p.log()
        p.stop()
    # Each layer was fetched (and so unpacked) once, by whichever process got it first.
    layers = registry.image("multi", "1")[2]
    assert [registry.blob_gets(d) for d in layers] == [1] * 5
    assert only_image(home)["layers"] == layers
    assert home.tmp_entries() == []


def test_capsule_runs_the_helper_beside_it(images, registry, home, workdir):
    build = cu.build_dir() / "capsule"
    r = home.capsule("version")
    assert_ok(r)
    lines = r.stdout.splitlines()
    assert lines[:2] == [
        f"capsule {cu.VERSION} ({build}/capsule)",
        f"capsule-pull {cu.VERSION} ({build}/capsule-pull)"], r.stdout
    # The Slurm plugin, where the build has one: the Slurm it was built for.
    assert all(re.fullmatch(rf"spank_capsule {re.escape(cu.VERSION)}, built for Slurm "
                            r"\d+\.\d+\.\d+ \(/\S+/gpunode/spank_capsule\.so\)", line)
               for line in lines[2:]) and len(lines) <= 3, r.stdout
    # A capsule with no capsule-pull beside it names the path it needs and runs no other one
    # (an installed one would be another build's code).
    lone = workdir / "lone"
    lone.mkdir()
    shutil.copy2(build / "capsule", lone / "capsule")
    images.push("multi", registry.host, "multi:1")
    name = f"{registry.host}/multi:1"
    for args in (["pull", "-q", name], ["run", "--no-home", name, "-c", "true"],
                 ["version"]):
        r = cu.run([lone / "capsule", *args], env=home.env())
        assert r.returncode != 0, (args, r.stdout)
        assert f"cannot run {lone}/capsule-pull: No such file or directory" in r.stderr, \
            (args, r.stderr)
    assert home.images_json() == []
    # CAPSULE_PULL names another one.
    r = cu.run([lone / "capsule", "pull", "-q", name],
               env={**home.env(), "CAPSULE_PULL": str(build / "capsule-pull")})
    assert_ok(r)
    assert [i["name"] for i in home.images_json()] == [name]


def test_config_limits_agree_between_pull_and_run(images, registry, home):
    """A large image config (long histories make real ones megabytes) that pulls also runs; one
    over the limit is refused at the pull, naming it, and nothing is kept."""
    images.copy_tag("base", "bigconf")
    images.edit_config("bigconf", lambda c: c["config"].setdefault("Labels", {}).update(
        {"padding": "x" * (5 * 1024 * 1024 + 200 * 1024)}))
    registry.push_raw(images, "bigconf", "bigconf:1")
    name = f"{registry.host}/bigconf:1"
    assert_ok(pull(home, "-q", name))
    r = home.capsule("run", "--pull", "never", "--no-home", name, "/bin/echo", "ran")
    assert r.returncode == 0 and r.stdout == "ran\n", (r.returncode, r.stderr)

    images.copy_tag("base", "hugeconf")
    images.edit_config("hugeconf", lambda c: c["config"].setdefault("Labels", {}).update(
        {"padding": "x" * (17 * 1024 * 1024)}))
    registry.push_raw(images, "hugeconf", "hugeconf:1")
    r = pull(home, "-q", f"{registry.host}/hugeconf:1")
    assert_fails(r, "the image config is", "more than the 16 MiB capsule takes")
    assert [i["name"] for i in home.images_json()] == [name]


def test_installed_capsule_runs_the_installed_helper(workdir):
    """Installed (meson install's paths, here in a private mount namespace over the prefix),
    capsule runs the capsule-pull of libexec/gpunode/, also when the bin directory is reached
    through a symbolic link; a copy elsewhere runs the one beside it."""
    if os.geteuid() != 0:
        pytest.skip("needs root for a mount namespace over the install prefix")
    build = cu.build_dir()
    opts = {o["name"]: o["value"] for o in json.loads(subprocess.run(
        ["meson", "introspect", str(build), "--buildoptions"], capture_output=True, text=True,
        check=True).stdout)}
    prefix = opts["prefix"]
    bindir = os.path.join(prefix, opts["bindir"])
    helper = os.path.join(prefix, opts["libexecdir"], "gpunode", "capsule-pull")
    script = f"""set -e
mount -t tmpfs gn-prefix {prefix}
mkdir -p {bindir} {os.path.dirname(helper)} {prefix}/real-bin
cp {build}/capsule/capsule-pull {helper}
cp {build}/capsule/capsule {bindir}/capsule
{bindir}/capsule version
cp {build}/capsule/capsule {prefix}/real-bin/capsule
rm -rf {bindir} && ln -s real-bin {bindir}
{bindir}/capsule version
"""
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # (the Slurm plugin's line, where the build has one, is test_capsule_runs_the_helper_beside_it's)
    lines = [line for line in r.stdout.splitlines() if not line.startswith("spank_capsule ")]
    assert lines[0] == f"capsule {cu.VERSION} ({bindir}/capsule)", r.stdout
    assert lines[1] == f"capsule-pull {cu.VERSION} ({helper})", r.stdout
    assert lines[2] == f"capsule {cu.VERSION} ({prefix}/real-bin/capsule)", r.stdout
    assert lines[3] == f"capsule-pull {cu.VERSION} ({helper})", r.stdout


def test_two_users_share_a_cache(images, registry, workdir, capsule_users):
    uids = [capsule_users.user(u, group="share") for u in ("share-a", "share-b")]
    gid = grp.getgrnam(capsule_users.group("share")).gr_gid
    shared = workdir / "shared-cache"
    shared.mkdir()
    os.chown(shared, 0, gid)
    shared.chmod(0o2775)  # what an admin sets up: group-writable, new entries keep the group
    images.push("multi", registry.host, "multi:1")
    name = f"{registry.host}/multi:1"
    homes = [cu.Home(workdir / f"user{i}", owner=uids[i]) for i in range(2)]
    for h in homes:
        h.write_config(cache_dir=str(shared))
    procs = []
    for i, h in enumerate(homes):
        argv = cu.as_user(uids[i], ["sh", "-c", 'umask 002; exec "$0" "$@"',
                                    cu.capsule_binary(uids[i]), "pull", "-q", name])
        procs.append(cu.Proc(argv, workdir / f"pull{i}.log", env=h.env()))
    for p in procs:
        assert p.wait(120) == 0, p.log()
        p.stop()
    assert [registry.blob_gets(d) for d in registry.image("multi", "1")[2]] == [1] * 5
    for h in homes:
        r = h.capsule("images", "--format", "json")
        assert r.returncode == 0, r.stderr
        assert [i["name"] for i in json.loads(r.stdout)] == [name]
    for h in homes:
        r = h.capsule("check")
        assert "shared cache" in r.stdout and "run from a copy" in r.stdout, r.stdout
    # What a shared cache cannot do, said plainly: the base layer holds a 0600 file (/etc/secret)
    # that only the member who unpacked it may read, so only they can run the image. (Above, the
    # two pulls raced for the layers, and who unpacked which decides whether the other can use
    # the overlay at all; here one member pulls alone, so it is always the other who cannot.)
    second = workdir / "shared-cache-2"
    second.mkdir()
    os.chown(second, 0, gid)
    second.chmod(0o2775)
    for h in homes:
        h.write_config(cache_dir=str(second))
    r = cu.run(cu.as_user(uids[0], ["sh", "-c", 'umask 002; exec "$0" "$@"',
                                    cu.capsule_binary(uids[0]), "pull", "-q", name]),
               env=homes[0].env(), timeout=120)
    assert r.returncode == 0, r.stderr
    owner = uids[0][0]
    r = homes[1].capsule("run", "--no-home", name, "-c", "cat /etc/hello")
    assert r.returncode == 125, (r.returncode, r.stderr)
    assert f"'etc/secret' belongs to uid {owner}, who pulled the image into this " \
           "shared cache" in r.stderr, r.stderr
    assert "pull it into a cache of your own" in r.stderr
    r = homes[0].capsule("run", "--no-home", name, "-c", "cat /etc/hello")
    assert r.returncode == 0 and r.stdout == "changed\n", r.stderr


def test_interrupted_pull_resumes(images, registry, home):
    size = 24 * 1024 * 1024
    digest = cu.build_big_image(images, size)
    registry.push_raw(images, "big", "big:1")
    proxy = cu.SlowProxy(registry.port, rate=3 * 1024 * 1024)
    try:
        name = f"{proxy.host}/big:1"
        p = home.popen("pull", "-q", name)
        partial = home.cache / "tmp" / f"{cu.hexpart(digest)}.partial"

        def some_bytes():
            return partial.exists() and partial.stat().st_size > 4 * 1024 * 1024
        cu.wait_for(some_bytes, 60, "a partial download of several MiB")
        p.popen.send_signal(signal.SIGKILL)
        p.wait(10)
        p.stop()
        had = partial.stat().st_size
        assert 0 < had < size
        assert home.images_json() == []

        proxy.rate = None
        proxy.requests.clear()
        assert_ok(pull(home, "-q", name))
        blob_gets = [q for q in proxy.requests if q[1].endswith(digest)]
        assert len(blob_gets) == 1, proxy.requests
        start = int(blob_gets[0][2].removeprefix("bytes=").rstrip("-"))
        assert 0 < start <= had, (blob_gets, had)
        assert (home.layer_dir(digest) / "big.bin").stat().st_size == size
        assert home.tmp_entries() == []
    finally:
        proxy.stop()


def test_full_cache_says_what_to_do(images, registry, home):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs as the cache")
    digest = cu.build_big_image(images, 3 * 1024 * 1024)
    registry.push_raw(images, "big", "big:1")
    # 4 MiB of zeros compress to a few KiB: the declared size fits, the unpacked layer does not.
    images.umoci("new", "--image", f"{images.path}:zeros")
    images.add_layer("zeros", [("zeros.bin", "file", bytes(4 * 1024 * 1024), 0o644)], "gzip")
    registry.push_raw(images, "zeros", "zeros:1")
    cache_parent = home.root / "cache"
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(cache_parent)],
                   check=True)
    try:
        # The declared sizes do not fit: refused before a byte of the layer is fetched.
        r = pull(home, "-q", f"{registry.host}/big:1")
        assert_fails(r, "No space left on device", "the layers to fetch declare 3.15 MB",
                     "make room in the cache", str(home.cache), "capsule gc")
        assert registry.blob_gets(digest) == 0
        # They fit, the unpack does not: the same advice, and nothing half-made.
        r = pull(home, "-q", f"{registry.host}/zeros:1")
        assert_fails(r, "No space left on device", "make room in the cache", str(home.cache))
        assert home.images_json() == []
        assert not list((home.cache / "layers" / "sha256").iterdir())
    finally:
        subprocess.run(["umount", str(cache_parent)], check=True)


def test_max_unpacked_size(images, registry, home):
    """A few KiB of compressed zeros expand to anything: a layer whose files hold more than
    max_unpacked_size is refused while it unpacks, and nothing of it stays."""
    tag = f"bomb-{os.getpid()}"
    images.umoci("new", "--image", f"{images.path}:{tag}")
    images.add_layer(tag, [("zeros.bin", "file", bytes(3 * 1024 * 1024), 0o644)], "zstd")
    registry.push_raw(images, tag, f"{tag}:1")
    home.write_config(max_unpacked_size="1M")
    r = pull(home, "-q", f"{registry.host}/{tag}:1")
    assert_fails(r, "layer entry 'zeros.bin': the layer unpacks to more than 1.0 MiB",
                 "max_unpacked_size")
    assert home.images_json() == []
    assert not list((home.cache / "layers" / "sha256").iterdir())
    assert [t for t in home.tmp_entries() if not t.endswith(".partial")] == []
    home.write_config(max_unpacked_size="4M")
    assert_ok(pull(home, "-q", f"{registry.host}/{tag}:1"))


def test_max_layer_size(images, registry, home):
    """A layer that declares more than max_layer_size is refused before it is fetched: a
    registry cannot make capsule write more than the limit (a download never grows past the
    size its manifest declares)."""
    images.push("multi", registry.host, "multi:1")
    layers = registry.image("multi", "1")[2]
    home.write_config(max_layer_size="1K")
    r = pull(home, "-q", f"{registry.host}/multi:1")
    assert_fails(r, "declares", "more than max_layer_size (1.00 KiB)")
    assert [registry.blob_gets(d) for d in layers] == [0] * len(layers)
    assert home.images_json() == []
    home.write_config(max_layer_size="lots")
    r = pull(home, "-q", f"{registry.host}/multi:1")
    assert r.returncode != 0 and "max_layer_size: 'lots' is not a size" in r.stderr, r.stderr
    home.write_config(max_layer_size="64G")
    assert_ok(pull(home, "-q", f"{registry.host}/multi:1"))


def test_registry_down(home):
    home.write_config(retries=1)
    port = cu.free_port()
    t0 = time.monotonic()
    r = pull(home, f"127.0.0.1:{port}/nothing:1")
    assert_fails(r, f"cannot reach registry 127.0.0.1:{port}")
    assert time.monotonic() - t0 < 30
    assert home.images_json() == []


def test_registry_name_does_not_resolve(home, tmp_path):
    """A misspelt registry is named as such, at once (no retries), without advice about TLS or
    insecure registries, which would send the user the wrong way. The machine's resolver is
    replaced by one that answers at once (nothing on 127.0.0.1:53), so the test does not depend
    on this machine's DNS."""
    home.write_config(retries=3)
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
    for ref, host, name in (("registry.example.invalid:5000/x:1", "registry.example.invalid:5000",
                             "registry.example.invalid"),
                            ("registry.example.invalid/x:1", "registry.example.invalid",
                             "registry.example.invalid")):
        r = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount --bind "$0" /etc/resolv.conf && exec "$@"', str(resolv),
             cu.capsule_binary(), "pull", ref],
            env={**os.environ, **home.env()}, capture_output=True, text=True, timeout=60)
        assert_fails(r, f"cannot reach registry {host}: the host name '{name}' does not resolve")
        assert "insecure" not in r.stderr and "TLS" not in r.stderr, r.stderr
        # Not retried: a retried failure ends "giving up after N attempts".
        assert "attempts" not in r.stderr, r.stderr
    assert home.images_json() == []


def test_unknown_image(registry, home):
    assert_fails(pull(home, f"{registry.host}/nothing:1"), "nothing:1", "unknown")


def test_plain_http_only_where_allowed(images, registry, home):
    # 0.0.0.0 reaches the registry listening on 127.0.0.1, but it is not a loopback name.
    host = f"0.0.0.0:{registry.port}"
    images.push("other", registry.host, "other:1")
    r = pull(home, f"{host}/other:1")
    assert_fails(r, "insecure_registries", host)
    assert registry.blob_gets(images.layers("other")[0]) == 0
    home.write_config(insecure_registries=f"example.invalid:5000 {host}")
    assert_ok(pull(home, f"{host}/other:1"))


def test_progress_on_a_terminal(images, registry, home):
    images.push("other", registry.host, "other:1")
    master, slave = pty.openpty()
    env = dict(os.environ)
    env.update(home.env())
    proc = subprocess.Popen([cu.capsule_binary(), "pull", f"{registry.host}/other:1"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                            env=env)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(60) == 0
    os.close(master)
    text = out.decode(errors="replace")
    # One line per layer, redrawn in place: cursor-up sequences and a final "done" for each.
    assert "\x1b[2A" in text, text
    for d in images.layers("other"):
        assert cu.hexpart(d)[:12] in text
    assert text.count("done") >= 2


def test_progress_in_a_log(images, registry, home):
    images.push("other", registry.host, "other:1")
    r = pull(home, f"{registry.host}/other:1")
    assert_ok(r)
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and all("done" in l for l in lines), r.stderr
    assert "\x1b" not in r.stderr


def test_registry_mirror_serves_docker_hub_names(images, registry, home):
    """Compute nodes reach no public registry: a mirror (here the test registry, holding the
    image under Docker Hub's repository name) serves every pull of docker.io images, and the
    image keeps the name the user wrote."""
    images.push("multi", registry.host, "library/multi:1")
    home.write_config(registry_mirrors=f"docker.io=http://{registry.host}/")
    assert_ok(pull(home, "multi:1"))
    assert [i["name"] for i in home.images_json()] == ["docker.io/library/multi:1"]
    r = home.capsule("run", "--no-home", "multi:1", "-c", "cat /etc/hello")
    assert r.returncode == 0 and r.stdout == "changed\n", r.stderr
    # Docker Hub's other names use the same mirror.
    assert_ok(pull(home, "registry-1.docker.io/library/multi:1"))


def test_a_dead_mirror_falls_back_and_is_named(images, registry, home):
    images.push("multi", registry.host, "team/multi:1")
    dead = cu.free_port()
    # The registry's own host is mirrored by a dead one: the pull goes on from the registry.
    home.write_config(registry_mirrors=f"{registry.host}=http://127.0.0.1:{dead}",
                      retries="1")
    assert_ok(pull(home, f"{registry.host}/team/multi:1"))
    # Nothing anywhere: the error names the registry and the mirror.
    home.write_config(registry_mirrors=f"{registry.host}=http://127.0.0.1:{dead}",
                      retries="1")
    r = pull(home, f"{registry.host}/team/absent:1")
    assert_fails(r, "absent", f"the mirror http://127.0.0.1:{dead} failed too")


def test_bad_mirror_settings_are_refused_by_line(home):
    for value, said in [("docker.io", "expected REGISTRY=URL"),
                        ("docker.io=ftp://x", "http:// or https://"),
                        ("docker.io=http://h/path", "scheme and host[:port] only")]:
        home.write_config(registry_mirrors=value)
        r = pull(home, "multi:1")
        assert_fails(r, "registry_mirrors", said)
