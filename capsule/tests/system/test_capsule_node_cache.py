"""The node cache (capsule-cached): one pull and one unpack per layer for every user of the node,
with each requester's own registry credentials, and nothing for a user the registry refuses.

A real docker-registry with token auth and per-user access (the token server grants each user
only the repositories the ACL lists), the service running as a test system account of its own,
and capsule run by ordinary test users."""

import collections
import json
import os
import re
import stat

import pytest

import capsuleutil as cu
import gntest

REGISTRY_USERS = {"alice": "wonderland", "bob": "builder"}


@pytest.fixture
def acl():
    """Who may pull what; a test changes it before it pulls."""
    return {"alice": ["shared/multi", "private/secret"], "bob": ["shared/multi"]}


@pytest.fixture
def world(images, workdir, capsule_users, acl):
    ts = cu.TokenServer(workdir, REGISTRY_USERS, acl=acl)
    reg = cu.Registry(workdir / "registry", auth=("token", ts))
    # The test registry serves plain HTTP: listing it is the administrator's word that nobody
    # else answers on its address.
    node = cu.NodeCache(workdir, capsule_users, config={"insecure_registries": reg.host})
    yield World(images, reg, ts, node, workdir, capsule_users)
    node.stop()
    assert node.proc.sanitizer_report() is None, node.proc.tail()
    reg.stop()
    ts.stop()


class World:
    def __init__(self, images, reg, ts, node, workdir, users):
        self.images, self.reg, self.ts, self.node = images, reg, ts, node
        self.workdir, self.users = workdir, users

    def push(self, tag, name):
        # The ACL grants pushes only where it grants pulls: push as a user the repository is
        # listed for.
        owner = next(u for u, repos in self.ts.acl.items() if name.split(":")[0] in repos)
        self.images.push(tag, self.reg.host, name, creds=(owner, REGISTRY_USERS[owner]))
        return f"{self.reg.host}/{name}"

    def home(self, role, registry_user):
        """A node user `role` whose capsule uses the node cache and logs in as registry_user."""
        uid = self.users.user(role)
        h = cu.Home(self.workdir / role, owner=uid)
        h.write_config(node_cache=str(self.node.socket))
        h.write_credentials(f"machine {self.reg.host} login {registry_user} password "
                            f"{REGISTRY_USERS[registry_user]}\n")
        return h

    def admin(self):
        """root's capsule, using the node cache (gc and rekey are for root and the admin
        group)."""
        h = cu.Home(self.workdir / "admin")
        h.write_config(node_cache=str(self.node.socket))
        return h

    def slow_proxy(self, rate):
        """A throttling proxy in front of the registry (rate bytes/s), which the service trusts
        as it trusts the registry."""
        proxy = cu.SlowProxy(self.reg.port, rate=rate)
        self.node.trust_registries(proxy.host)
        return proxy

    def proxy_home(self, role, registry_user, proxy):
        """home(), logging in through the proxy as registry_user."""
        h = self.home(role, registry_user)
        h.write_credentials(f"machine {proxy.host} login {registry_user} password "
                            f"{REGISTRY_USERS[registry_user]}\n")
        return h

    def pull_in_background(self, h, name, log):
        """`capsule pull -q name` as h's owner, running on (cu.Proc, its log in log)."""
        return cu.Proc(cu.as_user(h.owner, [cu.capsule_binary(h.owner), "pull", "-q", name]),
                       self.workdir / log, env=h.env())

    def wait_in_tmp(self, what):
        """Waits for the service's tmp/ to hold what: "download" (a .partial blob) or "unpack"
        (a layer's directory being filled)."""
        tmp = self.node.dir / "tmp"
        if what == "download":
            cu.wait_for(lambda: any(p.name.endswith(".partial") for p in tmp.iterdir()), 60,
                        "the service's download")
        else:
            cu.wait_for(lambda: any(p.is_dir() and "." in p.name for p in tmp.iterdir()), 60,
                        "an unpack in progress")

    def blob_gets(self):
        """{digest: GETs the registry answered}, for every blob fetched so far."""
        pat = re.compile(r'http\.request\.method=GET .*http\.request\.uri="/v2/[^"]*/blobs/'
                         r'(sha256:[0-9a-f]{64})"')
        counts = collections.Counter()
        for line in self.reg.proc.log().splitlines():
            m = pat.search(line) if "response completed" in line else None
            if m:
                counts[m.group(1)] += 1
        return counts


def record(home):
    images = home.images_json()
    assert len(images) == 1, images
    return images[0]


def test_two_users_one_download(world):
    name = world.push("multi", "shared/multi:1")
    ann, ben = world.home("na", "alice"), world.home("nb", "bob")
    r = ann.capsule("pull", "-q", name)
    assert r.returncode == 0, r.stderr + world.node.proc.tail()
    config = world.images.manifest("multi")["config"]["digest"]
    first = world.blob_gets()
    # Five layers fetched once, by the service; the config by the user's capsule (to check the
    # platform and keep in the user's store) and by the service (the same, for its record).
    assert len(first) == 6 and first.pop(config) == 2 and set(first.values()) == {1}, first
    r = ben.capsule("pull", "-q", name)
    assert r.returncode == 0, r.stderr + world.node.proc.tail()
    # The second user's pull fetched no layer again: the service found them.
    second = world.blob_gets()
    assert second.pop(config) == 3 and second == first, (first, second)
    # The record that names the service's directories is its owner's alone: the paths are the
    # layers' secret.
    for h in (ann, ben):
        recs = list((h.cache / "images").iterdir())
        assert [stat.S_IMODE(p.stat().st_mode) for p in recs] == [0o600], recs
    # Each user's own store keeps the manifest and config, and no layer of its own.
    for h in (ann, ben):
        assert record(h)["name"] == name
        assert not (h.cache / "layers" / "sha256").exists() or not any(
            (h.cache / "layers" / "sha256").iterdir())
    # The layers belong to the service's account, under a folder nobody else can list.
    layers_dir = world.node.dir / "layers"
    assert stat.S_IMODE(layers_dir.stat().st_mode) == 0o711
    entries = [e for e in layers_dir.iterdir() if not e.name.endswith(".lease")]
    assert len(entries) == 5
    assert all(e.stat().st_uid == world.node.account[0] for e in entries)
    r = cu.run(["ls", str(layers_dir)], user=world.users.user("nb"))
    assert r.returncode != 0 and "Permission denied" in r.stderr, r
    # capsule check says the node cache answers and this host can mount its layers.
    r = ben.capsule("check")
    lines = [line.split() for line in r.stdout.splitlines()]
    assert ["ok", "node", "cache", f"{world.node.socket}:", "capsule-cached", "answers"] in lines, \
        r.stdout
    assert any(line[:2] == ["ok", "fuse-overlayfs"] for line in lines), r.stdout
    world.node.stop()
    r = ben.capsule("check")
    assert r.returncode == 1 and "is capsule-cached running?" in r.stdout, r.stdout
    world.node.start()


def bearer_token(ts, user, repository):
    """A token from the token server, as `user` asked it for pulling `repository`."""
    import base64
    import urllib.request
    req = urllib.request.Request(
        f"{ts.realm}?service={ts.service}&scope=repository:{repository}:pull",
        headers={"Authorization": "Basic " + base64.b64encode(
            f"{user}:{REGISTRY_USERS[user]}".encode()).decode()})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())["token"]


def test_private_image_stays_with_who_may_pull_it(world):
    name = world.push("other", "private/secret:1")
    ann, ben = world.home("pa", "alice"), world.home("pb", "bob")
    r = ann.capsule("pull", "-q", name)
    assert r.returncode == 0, r.stderr + world.node.proc.tail()
    pinned = f"{world.reg.host}/private/secret@{record(ann)['digest']}"
    # bob's own capsule is refused by the registry before it asks the service anything.
    r = ben.capsule("pull", "-q", name)
    assert r.returncode != 0 and "access denied" in r.stderr, r.stderr
    assert ben.images_json() == []
    # bob asking the service directly, with his own token, without any, or with a made-up one,
    # gets no path either: the service asks the registry with what it was handed.
    bob = world.users.user("pb")
    for auth in (f"Bearer {bearer_token(world.ts, 'bob', 'private/secret')}", None,
                 "Bearer not-a-token"):
        body = {"image": pinned}
        if auth:
            body["authorization"] = auth
        status, answer = world.node.api("POST", "/v1/pull", body, user=bob)
        assert status == 403 and "access denied" in answer["error"], (status, answer)
        assert "layers" not in answer
    # alice's token, handed over by alice, works; the layers are those alice's pull got.
    alice_token = bearer_token(world.ts, "alice", "private/secret")
    status, answer = world.node.api("POST", "/v1/pull", {
        "image": pinned, "authorization": f"Bearer {alice_token}"}, user=world.users.user("pa"))
    assert status == 200, answer
    assert [l["path"] for l in answer["layers"]] == record(ann)["layer_paths"]
    # The service kept no token: nothing under its store or log holds one.
    for token in (alice_token,):
        assert token not in world.node.proc.log()
        r = cu.run(["grep", "-rl", token[-40:], str(world.node.dir)])
        assert r.stdout == "", r.stdout


class HostileRegistry:
    """A registry of bob's own that claims to hold another registry's private layer: its
    manifest lists that layer's digest, HEAD says yes to every blob, GET has only the config."""

    def __init__(self, config, layer_digest, layer_size):
        import http.server
        import threading
        self.config = json.dumps(config).encode()
        self.config_digest = cu.sha256(self.config)
        self.manifest = json.dumps({
            "schemaVersion": 2, "mediaType": cu.MEDIA_OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": self.config_digest, "size": len(self.config)},
            "layers": [{"mediaType": cu.MEDIA_LAYER["gzip"], "digest": layer_digest,
                        "size": layer_size}]}).encode()
        self.layer_gets = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _send(self, status, body=b"", ctype="application/octet-stream", head=False):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                if body:
                    self.send_header("Docker-Content-Digest", cu.sha256(body))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def do_HEAD(self):
                self._send(200, b"x" * 16, head=True)

            def do_GET(self):
                if self.path == "/v2/":
                    self._send(200, b"{}", "application/json")
                elif "/manifests/" in self.path:
                    self._send(200, outer.manifest, cu.MEDIA_OCI_MANIFEST)
                elif self.path.endswith(outer.config_digest):
                    self._send(200, outer.config)
                else:
                    outer.layer_gets += 1
                    self._send(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}', "application/json")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_registry_that_lies_gets_no_path(world):
    """A layer someone else pulled is handed out only on the word of the registry it came from:
    another registry's HEAD cannot vouch for it."""
    name = world.push("other", "private/secret:1")
    ann, ben = world.home("la", "alice"), world.home("lb", "bob")
    assert ann.capsule("pull", "-q", name).returncode == 0
    private_layer = record(ann)["layers"][-1]
    config = world.images.config("other")
    config["rootfs"]["diff_ids"] = config["rootfs"]["diff_ids"][-1:]
    hostile = HostileRegistry(config, private_layer, 1024)
    # Even a registry the administrator trusts can vouch only for what it served.
    world.node.trust_registries(hostile.host)
    try:
        r = ben.capsule("pull", "-q", f"{hostile.host}/evil:1")
        assert r.returncode != 0, r.stdout
        assert hostile.layer_gets >= 1, r.stderr + world.node.proc.tail()
        assert ben.images_json() == []
    finally:
        hostile.stop()


def test_twenty_users_at_once_one_download_each(world):
    name = world.push("multi", "shared/multi:1")
    homes = [world.home(f"t{i}", "alice" if i % 2 else "bob") for i in range(20)]
    procs = []
    for i, h in enumerate(homes):
        argv = cu.as_user(h.owner, [cu.capsule_binary(h.owner), "pull", "-q", name])
        procs.append(cu.Proc(argv, world.workdir / f"pull{i}.log", env=h.env()))
    for p in procs:
        assert p.wait(180) == 0, p.log() + world.node.proc.tail()
        p.stop()
    gets = world.blob_gets()
    config = world.images.manifest("multi")["config"]["digest"]
    gets.pop(config)
    assert len(gets) == 5 and set(gets.values()) == {1}, gets
    paths = {tuple(record(h)["layer_paths"]) for h in homes}
    assert len(paths) == 1, paths
    status, listed = world.node.api("GET", "/v1/images", user=homes[0].owner)
    assert status == 200 and len(listed) == 1, listed
    assert listed[0]["users"] == 20 and listed[0]["layers"] == 5, listed
    metrics = gntest.parse_metrics(gntest.scrape(world.node.port).text())
    assert metrics[("capsule_cached_pulls_total", (("outcome", "served"),))] == 20
    assert metrics[("capsule_cached_layers_fetched_total", ())] == 5
    assert metrics[("capsule_cached_layer_hits_total", ())] == 19 * 5


def test_gc_is_for_root_and_keeps_what_images_use(world):
    name = world.push("multi", "shared/multi:1")
    ann = world.home("ga", "alice")
    assert ann.capsule("pull", "-q", name).returncode == 0
    r = ann.capsule("gc", "--node")
    assert r.returncode == 1 and "only root" in r.stderr, r
    r = ann.capsule("images", "--node")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "LAYERS", "SIZE", "USERS", "LAST", "USED"], r.stdout
    assert lines[1].split()[:2] == [f"{world.reg.host}/shared/multi@{record(ann)['digest']}",
                                    "5"], r.stdout
    # A layer no record names (a pull that never finished its record) goes; the image's stay.
    stray = world.node.dir / "layers" / ("0" * 64)
    cu.run(["mkdir", str(stray)], user=world.node.account, check=True)
    cu.run(["touch", f"{stray}.lease"], user=world.node.account, check=True)
    admin = world.admin()
    # While a container runs on it (its capsule holds its lease), it stays.
    fd = cu.hold_layer(stray)
    r = admin.capsule("gc", "--node")
    os.close(fd)
    assert r.returncode == 0 and "removed 0 layers;" in r.stdout, r
    assert "kept 1 layer" in r.stdout and stray.exists(), r
    r = admin.capsule("gc", "--node")
    assert r.returncode == 0 and "removed 1 layer;" in r.stdout, r
    assert not stray.exists() and not os.path.exists(f"{stray}.lease")
    # A user may lock a lease for reading (as a container does), never for writing: nobody can
    # keep another's container from starting.
    lease = record(ann)["layer_paths"][0] + ".lease"
    script = (f"import fcntl, os, struct; fd = os.open({lease!r}, os.O_RDONLY); "
              "fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack('hhqqixxxx', fcntl.F_WRLCK, 0, 0, "
              "0, 0))")
    r = cu.run(["/usr/bin/python3", "-c", script], user=ann.owner)
    assert r.returncode != 0 and "Bad file descriptor" in r.stderr, r
    r = cu.run(["/usr/bin/python3", "-c", script.replace("O_RDONLY", "O_RDWR")], user=ann.owner)
    assert r.returncode != 0 and "Permission denied" in r.stderr, r
    assert all(os.path.isdir(p) for p in record(ann)["layer_paths"])


def big_layer_image(world):
    """An image whose second layer holds 20000 files, slow enough to unpack to be caught at."""
    lay = cu.Layout(world.workdir / "oci-big")
    lay.new_image("big", cu.busybox_rootfs)
    lay.add_layer("big", [("many", "dir", None, 0o755)] +
                  [(f"many/f{i:05d}", "file", b"%d\n" % i, 0o644) for i in range(20000)])
    lay.push("big", world.reg.host, "shared/multi:big", creds=("alice", "wonderland"))
    return f"{world.reg.host}/shared/multi:big"


def test_killed_mid_unpack_leaves_no_half_layer(world):
    name = big_layer_image(world)
    ann = world.home("ka", "alice")
    pull = world.pull_in_background(ann, name, "kill-pull.log")
    world.wait_in_tmp("unpack")
    before = set(os.listdir(world.node.dir / "layers"))
    world.node.kill()
    assert pull.wait(60) != 0
    assert "node cache" in pull.log(), pull.log()
    # What the kill interrupted is in tmp/ only; layers/ holds finished layers alone.
    assert set(os.listdir(world.node.dir / "layers")) == before
    world.node.start()
    r = ann.capsule("pull", "-q", name)
    assert r.returncode == 0, r.stderr + world.node.proc.tail()
    assert len(record(ann)["layer_paths"]) == 2
    many = os.path.join(record(ann)["layer_paths"][1], "many")
    assert len(os.listdir(many)) == 20000


def test_a_full_disk_is_named_to_every_requester(world):
    world.node.stop()
    # The service's store on a small file system of its own.
    cu.run(["mount", "-t", "tmpfs", "-o", f"size=1m,uid={world.node.account[0]},mode=0755",
            "tmpfs", str(world.node.dir.parent)], check=True)
    try:
        world.node.start()
        name = world.push("multi", "shared/multi:1")
        homes = [world.home(f"d{i}", "alice") for i in range(2)]
        procs = [world.pull_in_background(h, name, f"full{i}.log") for i, h in enumerate(homes)]
        for p in procs:
            assert p.wait(120) != 0
            assert "node cache" in p.log() and "space" in p.log(), p.log()
            assert "capsule gc --node" in p.log() and str(homes[0].cache) not in p.log()
        # Nothing half-unpacked is left where users look.
        assert os.listdir(world.node.dir / "layers") == []
    finally:
        world.node.stop()
        cu.run(["umount", "-l", str(world.node.dir.parent)])


def test_debian_runs_for_a_user_who_did_not_pull_it(world, debian):
    """Real Debian files with their own modes: in the node cache they belong to the service's
    account, stored readable; in the container of a user who did not pull them they read as in
    that user's own cache, and can be changed (copy-up keeps the mode)."""
    debian.push("debian", world.reg.host, "shared/multi:debian", creds=("alice", "wonderland"))
    name = f"{world.reg.host}/shared/multi:debian"
    ann, ben = world.home("da", "alice"), world.home("db", "bob")
    r = ann.capsule("pull", "-q", name)
    assert r.returncode == 0, r.stderr + world.node.proc.tail()
    # In the node cache: the service's files, widened, the image's modes in the xattr.
    layer = record(ann)["layer_paths"][0]
    shadow = os.path.join(layer, "etc", "shadow")
    st = os.stat(shadow)
    assert st.st_uid == world.node.account[0] and stat.S_IMODE(st.st_mode) == 0o644
    assert os.getxattr(shadow, "user.containers.override_stat") == b"0:42:0640:file"
    assert os.getxattr(os.path.join(layer, "root"), "user.containers.override_stat") == \
        b"0:0:0700:dir"
    script = ("stat -c '%a %u %n' /etc/shadow /root /etc/.pwd.lock; head -c5 /etc/shadow; echo; "
              "echo 'someone:*:20000:0:99999:7:::' >> /etc/shadow && grep -c '^someone:' /etc/shadow && "
              "stat -c '%a after' /etc/shadow && touch /new && stat -c '%a %u new' /new")
    r = ben.capsule("run", "--remap-root", "--writable", "--no-home", name, "sh", "-c", script)
    assert r.returncode == 0, r.stdout + r.stderr + world.node.proc.tail()
    assert r.stdout.splitlines() == [
        "640 0 /etc/shadow", "700 0 /root", "600 0 /etc/.pwd.lock", "root:", "1",
        "640 after", "644 0 new"], r.stdout
    # ben's start fetched nothing: his capsule took the manifest and config, the service found
    # the layer.
    assert record(ben)["layer_paths"] == record(ann)["layer_paths"]
    # Without --remap-root the files are ben's own, as in his own cache.
    r = ben.capsule("run", "--no-home", name, "stat", "-c", "%a %u", "/etc/shadow")
    assert r.returncode == 0 and r.stdout == f"640 {ben.owner[0]}\n", r.stdout + r.stderr


def layer_bytes(home):
    return sum(int(os.getxattr(p, "user.capsule.unpacked_bytes")) for p in
               record(home)["layer_paths"])


def test_size_limit_evicts_what_no_container_runs(world):
    multi = world.push("multi", "shared/multi:1")
    other = world.push("other", "shared/multi:other")  # shares multi's first layer
    ann, ben = world.home("ea", "alice"), world.home("eb", "bob")
    assert ann.capsule("pull", "-q", multi).returncode == 0
    limit = layer_bytes(ann)
    world.node.stop()
    world.node.config["max_size"] = str(limit)
    world.node.start()
    multi_paths = record(ann)["layer_paths"]
    # While ann's container runs on multi, it stays, though over the limit.
    run = cu.Proc(cu.as_user(ann.owner, [cu.capsule_binary(ann.owner), "run", "--no-home",
                                         "--entrypoint", "busybox", multi, "sleep", "60"]),
                   world.workdir / "run.log", env=ann.env())
    cu.wait_for(lambda: cu.layer_locked(multi_paths[-1]), 30, "the container's start")
    assert ben.capsule("pull", "-q", other).returncode == 0
    assert all(os.path.isdir(p) for p in multi_paths), world.node.proc.tail()
    status, listed = world.node.api("GET", "/v1/images")
    assert len(listed) == 2, listed
    assert "what is left is in use" in world.node.proc.log()
    run.stop()
    # Once it has ended, the next pull makes room: multi, used longest ago, goes; the layer it
    # shares with other stays.
    assert ben.capsule("pull", "-q", other).returncode == 0
    status, listed = world.node.api("GET", "/v1/images")
    assert [i["image"].split("@")[0] for i in listed] == [f"{world.reg.host}/shared/multi"], listed
    other_paths = record(ben)["layer_paths"]
    assert other_paths[0] == multi_paths[0] and os.path.isdir(other_paths[0])
    assert not any(os.path.exists(p) for p in multi_paths[1:])
    metrics = gntest.parse_metrics(gntest.scrape(world.node.port).text())
    assert metrics[("capsule_cached_evictions_total", ())] == 1
    # ann's next start finds her image gone; with --pull never it says how to get it back, and
    # otherwise it asks the service for it again, as for an image never pulled.
    r = ann.capsule("run", "--pull", "never", "--no-home", "--entrypoint", "true", multi)
    assert r.returncode != 0 and "no longer in the node cache" in r.stderr, r.stderr
    r = ann.capsule("run", "--no-home", "--entrypoint", "cat", multi, "/etc/hello")
    assert r.returncode == 0 and r.stdout == "changed\n", r.stderr + world.node.proc.tail()
    assert all(os.path.isdir(p) for p in record(ann)["layer_paths"])


def running_as(uid, cmdline):
    """Whether a process of uid runs with exactly that command line (NUL-separated)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if (os.stat(f"/proc/{pid}").st_uid == uid and
                    open(f"/proc/{pid}/cmdline", "rb").read().rstrip(b"\0") == cmdline):
                return True
        except OSError:
            pass
    return False


def test_rekey_takes_every_path_back(world):
    """After a new node key, no path handed out before leads anywhere: a user's next start pulls
    again, which asks the registry again. A container that runs meanwhile keeps its files."""
    name = world.push("multi", "shared/multi:1")
    ann = world.home("ra", "alice")
    assert ann.capsule("pull", "-q", name).returncode == 0
    old = record(ann)["layer_paths"]
    run = cu.Proc(cu.as_user(ann.owner, [cu.capsule_binary(ann.owner), "run", "--no-home",
                                         "--entrypoint", "busybox", name, "sh", "-c",
                                         "sleep 2.5; cat /etc/hello"]),
                  world.workdir / "rekey-run.log", env=ann.env())
    # Running, not only starting: its layers mounted (a start that a rekey overtakes fails).
    cu.wait_for(lambda: running_as(ann.owner[0], b"sleep\x002.5"), 30, "the container's start")
    assert cu.layer_locked(old[-1])
    admin = world.admin()
    r = admin.capsule("gc", "--node", "--rekey")
    assert r.returncode == 0 and "new key, 5 layers renamed" in r.stdout, r
    assert not any(os.path.exists(p) for p in old)
    assert run.wait(30) == 0 and run.log() == "changed\n", run.log()
    before = len(world.ts.requests)
    r = ann.capsule("run", "--no-home", "--entrypoint", "cat", name, "/etc/hello")
    assert r.returncode == 0 and r.stdout == "changed\n", r.stderr
    assert [q for q in world.ts.requests[before:] if q[0] == "alice"], world.ts.requests
    new = record(ann)["layer_paths"]
    assert all(os.path.isdir(p) for p in new) and not set(new) & set(old)


def test_a_requester_who_leaves_does_not_cancel_the_others(world):
    """A slow registry (behind a throttling proxy): the pull outlasts the socket's idle timeout,
    and the first requester gives up in the middle; the second still gets the image, from the
    one download that was under way."""
    world.push("multi", "shared/multi:1")
    proxy = world.slow_proxy(64 * 1024)
    try:
        name = f"{proxy.host}/shared/multi:1"
        ann = world.proxy_home("wa", "alice", proxy)
        ben = world.proxy_home("wb", "bob", proxy)
        first = world.pull_in_background(ann, name, "first.log")
        world.wait_in_tmp("download")
        second = world.pull_in_background(ben, name, "second.log")
        first.popen.kill()
        first.popen.wait()
        assert second.wait(180) == 0, second.log() + world.node.proc.tail()
        gets = collections.Counter(p for m, p, _ in proxy.requests
                                   if m == "GET" and "/blobs/" in p)
        layers = [p for p in gets if not p.endswith(world.images.manifest("multi")["config"]
                                                    ["digest"])]
        assert len(layers) == 5 and all(gets[p] == 1 for p in layers), gets
    finally:
        proxy.stop()


def test_one_user_many_pulls_at_once(world):
    """A job array's tasks on one node pull the same image at once, all as one user: more than
    lib/http-server's usual share of one user's connections; all of them get it."""
    world.push("multi", "shared/multi:1")
    proxy = world.slow_proxy(512 * 1024)
    try:
        name = f"{proxy.host}/shared/multi:1"
        ann = world.proxy_home("ma", "alice", proxy)
        procs = [world.pull_in_background(ann, name, f"many{i}.log") for i in range(12)]
        for p in procs:
            assert p.wait(180) == 0, p.log() + world.node.proc.tail()
            p.stop()
        gets = collections.Counter(p for m, p, _ in proxy.requests
                                   if m == "GET" and "/blobs/" in p)
        config = world.images.manifest("multi")["config"]["digest"]
        assert len([p for p in gets if not p.endswith(config)]) == 5, gets
    finally:
        proxy.stop()


def test_gc_runs_while_a_pull_downloads(world):
    """An administrator's gc is not held up by a slow pull: it removes what no image uses while
    the pull downloads, keeps everything the pull has stored, and the pull ends with a working
    image."""
    world.push("multi", "shared/multi:1")
    stray = world.node.dir / "layers" / ("0" * 64)
    cu.run(["mkdir", str(stray)], user=world.node.account, check=True)
    proxy = world.slow_proxy(128 * 1024)
    try:
        name = f"{proxy.host}/shared/multi:1"
        ann = world.proxy_home("gw", "alice", proxy)
        pull = world.pull_in_background(ann, name, "gw-pull.log")
        layers = world.node.dir / "layers"
        # A layer is in place and the pull goes on: that layer has no record yet.
        cu.wait_for(lambda: any(p.name != stray.name and not p.name.endswith(".lease")
                                for p in layers.iterdir()), 120, "the pull's first layer")
        assert pull.running(), pull.log()
        admin = world.admin()
        r = admin.capsule("gc", "--node")
        assert r.returncode == 0 and "removed 1 layer;" in r.stdout, r.stdout + r.stderr
        assert not stray.exists()
        assert pull.running(), "the pull ended before gc: make the proxy slower"
        assert pull.wait(180) == 0, pull.log() + world.node.proc.tail()
        r = ann.capsule("run", "--no-home", "--entrypoint", "cat", name, "/etc/hello")
        assert r.returncode == 0 and r.stdout == "changed\n", r.stderr
        # And the next gc keeps all of it: the record names it.
        r = admin.capsule("gc", "--node")
        assert r.returncode == 0 and "removed 0 layers;" in r.stdout, r.stdout
    finally:
        proxy.stop()


def test_a_token_that_expires_mid_pull(world):
    """Registries' bearer tokens often last 5 minutes and a large image takes longer: when the
    registry stops taking the requester's token, capsule gets a new one and the service goes on
    from where it was, fetching no layer twice."""
    world.push("multi", "shared/multi:1")
    world.ts.expires_in, world.ts.registry_leeway = 3, 60
    world.node.config["parallel_downloads"] = "1"
    proxy = world.slow_proxy(256 * 1024)
    try:
        name = f"{proxy.host}/shared/multi:1"
        ann = world.proxy_home("te", "alice", proxy)
        before = len(world.ts.requests)
        r = ann.capsule("pull", "-q", name, timeout=300)
        assert r.returncode == 0, r.stderr + world.node.proc.tail()
        log = world.node.proc.log()
        assert "the token expired" in log, log
        tokens = [q for q in world.ts.requests[before:] if q[0] == "alice" and q[2] == 200]
        assert len(tokens) >= 2, world.ts.requests[before:]
        # Each layer came once (the registry's log: requests it refused are not answered).
        gets = world.blob_gets()
        config = world.images.manifest("multi")["config"]["digest"]
        layers = {d: n for d, n in gets.items() if d != config}
        assert len(layers) == 5 and set(layers.values()) == {1}, gets
        r = ann.capsule("run", "--no-home", "--entrypoint", "cat", name, "/etc/hello")
        assert r.returncode == 0 and r.stdout == "changed\n", r.stderr
    finally:
        proxy.stop()


def test_a_plain_http_registry_nobody_listed_is_pulled_alone(world):
    """Whoever answers on a plain-HTTP address can say yes to any HEAD there: the service shares
    nothing from a plain-HTTP registry its administrator has not listed, and each user's capsule
    pulls such an image into its own cache, saying why."""
    name = world.push("multi", "shared/multi:1")
    world.node.config.pop("insecure_registries")
    world.node.stop()
    world.node.start()
    ann, ben = world.home("ha", "alice"), world.home("hb", "bob")
    for h in (ann, ben):
        r = h.capsule("pull", "-q", name)
        assert r.returncode == 0, r.stderr + world.node.proc.tail()
        assert "node cache: the node cache does not take images from " + world.reg.host in \
            r.stderr and "pulling into your own cache" in r.stderr, r.stderr
        assert "layer_paths" not in record(h)
        r = h.capsule("run", "--no-home", "--entrypoint", "cat", name, "/etc/hello")
        assert r.returncode == 0 and r.stdout == "changed\n", r.stderr
    # Nothing of it in the node cache; each user fetched each layer.
    layers = world.node.dir / "layers"
    assert not [p for p in layers.iterdir()], list(layers.iterdir())
    config = world.images.manifest("multi")["config"]["digest"]
    gets = {d: n for d, n in world.blob_gets().items() if d != config}
    assert len(gets) == 5 and set(gets.values()) == {2}, gets


def test_a_registry_over_tls_is_shared_without_listing(world):
    """How registries are reached in production: TLS, here with a private CA that the service's
    ca_file and the users' capsule.conf name. Nothing is listed, and the layers are shared; a
    service that cannot check the registry's certificate takes nothing from it."""
    tls = cu.Registry(world.workdir / "registry-tls", auth=("token", world.ts), tls=True)
    try:
        world.images.push("multi", tls.host, "shared/multi:1", creds=("alice", "wonderland"))
        name = f"{tls.host}/shared/multi:1"
        world.node.config["ca_file"] = str(tls.cert_path)
        world.node.stop()
        world.node.start()
        homes = {"alice": world.home("sa", "alice"), "bob": world.home("sb", "bob"),
                 "carol": world.home("sc", "alice")}
        for role, h in homes.items():
            user = "bob" if role == "bob" else "alice"
            h.write_config(node_cache=str(world.node.socket), ca_file=str(tls.cert_path))
            h.write_credentials(f"machine {tls.host} login {user} password "
                                f"{REGISTRY_USERS[user]}\n")
        for h in (homes["alice"], homes["bob"]):
            r = h.capsule("pull", "-q", name)
            assert r.returncode == 0 and "does not take" not in r.stderr, \
                r.stderr + world.node.proc.tail()
        paths = record(homes["alice"])["layer_paths"]
        assert record(homes["bob"])["layer_paths"] == paths and len(paths) == 5
        assert all(tls.blob_gets(d) == 1 for d in record(homes["alice"])["layers"]), \
            tls.proc.log()
        r = homes["bob"].capsule("run", "--no-home", "--entrypoint", "cat", name, "/etc/hello")
        assert r.returncode == 0 and r.stdout == "changed\n", r.stderr
        # Without the CA the service cannot tell the registry from anyone else on its address.
        del world.node.config["ca_file"]
        world.node.stop()
        world.node.start()
        r = homes["carol"].capsule("pull", "-q", name)
        assert r.returncode == 0, r.stderr + world.node.proc.tail()
        assert "node cache: the node cache does not take images from " + tls.host in r.stderr, \
            r.stderr
        assert "layer_paths" not in record(homes["carol"])
    finally:
        tls.stop()


def test_who_used_an_image_survives_a_restart(world):
    """`capsule images --node` counts an image's users and its last use; a restarted service
    (an upgrade, a crash) still knows them, and a damaged record of them costs only that."""
    name = world.push("multi", "shared/multi:1")
    ann, ben = world.home("ua", "alice"), world.home("ub", "bob")
    for h in (ann, ben):
        assert h.capsule("pull", "-q", name).returncode == 0
    status, before = world.node.api("GET", "/v1/images")
    assert status == 200 and [i["users"] for i in before] == [2], before
    world.node.kill()
    world.node.start()
    status, after = world.node.api("GET", "/v1/images")
    assert after == before, (before, after)
    uses = world.node.dir / "uses.json"
    assert stat.S_IMODE(uses.stat().st_mode) == 0o600
    world.node.stop()
    cu.run(["sh", "-c", f"echo '{{\"x\": 1' > {uses}"], user=world.node.account, check=True)
    world.node.start()
    assert "uses.json is damaged" in world.node.proc.log(), world.node.proc.tail()
    status, damaged = world.node.api("GET", "/v1/images")
    assert [i["users"] for i in damaged] == [0], damaged
    assert ann.capsule("pull", "-q", name).returncode == 0
    status, again = world.node.api("GET", "/v1/images")
    assert [i["users"] for i in again] == [1], again
    r = ann.capsule("images", "--node")
    assert r.returncode == 0 and r.stdout.splitlines()[1].split()[4] == "1", r.stdout


def test_a_users_share_of_the_node_cache(world):
    """max_user_size bounds what one user's images that nobody else uses may hold: past it, that
    user's next new image goes to their own cache, with a warning. An image others use too costs
    its first user nothing."""
    multi = world.push("multi", "shared/multi:1")
    other = world.push("other", "shared/multi:other")  # shares multi's first layer
    ann, ben = world.home("qa", "alice"), world.home("qb", "bob")
    assert ann.capsule("pull", "-q", multi).returncode == 0
    status, listed = world.node.api("GET", "/v1/images")
    world.node.config["max_user_size"] = str(listed[0]["size"])  # multi alone fills ann's share
    world.node.stop()
    world.node.start()

    def own(h, name):
        return next(i for i in h.images_json() if i["name"] == name)

    r = ann.capsule("pull", "-q", other)
    assert r.returncode == 0, r.stderr
    assert "node cache: the node cache does not take more images that only uid " \
        f"{ann.owner[0]} uses (max_user_size" in r.stderr and \
        "pulling into your own cache" in r.stderr, r.stderr
    assert "layer_paths" not in own(ann, other)
    # bob pulls multi too: it is no longer ann's alone, and her share is free again.
    assert ben.capsule("pull", "-q", multi).returncode == 0
    r = ann.capsule("pull", "-q", other)
    assert r.returncode == 0 and "does not take" not in r.stderr, r.stderr
    assert "layer_paths" in own(ann, other)
    r = ann.capsule("run", "--no-home", "--entrypoint", "cat", other, "/etc/hello")
    assert r.returncode == 0, r.stderr


def test_bytes_one_registry_served_are_not_another_registrys(world):
    """A service killed mid-unpack leaves a private layer's downloaded blob behind. A registry of
    someone else's that lists that digest (here one the administrator even trusts) still has to
    serve the bytes itself, and cannot: nothing of the private layer reaches its user."""
    lay = cu.Layout(world.workdir / "oci-secret")
    lay.new_image("big", cu.busybox_rootfs)
    lay.add_layer("big", [("many", "dir", None, 0o755),
                          ("many/secret", "file", b"TOPSECRET\n", 0o600)] +
                  [(f"many/f{i:05d}", "file", b"%d\n" % i, 0o644) for i in range(20000)])
    lay.push("big", world.reg.host, "private/secret:big", creds=("alice", "wonderland"))
    ann, ben = world.home("ka", "alice"), world.home("kb", "bob")
    pull = world.pull_in_background(ann, f"{world.reg.host}/private/secret:big", "k-pull.log")
    world.wait_in_tmp("unpack")
    world.node.kill()
    pull.wait(60)
    assert os.listdir(world.node.dir / "blobs" / "sha256"), "no blob was left to try"
    m = lay.manifest("big")
    private = m["layers"][-1]
    config = lay.config("big")
    config["rootfs"]["diff_ids"] = config["rootfs"]["diff_ids"][-1:]
    hostile = HostileRegistry(config, private["digest"], private["size"])
    world.node.trust_registries(hostile.host)
    try:
        r = ben.capsule("pull", "-q", f"{hostile.host}/evil:1")
        assert r.returncode != 0, (r.stderr, ben.images_json())
        assert hostile.layer_gets >= 1, r.stderr + world.node.proc.tail()
        assert ben.images_json() == []
    finally:
        hostile.stop()
    # alice's own next pull finds her download and finishes it.
    r = ann.capsule("pull", "-q", f"{world.reg.host}/private/secret:big")
    assert r.returncode == 0, r.stderr + world.node.proc.tail()
    path = record(ann)["layer_paths"][-1]
    assert cu.run(["cat", f"{path}/many/secret"], user=ann.owner).stdout == "TOPSECRET\n"


def test_rekey_cancels_the_pulls_under_way(world):
    """A rekey must not wait on a pull that someone keeps going (a slow registry, perhaps their
    own): the pulls under way are cancelled and new ones wait; their capsule asks again and gets
    the image under the new key."""
    world.push("multi", "shared/multi:1")
    proxy = world.slow_proxy(64 * 1024)
    try:
        name = f"{proxy.host}/shared/multi:1"
        ann = world.proxy_home("rc", "alice", proxy)
        pull = world.pull_in_background(ann, name, "rc-pull.log")
        world.wait_in_tmp("download")
        admin = world.admin()
        r = admin.capsule("gc", "--node", "--rekey")
        assert r.returncode == 0 and "new key" in r.stdout, r.stdout + r.stderr
        assert pull.wait(240) == 0, pull.log() + world.node.proc.tail()
        assert "changing its key" in world.node.proc.log()
        paths = record(ann)["layer_paths"]
        assert all(os.path.isdir(p) for p in paths), paths
        r = ann.capsule("run", "--no-home", "--entrypoint", "cat", name, "/etc/hello")
        assert r.returncode == 0 and r.stdout == "changed\n", r.stderr
    finally:
        proxy.stop()


def test_pulls_at_once_cannot_overrun_a_share(world):
    """Each pull reserves its part of its user's share before it fetches: two new 1 MiB images
    asked for at once under a 1.5 MiB share cannot both come into the node cache."""
    mib = 1 << 20
    for tag in ("a", "b"):
        lay = cu.Layout(world.workdir / f"oci-share-{tag}")
        cu.build_big_image(lay, mib)
        lay.push("big", world.reg.host, f"shared/multi:{tag}", creds=("alice", "wonderland"))
    world.node.config["max_user_size"] = str(3 * mib // 2)
    proxy = world.slow_proxy(512 * 1024)
    try:
        ann = world.proxy_home("sr", "alice", proxy)
        procs = [world.pull_in_background(ann, f"{proxy.host}/shared/multi:{tag}",
                                          f"share-{tag}.log") for tag in ("a", "b")]
        for p in procs:
            assert p.wait(300) == 0, p.log()
        status, listed = world.node.api("GET", "/v1/images")
        assert len(listed) == 1 and listed[0]["size"] <= 3 * mib // 2, listed
        assert sum("max_user_size" in p.log() for p in procs) == 1, [p.log() for p in procs]
    finally:
        proxy.stop()
