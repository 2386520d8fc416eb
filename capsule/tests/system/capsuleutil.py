"""Helpers for capsule's system tests: capsule itself with its own cache, data and config dirs,
a real OCI registry (docker-registry from Debian) on 127.0.0.1 with no auth, htpasswd Basic
auth or token auth (with a small JWT token server in this process), a throttling HTTP proxy to
interrupt downloads, and test images built with umoci, finished in Python where umoci cannot
(opaque directories, uncompressed and zstd layers, indexes) and pushed with skopeo.

What every component's tests need alike (processes, polling, temp dirs, ports) is in
tests/pylib/gntest.py and re-exported here. Everything a test starts listens on 127.0.0.1 on a
free port and keeps its files in a temp dir of its own, so tests can run in parallel.

Named capsuleutil, not sysutil: other components' system tests run in the same pytest session
and a module name used twice would shadow the other.
"""

import base64
import datetime
import gzip
import hashlib
import http.client
import http.server
import io
import json
import os
import pwd
import re
import shutil
import subprocess
import tarfile
import threading
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

from gntest import (  # noqa: F401 - re-exported for the tests
    SANITIZER_MARKERS,
    Proc,
    TestUsers,
    as_user,
    build_dir,
    free_port,
    need_built,
    reachable_copy,
    run,
    short_tmpdir,
    wait_for,
)

# The registry users of the auth fixtures (conftest.py). Here, not in conftest.py: every
# component's tests run in one pytest session, where "conftest" names another folder's module.
USERS = {"alice": "wonderland"}

MEDIA_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_LAYER = {
    "gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
    "none": "application/vnd.oci.image.layer.v1.tar",
}
MANIFEST_ACCEPT = ", ".join([MEDIA_OCI_INDEX, MEDIA_OCI_MANIFEST,
                             "application/vnd.docker.distribution.manifest.list.v2+json",
                             "application/vnd.docker.distribution.manifest.v2+json"])


# gpunode's version as the programs print it (meson.build's project version).
VERSION = re.search(r"version: '([^']+)'", (REPO / "meson.build").read_text()).group(1)

# The caller's GPU requests: a test that wants GPUs asks for them itself, so the suite behaves
# the same on a GPU node, inside a Slurm job or under gpuq as on a CPU machine.
GPU_REQUEST_VARIABLES = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
                         "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_DISABLE_REQUIRE")


def capsule_binary(for_user=None):
    """The build's capsule; for a test user (a (uid, gid) other than root's), a copy of capsule
    and capsule-pull side by side in a folder that user can enter (gntest.reachable_copy), so the
    capsule-pull that runs is this build's, found beside it."""
    build = build_dir() / "capsule"
    capsule = need_built(build / "capsule", "capsule", executable=True)
    if not for_user or for_user[0] == 0:
        return str(capsule)
    pull = need_built(build / "capsule-pull", "capsule-pull", executable=True)
    return str(reachable_copy(capsule, pull) / "capsule")


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def hexpart(digest):
    return digest.split(":", 1)[1]


# ---- capsule and its user's directories ----


class Home:
    """One capsule user's world in a temp dir: HOME, the XDG cache/data/config dirs, a
    capsule.conf, credentials. `capsule()` runs the program with exactly these."""

    def __init__(self, root, owner=None):
        self.root = Path(root)
        self.home = self.root / "home"
        for d in ("home", "cache", "data", "config/capsule"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        self.owner = owner  # (uid, gid) when a test user runs capsule here
        self.config_path = self.root / "config" / "capsule" / "capsule.conf"
        self.credentials_path = self.root / "config" / "capsule" / "credentials"
        self.docker_config_path = self.home / ".docker" / "config.json"
        if owner:
            self.chown()

    @property
    def cache(self):
        """The image store, as capsule lays it out by default."""
        return self.root / "cache" / "capsule"

    def env(self):
        return {"HOME": str(self.home), "XDG_CACHE_HOME": str(self.root / "cache"),
                "XDG_DATA_HOME": str(self.root / "data"),
                "XDG_CONFIG_HOME": str(self.root / "config")}

    def chown(self):
        if self.owner:
            subprocess.run(["chown", "-R", f"{self.owner[0]}:{self.owner[1]}", str(self.root)],
                           check=True)

    def write_config(self, **keys):
        """Writes capsule.conf's [capsule] section; values as given (lists space-separated)."""
        lines = ["[capsule]"] + [f"{k} = {v}" for k, v in keys.items()]
        self.config_path.write_text("\n".join(lines) + "\n")
        self.chown()

    def write_credentials(self, text):
        self.credentials_path.write_text(text)
        self.credentials_path.chmod(0o600)
        self.chown()

    def write_docker_config(self, auths):
        """auths: {host: (user, password)} as `docker login` stores them."""
        self.docker_config_path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"auths": {h: {"auth": base64.b64encode(f"{u}:{p}".encode()).decode()}
                         for h, (u, p) in auths.items()}}
        self.docker_config_path.write_text(json.dumps(doc))
        self.chown()

    def capsule(self, *args, env=None, user=None, timeout=180):
        """Runs capsule with this home's directories, as `user` or the home's owner; returns
        CompletedProcess (text). A sanitizer report fails the test whatever the exit status."""
        full = self.env()
        full.update(env or {})
        user = user or self.owner
        r = run([capsule_binary(user), *args], timeout=timeout, user=user, env=full,
                unset=GPU_REQUEST_VARIABLES)
        out = r.stdout + r.stderr
        assert not any(m in out for m in SANITIZER_MARKERS), out
        return r

    def popen(self, *args, env=None, log=None):
        """Starts capsule in the background (a Proc, output in log)."""
        full = {k: v for k, v in os.environ.items() if k not in GPU_REQUEST_VARIABLES}
        full.update(self.env())
        full.update(env or {})
        return Proc([capsule_binary(), *args], log or self.root / "capsule.log", env=full,
                    replace_env=True)

    def layer_dir(self, digest):
        return self.cache / "layers" / "sha256" / hexpart(digest)

    def blob_file(self, digest):
        return self.cache / "blobs" / "sha256" / hexpart(digest)

    def tmp_entries(self):
        tmp = self.cache / "tmp"
        return sorted(p.name for p in tmp.iterdir()) if tmp.exists() else []

    def images_json(self):
        r = self.capsule("images", "--format", "json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


# ---- the registry ----


def self_signed_cert(directory, ip="127.0.0.1"):
    """A CA-less self-signed certificate for ip, and its key: (cert path, key path), the
    certificate readable by all (whoever trusts it names it as their ca_file)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ip)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    directory = Path(directory)
    cert_path, key_path = directory / "registry-cert.pem", directory / "registry-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    cert_path.chmod(0o644)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return cert_path, key_path


class Registry:
    """docker-registry serving a filesystem store on 127.0.0.1:<free port>, plain HTTP (or TLS
    with tls=True: a self-signed certificate, self.cert_path), with auth None, ("htpasswd",
    path) or ("token", TokenServer). Its log (level info) records every request, so tests can
    count what capsule fetched."""

    def __init__(self, workdir, auth=None, tls=False):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.cert_path = None
        self.root = self.workdir / "storage"
        cfg = {
            "version": 0.1,
            "log": {"level": "info", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(self.root)},
                        "delete": {"enabled": True}},
            "http": {"addr": f"127.0.0.1:{self.port}",
                     "secret": "capsule-system-test"},
        }
        if tls:
            self.cert_path, key_path = self_signed_cert(self.workdir)
            cfg["http"]["tls"] = {"certificate": str(self.cert_path), "key": str(key_path)}
        if auth and auth[0] == "htpasswd":
            cfg["auth"] = {"htpasswd": {"realm": "capsule-test", "path": str(auth[1])}}
        elif auth and auth[0] == "token":
            ts = auth[1]
            cfg["auth"] = {"token": {"realm": ts.realm, "service": ts.service,
                                     "issuer": ts.issuer, "rootcertbundle": str(ts.cert_path)}}
        # JSON is YAML: no YAML writer needed.
        self.config_path = self.workdir / "config.yml"
        self.config_path.write_text(json.dumps(cfg))
        self.proc = Proc(["docker-registry", "serve", self.config_path],
                         self.workdir / "registry.log")
        wait_for(self._up, 30, f"docker-registry on port {self.port}")

    def _connection(self, timeout):
        if not self.cert_path:
            return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        import ssl
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                           context=ssl.create_default_context(
                                               cafile=str(self.cert_path)))

    def _up(self):
        if not self.proc.running():
            from gntest import ProcessDied
            raise ProcessDied(f"docker-registry exited:\n{self.proc.tail()}")
        conn = self._connection(2)
        try:
            conn.request("GET", "/v2/")
            return conn.getresponse().status in (200, 401)
        finally:
            conn.close()

    @property
    def host(self):
        return f"127.0.0.1:{self.port}"

    def blob_path(self, digest):
        h = hexpart(digest)
        return self.root / "docker" / "registry" / "v2" / "blobs" / "sha256" / h[:2] / h / "data"

    def blob_gets(self, digest):
        """How many GETs of that blob the registry answered (any repository)."""
        pat = re.compile(r'http\.request\.method=GET .*http\.request\.uri="/v2/[^"]*/blobs/'
                         + re.escape(digest) + '"')
        n = 0
        for line in self.proc.log().splitlines():
            if "response completed" in line and pat.search(line):
                n += 1
        return n

    def manifest(self, name, reference, auth=None):
        """The manifest bytes and digest the registry serves (no-auth registries only)."""
        conn = self._connection(10)
        headers = {"Accept": MANIFEST_ACCEPT}
        if auth:
            headers["Authorization"] = auth
        conn.request("GET", f"/v2/{name}/manifests/{reference}", headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        assert resp.status == 200, (resp.status, body)
        return body, sha256(body)

    def push_raw(self, layout, tag, name):
        """Uploads the image byte for byte through the registry API (no auth): skopeo would
        compress an uncompressed layer on its way, and some tests need exactly that layer."""
        manifest = layout.manifest(tag)
        for desc in [manifest["config"]] + manifest["layers"]:
            self._upload(name, layout.read_blob(desc["digest"]), desc["digest"])
        repo, _, ref = name.rpartition(":")
        data = layout.read_blob(layout.manifest_digest(tag))
        status, _, body = self._call("PUT", f"/v2/{repo}/manifests/{ref}", data,
                                     {"Content-Type": MEDIA_OCI_MANIFEST})
        assert status == 201, (status, body)

    def _call(self, method, path, body=None, headers=None):
        conn = self._connection(60)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def _upload(self, name, data, digest):
        repo = name.rpartition(":")[0]
        status, headers, body = self._call("POST", f"/v2/{repo}/blobs/uploads/")
        assert status == 202, (status, body)
        loc = urllib.parse.urlparse(headers["Location"])
        path = f"{loc.path}?{loc.query}&digest={digest}" if loc.query else \
            f"{loc.path}?digest={digest}"
        status, _, body = self._call("PUT", path, data,
                                     {"Content-Type": "application/octet-stream"})
        assert status == 201, (status, body)

    def image(self, name, reference, auth=None):
        """(manifest digest, config digest, layer digests) as the registry serves the image:
        skopeo may rewrite a manifest on push, so its digest is the registry's, not the
        layout's."""
        body, digest = self.manifest(name, reference, auth)
        m = json.loads(body)
        return digest, m["config"]["digest"], [layer["digest"] for layer in m["layers"]]

    def stop(self):
        self.proc.stop()


def make_htpasswd(path, users):
    """An htpasswd file with bcrypt hashes (what docker-registry accepts)."""
    lines = []
    for user, password in users.items():
        r = subprocess.run(["htpasswd", "-nbB", user, password], capture_output=True, text=True,
                           check=True)
        lines.append(r.stdout.strip())
    Path(path).write_text("\n".join(lines) + "\n")
    return path


# ---- a token server ----


def _libtrust_key_id(public_key):
    """The key ID docker-registry derives for a key of its rootcertbundle: SHA-256 of the DER
    SubjectPublicKeyInfo, first 240 bits, base32, in groups of four joined by ':'."""
    from cryptography.hazmat.primitives import serialization
    der = public_key.public_bytes(serialization.Encoding.DER,
                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    b32 = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode().rstrip("=")
    return ":".join(b32[i:i + 4] for i in range(0, len(b32), 4))


class TokenServer:
    """The distribution spec's token server: GET /token?service=..&scope=.. with Basic
    credentials (checked against `users`) answers a JWT signed with a key whose certificate is
    the registry's rootcertbundle. Authenticated users get what they ask for; anonymous ones get
    a token without access (the registry then refuses). Runs in a thread of the test process."""

    def __init__(self, workdir, users, issuer="capsule-test-issuer",
                 service="capsule-test-registry", expires_in=300, acl=None,
                 registry_leeway=0):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID

        self.users = dict(users)
        # acl: {user: [repository, ...]} the user may pull (push: only repositories listed for
        # them too); None: every authenticated user gets every scope asked for.
        self.acl = acl
        self.issuer, self.service, self.expires_in = issuer, service, expires_in
        # docker-registry accepts a token until 60 s past its "exp" (clock skew): a test that
        # needs tokens to die after expires_in seconds passes registry_leeway=60.
        self.registry_leeway = registry_leeway
        self.requests = []  # (user or None, [scopes], status)
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "capsule test token signer")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=30))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(self.key, hashes.SHA256()))
        self.cert_path = Path(workdir) / "token-signer.pem"
        self.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.key_pem = self.key.private_bytes(serialization.Encoding.PEM,
                                              serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption())
        self.kid = _libtrust_key_id(self.key.public_key())
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server._answer(self)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def realm(self):
        return f"http://127.0.0.1:{self.port}/token"

    def _user(self, handler):
        """(user, ok): the Basic credentials' user and whether the password matched."""
        auth = handler.headers.get("Authorization", "")
        if not auth.startswith("Basic "):
            return None, True
        try:
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
        except ValueError:
            return None, False
        return user, self.users.get(user) == password

    def _answer(self, handler):
        import jwt
        url = urllib.parse.urlparse(handler.path)
        query = urllib.parse.parse_qs(url.query)
        scopes = query.get("scope", [])
        user, ok = self._user(handler)
        if url.path != "/token" or query.get("service") != [self.service] or not ok:
            status = 404 if url.path != "/token" else 400 if ok else 401
            self.requests.append((user, scopes, status))
            body = json.dumps({"details": "refused"}).encode()
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        access = []
        for scope in scopes if user else []:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            if self.acl is None or name in self.acl.get(user, ()):
                access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": user or "", "aud": self.service, "iat": now,
                  "nbf": now - 10, "exp": now + self.expires_in - self.registry_leeway, "jti": os.urandom(8).hex(),
                  "access": access}
        token = jwt.encode(claims, self.key_pem, algorithm="RS256", headers={"kid": self.kid})
        self.requests.append((user, scopes, 200))
        body = json.dumps({"token": token, "access_token": token,
                           "expires_in": self.expires_in}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# ---- the node cache's service ----


class NodeCache:
    """capsule-cached as a test system account of its own (users.user("cache")), over a store in
    workdir/node (made by the service itself) and a socket beside it, with /metrics on a free
    port. Its log is workdir/cached.log. config: [cache] keys of its config file; the test
    registries serve plain HTTP, which the service takes only from the hosts its
    insecure_registries lists (trust_registries)."""

    def __init__(self, workdir, users, extra_args=(), config=None):
        self.workdir = Path(workdir)
        self.account = users.user("cache")
        self.account_name = users.name("cache")
        self.dir = self.workdir / "node"
        # Its folder is the account's, as systemd's RuntimeDirectory= makes /run/capsule.
        rundir = self.workdir / "run"
        rundir.mkdir(exist_ok=True)
        os.chown(rundir, *self.account)
        self.socket = rundir / "cache.sock"
        self.port = free_port()
        build = build_dir() / "capsule"
        program = need_built(build / "capsule-cached", "capsule-cached", executable=True)
        self.program = reachable_copy(program) / "capsule-cached"
        # The service makes its store; the folder above it is the account's, as systemd's
        # CacheDirectory= would make it.
        parent = self.workdir / "cache-home"
        parent.mkdir(exist_ok=True)
        os.chown(parent, *self.account)
        self.dir = parent / "capsule"
        self.extra_args = list(extra_args)
        self.config = dict(config or {})  # [cache] keys of its config file, for the next start()
        self.proc = None
        self.start()

    def start(self):
        config = self.workdir / "capsule-cached.conf"
        config.write_text("[cache]\n" + "".join(f"{k} = {v}\n" for k, v in self.config.items()))
        argv = as_user(self.account, [self.program, "--config", config, "--dir", self.dir,
                                      "--socket", self.socket, "--metrics",
                                      f"127.0.0.1:{self.port}", "--log-level", "debug",
                                      *self.extra_args])
        self.proc = Proc(argv, self.workdir / "cached.log")
        wait_for(self._up, 30, "capsule-cached")

    def _up(self):
        if not self.proc.running():
            from gntest import ProcessDied
            raise ProcessDied(f"capsule-cached exited:\n{self.proc.tail()}")
        # A killed service's socket file stays: up is when it answers.
        import socket
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(str(self.socket))
            except OSError:
                return False
        return True

    def trust_registries(self, *hosts):
        """Restarts the service with hosts added to its insecure_registries."""
        listed = self.config.get("insecure_registries", "").split()
        self.config["insecure_registries"] = " ".join(listed + list(hosts))
        self.stop()
        self.start()

    def kill(self):
        self.proc.popen.kill()
        self.proc.popen.wait()

    def stop(self):
        return self.proc.stop()

    def api(self, method, path, body=None, user=None, timeout=120):
        """One request on the socket, as `user` ((uid, gid); None: root), answered as
        (status, parsed JSON or text). Another user's request goes through curl run as them,
        since the service tells callers apart by their credentials."""
        argv = ["curl", "-sS", "--unix-socket", str(self.socket), "-X", method, "-o", "-",
                "-w", "\n%{http_code}", f"http://localhost{path}"]
        if body is not None:
            argv += ["-H", "Content-Type: application/json", "--data-binary",
                     json.dumps(body)]
        r = run(argv, user=user, timeout=timeout)
        assert r.returncode == 0, r.stderr
        text, _, status = r.stdout.rpartition("\n")
        try:
            return int(status), json.loads(text)
        except ValueError:
            return int(status), text


# ---- a throttling proxy ----


class SlowProxy:
    """An HTTP proxy in front of a registry (capsule is pointed at its port as if it were the
    registry) that passes responses on at `rate` bytes/s and records each request's path and
    Range header. Lets a test kill capsule in the middle of a download."""

    def __init__(self, upstream_port, rate=None):
        self.upstream_port = upstream_port
        self.rate = rate
        self.requests = []  # (method, path, range header or None)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                proxy._forward(self)

            def do_HEAD(self):
                proxy._forward(self)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def host(self):
        return f"127.0.0.1:{self.port}"

    def _forward(self, h):
        self.requests.append((h.command, h.path, h.headers.get("Range")))
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=60)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(h.command, h.path, headers=headers)
        resp = conn.getresponse()
        h.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("connection", "transfer-encoding"):
                h.send_header(k, v)
        body = b"" if h.command == "HEAD" else None
        if body is None and resp.getheader("Content-Length") is None:
            body = resp.read()
            h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        try:
            if body is not None:
                h.wfile.write(body)
            else:
                self._stream(resp, h.wfile)
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True
        conn.close()

    def _stream(self, resp, out):
        chunk = 64 * 1024
        while True:
            data = resp.read(chunk)
            if not data:
                return
            out.write(data)
            out.flush()
            if self.rate:
                time.sleep(len(data) / self.rate)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# ---- test images ----


def _tar(entries):
    """An uncompressed tar from (name, kind, data/target, mode) entries; kind is "file",
    "dir", "symlink", "link" (hard link to target) or "fifo"."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, data, mode in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            ti.mode = mode
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
                t.addfile(ti)
            elif kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, data
                t.addfile(ti)
            elif kind == "link":
                ti.type, ti.linkname = tarfile.LNKTYPE, data
                t.addfile(ti)
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
                t.addfile(ti)
            else:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _compress(data, compression):
    if compression == "gzip":
        return gzip.compress(data, mtime=0)
    if compression == "zstd":
        return subprocess.run(["zstd", "-q", "-c", "-3"], input=data, capture_output=True,
                              check=True).stdout
    return data


class Layout:
    """An OCI image layout on disk (made by umoci init) that tests build images in and push
    from. Manifests are found by their org.opencontainers.image.ref.name annotation."""

    REF = "org.opencontainers.image.ref.name"

    def __init__(self, path):
        self.path = Path(path)
        subprocess.run(["umoci", "init", "--layout", str(self.path)], check=True)

    def umoci(self, *args):
        r = subprocess.run(["umoci", *[str(a) for a in args]], capture_output=True, text=True)
        assert r.returncode == 0, (args, r.stderr)

    # raw blobs and the index
    def write_blob(self, data):
        d = sha256(data)
        (self.path / "blobs" / "sha256" / hexpart(d)).write_bytes(data)
        return d

    def read_blob(self, digest):
        return (self.path / "blobs" / "sha256" / hexpart(digest)).read_bytes()

    def _index(self):
        return json.loads((self.path / "index.json").read_text())

    def _entry(self, tag):
        for m in self._index()["manifests"]:
            if m.get("annotations", {}).get(self.REF) == tag:
                return m
        raise KeyError(tag)

    def _set_entry(self, tag, desc):
        idx = self._index()
        idx["manifests"] = [m for m in idx["manifests"]
                            if m.get("annotations", {}).get(self.REF) != tag]
        desc = dict(desc)
        desc["annotations"] = {self.REF: tag}
        idx["manifests"].append(desc)
        (self.path / "index.json").write_text(json.dumps(idx))

    def manifest(self, tag):
        return json.loads(self.read_blob(self._entry(tag)["digest"]))

    def manifest_digest(self, tag):
        return self._entry(tag)["digest"]

    def config(self, tag):
        return json.loads(self.read_blob(self.manifest(tag)["config"]["digest"]))

    def layers(self, tag):
        return [layer["digest"] for layer in self.manifest(tag)["layers"]]

    # building
    def new_image(self, tag, rootfs_fill=None, arch=None):
        """A one-layer image made by umoci: rootfs_fill(Path) populates the rootfs."""
        self.umoci("new", "--image", f"{self.path}:{tag}")
        if rootfs_fill:
            self.umoci_layer(tag, rootfs_fill)
        if arch:
            self.umoci("config", "--image", f"{self.path}:{tag}", "--architecture", arch)

    def umoci_layer(self, tag, change):
        """Unpacks the image, lets change(rootfs) edit it, repacks: umoci writes the diff as a
        new layer (deleted files become whiteouts)."""
        bundle = self.path.parent / f"bundle-{tag}"
        shutil.rmtree(bundle, ignore_errors=True)
        self.umoci("unpack", "--rootless", "--image", f"{self.path}:{tag}", bundle)
        change(bundle / "rootfs")
        self.umoci("repack", "--image", f"{self.path}:{tag}", bundle)
        shutil.rmtree(bundle, ignore_errors=True)

    def copy_tag(self, src, dst):
        self._set_entry(dst, {k: v for k, v in self._entry(src).items() if k != "annotations"})

    def add_layer(self, tag, entries, compression="gzip"):
        """Appends a layer built from tar entries (see _tar), compressed as asked, and fixes
        the config's diff_ids and the manifest. Returns the layer's digest."""
        return self.add_layer_tar(tag, _tar(entries), compression)

    def add_layer_tar(self, tag, raw, compression="gzip"):
        """add_layer() with the layer's uncompressed tar as it is."""
        blob = _compress(raw, compression)
        digest = self.write_blob(blob)
        manifest = self.manifest(tag)
        config = self.config(tag)
        config["rootfs"]["diff_ids"].append(sha256(raw))
        config.setdefault("history", []).append({"created_by": f"capsule test {compression}"})
        cdata = json.dumps(config).encode()
        manifest["config"] = {"mediaType": manifest["config"]["mediaType"],
                              "digest": self.write_blob(cdata), "size": len(cdata)}
        manifest["layers"].append({"mediaType": MEDIA_LAYER[compression], "digest": digest,
                                   "size": len(blob)})
        mdata = json.dumps(manifest).encode()
        self._set_entry(tag, {"mediaType": MEDIA_OCI_MANIFEST, "digest": self.write_blob(mdata),
                              "size": len(mdata)})
        return digest

    def edit_config(self, tag, change):
        """Lets change(config dict) edit the image's config; rewrites the config blob and the
        manifest (the tag then names the new manifest)."""
        manifest = self.manifest(tag)
        config = self.config(tag)
        change(config)
        cdata = json.dumps(config).encode()
        manifest["config"] = {"mediaType": manifest["config"]["mediaType"],
                              "digest": self.write_blob(cdata), "size": len(cdata)}
        mdata = json.dumps(manifest).encode()
        self._set_entry(tag, {"mediaType": MEDIA_OCI_MANIFEST, "digest": self.write_blob(mdata),
                              "size": len(mdata)})

    def make_index(self, tag, entries):
        """An OCI index under tag over [(image tag, os, arch, variant or None)]."""
        manifests = []
        for image_tag, os_, arch, variant in entries:
            e = self._entry(image_tag)
            platform = {"os": os_, "architecture": arch}
            if variant:
                platform["variant"] = variant
            manifests.append({"mediaType": MEDIA_OCI_MANIFEST, "digest": e["digest"],
                              "size": e["size"], "platform": platform})
        data = json.dumps({"schemaVersion": 2, "mediaType": MEDIA_OCI_INDEX,
                           "manifests": manifests}).encode()
        self._set_entry(tag, {"mediaType": MEDIA_OCI_INDEX, "digest": self.write_blob(data),
                              "size": len(data)})

    def push(self, tag, registry_host, name, creds=None, all_platforms=False):
        """skopeo copy of tag to docker://registry_host/name (plain HTTP)."""
        argv = ["skopeo", "copy", "--quiet", "--dest-tls-verify=false"]
        if all_platforms:
            argv.append("--all")
        if creds:
            argv += ["--dest-creds", f"{creds[0]}:{creds[1]}"]
        argv += [f"oci:{self.path}:{tag}", f"docker://{registry_host}/{name}"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr


def busybox_rootfs(root):
    """busybox-static as the first layer's rootfs, with what the unpack tests look at: a
    setuid file, a hard link, private modes, a file and a directory later layers change."""
    root = Path(root)
    for d in ("bin", "etc", "data/sub", "private", "tmp"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copy("/bin/busybox", root / "bin" / "busybox")
    for applet in ("sh", "ls", "cat", "echo", "true"):
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "hello").write_text("hello\n")
    os.link(root / "etc" / "hello", root / "etc" / "hello-link")
    (root / "etc" / "gone").write_text("to be deleted\n")
    (root / "etc" / "secret").write_text("secret\n")
    (root / "etc" / "secret").chmod(0o600)
    (root / "data" / "sub" / "old").write_text("old\n")
    (root / "data" / "keep-below").write_text("hidden by the opaque layer\n")
    tool = root / "bin" / "suidtool"
    tool.write_text("#!/bin/sh\necho suid\n")
    tool.chmod(0o4755)
    (root / "private").chmod(0o700)


def second_layer(root):
    """What the second layer changes: a deletion (whiteout), a changed and a new file."""
    root = Path(root)
    (root / "etc" / "gone").unlink()
    (root / "etc" / "hello").write_text("changed\n")  # the hard link changes with it
    (root / "etc" / "new").write_text("new\n")


def debian_image(workdir):
    """A Debian 12 (minbase) made by debootstrap from Debian's own mirror, as the only layer
    of the image "debian" in a layout of its own under workdir: a real distribution's files,
    modes and owners (/etc/shadow 0640 root:shadow, /root 0700, /etc/.pwd.lock 0600). The
    tar is made by GNU tar, with numeric owners, as image builders write them."""
    root = Path(workdir) / "debian-root"
    r = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(root),
                        "http://deb.debian.org/debian"], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    raw = subprocess.run(["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", "-",
                          "."], capture_output=True, check=True, timeout=300).stdout
    shutil.rmtree(root, ignore_errors=True)
    lay = Layout(Path(workdir) / "oci-debian")
    lay.new_image("debian")
    lay.add_layer_tar("debian", raw)
    lay.umoci("config", "--image", f"{lay.path}:debian", "--config.env",
              "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
              "--config.cmd", "/bin/bash")
    return lay


def build_images(workdir):
    """The images the tests pull, all in one OCI layout under workdir. Tags:
      multi     busybox base (umoci) + changes (umoci) + an opaque data/ (gzip) + an
                uncompressed layer + a zstd layer; Env/Entrypoint/Cmd/WorkingDir set
      other     the same base layer plus one layer of its own (shares a layer with multi)
      amd64, arm64, multiarch   two one-layer images and an OCI index over both
    Returns the Layout."""
    lay = Layout(Path(workdir) / "oci")
    lay.new_image("base", busybox_rootfs)
    lay.copy_tag("base", "multi")
    lay.umoci_layer("multi", second_layer)
    lay.umoci("config", "--image", f"{lay.path}:multi", "--config.env", "A=1",
              "--config.env", "PATH=/bin", "--config.entrypoint", "/bin/sh",
              "--config.cmd", "-c", "--config.cmd", "echo hi", "--config.workingdir", "/data")
    lay.add_layer("multi", [("data", "dir", None, 0o755),
                            ("data/.wh..wh..opq", "file", b"", 0o644),
                            ("data/fresh", "file", b"fresh\n", 0o644)], "gzip")
    lay.add_layer("multi", [("opt", "dir", None, 0o755),
                            ("opt/plain", "file", b"plain\n", 0o751)], "none")
    lay.add_layer("multi", [("opt", "dir", None, 0o755),
                            ("opt/zstd", "file", b"zstd\n", 0o644)], "zstd")
    lay.copy_tag("base", "other")
    lay.add_layer("other", [("etc", "dir", None, 0o755),
                            ("etc/other", "file", b"other\n", 0o644)], "gzip")
    for arch in ("amd64", "arm64"):
        lay.new_image(arch, arch=arch)
        lay.add_layer(arch, [("arch", "file", f"{arch}\n".encode(), 0o644)], "gzip")
    lay.make_index("multiarch", [("arm64", "linux", "arm64", "v8"),
                                 ("amd64", "linux", "amd64", None)])
    return lay


def build_big_image(lay, size):
    """Tag "big": one layer of `size` random bytes (stored uncompressed), so a download takes
    long enough through a SlowProxy to be interrupted."""
    lay.umoci("new", "--image", f"{lay.path}:big")
    return lay.add_layer("big", [("big.bin", "file", os.urandom(size), 0o644)], "none")


def make_driver_tree(dest):
    """The stand-in driver tree (capsule/tests/driver-tree) at dest, readable by everyone: the
    build's stand-in nvidia-smi and the fake NVML built without sanitizers (it is loaded inside
    containers too, where no sanitizer runtime is). Returns dest."""
    build = build_dir()
    stubs = need_built(build / "capsule" / "tests" / "driver-tree" / "nvidia-smi",
                       "the stand-in nvidia-smi", executable=True).parent
    nvml = need_built(build / "tests" / "fake-nvml" / "plain" / "libnvidia-ml.so.1",
                      "the fake NVML (plain)")
    subprocess.run([REPO / "capsule" / "tests" / "driver-tree" / "make-driver-tree.sh",
                    dest, stubs, nvml], check=True)
    subprocess.run(["chmod", "-R", "a+rX", str(dest)], check=True)
    return Path(dest)


def build_entrypoint_image(lay, tag):
    """Tag `tag` in lay: busybox with an entrypoint that does what real ones do, set up the
    environment, say so, change directory, then run its command: /entry.sh exports
    FROM_ENTRY=yes, prints "entry ran", cds to /etc and execs "$@". Cmd /bin/true."""
    lay.new_image(tag, busybox_rootfs)
    lay.add_layer(tag, [("entry.sh", "file",
                         b"#!/bin/sh\nexport FROM_ENTRY=yes\necho entry ran\ncd /etc\n"
                         b"exec \"$@\"\n", 0o755)])
    lay.umoci("config", "--image", f"{lay.path}:{tag}", "--config.entrypoint", "/entry.sh",
              "--config.cmd", "/bin/true")


# ---- what a container's start left on the host and inside ----


def root_fstype(mountinfo):
    """The file system type of the topmost mount on / in a /proc/PID/mountinfo text (what a
    container's root is made of: "overlay", or "fuse.fuse-overlayfs" on node-cache layers);
    None when nothing is mounted on /."""
    tops = [line.split(" - ", 1)[1].split()[0] for line in mountinfo.splitlines()
            if len(line.split()) > 4 and line.split()[4] == "/" and " - " in line]
    return tops[-1] if tops else None


def _lease_lock(fd, kind):
    """An open file description lock (F_OFD_SETLK) of kind fcntl.F_RDLCK or F_WRLCK on all of fd;
    raises BlockingIOError when another holds a conflicting one."""
    import fcntl
    import struct
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks), padding.
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqixxxx", kind, 0, 0, 0, 0))


def layer_locked(path):
    """Whether a container's capsule holds the node cache layer at path: its lease
    (PATH.lease) is read-locked, so the write lock that `capsule gc --node` and eviction take
    cannot be had. Run as root, who may open the lease for writing."""
    import fcntl
    fd = os.open(f"{path}.lease", os.O_RDWR | os.O_CLOEXEC)
    try:
        _lease_lock(fd, fcntl.F_WRLCK)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def hold_layer(path):
    """Holds the node cache layer at path as a container's capsule does (a read lock on its
    lease); returns the fd: close it to let go."""
    import fcntl
    fd = os.open(f"{path}.lease", os.O_RDONLY | os.O_CLOEXEC)
    _lease_lock(fd, fcntl.F_RDLCK)
    return fd
