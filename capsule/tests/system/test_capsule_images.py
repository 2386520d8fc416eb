"""capsule images / rmi / gc on a cache filled by real pulls: the table and JSON show what was
pulled, rmi removes records by name or ID, gc frees exactly the layers and blobs nothing uses
any more and keeps those that a remaining image or a container still needs."""

import json
import re
import subprocess

import capsuleutil as cu


def ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r


def pull_both(images, registry, home):
    """Pulls "multi" and "other" (they share the base layer). Returns their registry views:
    {name: (manifest digest, config digest, layers)}."""
    images.push("multi", registry.host, "multi:1")
    images.push("other", registry.host, "tools/other:2")
    out = {}
    for repo, tag in (("multi", "1"), ("tools/other", "2")):
        name = f"{registry.host}/{repo}:{tag}"
        ok(home.capsule("pull", "-q", name))
        out[name] = registry.image(repo, tag)
    return out


def test_images_table_and_json(images, registry, home):
    pulled = pull_both(images, registry, home)
    r = ok(home.capsule("images"))
    lines = r.stdout.splitlines()
    assert re.split(r"\s{2,}", lines[0].strip()) == ["NAME", "ID", "LAYERS", "SIZE", "PULLED"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert sorted(rows) == sorted(pulled)
    for name, (digest, config, layers) in pulled.items():
        row = rows[name]
        assert row[1] == cu.hexpart(config)[:12]
        assert row[2] == str(len(layers))
        assert lines[1].endswith("just now") or lines[1].endswith("ago"), lines[1]

    r = ok(home.capsule("images", "--digests"))
    for name, (digest, _, _) in pulled.items():
        assert digest in r.stdout

    doc = json.loads(ok(home.capsule("images", "--format", "json")).stdout)
    assert [i["name"] for i in doc] == sorted(pulled)
    for item in doc:
        digest, config, layers = pulled[item["name"]]
        assert item["id"] == config and item["digest"] == digest and item["layers"] == layers
        assert item["size"] > 0 and isinstance(item["pulled_at"], int)

    r = home.capsule("images", "--format", "yaml")
    assert r.returncode == 2 and "--format" in r.stderr


def test_rmi_and_gc_free_only_what_is_unused(images, registry, home):
    pulled = pull_both(images, registry, home)
    multi = f"{registry.host}/multi:1"
    other = f"{registry.host}/tools/other:2"
    multi_layers, other_layers = pulled[multi][2], pulled[other][2]
    shared = set(multi_layers) & set(other_layers)
    assert len(shared) == 1
    only_other = set(other_layers) - shared

    # rmi takes the name as users type it: here enroot's form of the same image.
    r = ok(home.capsule("rmi", f"docker://{registry.host}#tools/other:2"))
    assert f"Deleted {other}" in r.stdout
    assert [i["name"] for i in home.images_json()] == [multi]
    # The layers stay until gc.
    assert all(home.layer_dir(d).exists() for d in other_layers)

    r = ok(home.capsule("gc"))
    assert re.search(r"removed 1 layer\b", r.stdout), r.stdout
    assert "freed" in r.stdout
    for d in only_other:
        assert not home.layer_dir(d).exists()
    for d in multi_layers:  # the shared base layer included
        assert home.layer_dir(d).exists(), d
    assert home.blob_file(pulled[multi][0]).exists()  # manifest and config of what is left
    assert home.blob_file(pulled[multi][1]).exists()
    assert not home.blob_file(pulled[other][1]).exists()

    # A second gc has nothing left to do.
    r = ok(home.capsule("gc"))
    assert "removed 0 layers, 0 blobs" in r.stdout

    # The remaining image is still usable by ID prefix, then gone entirely.
    config_hex = cu.hexpart(pulled[multi][1])
    r = ok(home.capsule("rmi", config_hex[:12]))
    assert f"Deleted {multi}" in r.stdout
    ok(home.capsule("gc"))
    assert list((home.cache / "layers" / "sha256").iterdir()) == []
    assert home.images_json() == []


def test_rmi_all_then_gc_empties_the_cache(images, registry, home):
    """Layers keep their images' read-only directories (a plain rm -rf of the cache stops at
    them): rmi -a and gc leave a cache that rm -rf removes."""
    for tag, name in (("multi", "multi:1"), ("other", "other:1")):
        images.push(tag, registry.host, name)
        ok(home.capsule("pull", "-q", f"{registry.host}/{name}"))
    r = ok(home.capsule("rmi", "-a"))
    assert sorted(r.stdout.splitlines()) == sorted(
        f"Deleted {registry.host}/{n}" for n in ("multi:1", "other:1")), r.stdout
    assert home.images_json() == []
    r = home.capsule("rmi", "-a", "x")
    assert r.returncode == 2 and "-a takes no image names" in r.stderr
    ok(home.capsule("gc"))
    assert list((home.cache / "layers" / "sha256").iterdir()) == []
    r = subprocess.run(["rm", "-rf", str(home.cache)], capture_output=True, text=True)
    assert r.returncode == 0 and not home.cache.exists(), r.stderr


def test_rmi_by_id_of_an_image_with_two_names(images, registry, home):
    """Docker's rule: an ID names the image, and removing an image that has several names needs
    -f; a name removes only itself."""
    for tag in ("1", "2"):
        images.push("multi", registry.host, f"multi:{tag}")
        ok(home.capsule("pull", "-q", f"{registry.host}/multi:{tag}"))
    images.push("other", registry.host, "other:1")
    ok(home.capsule("pull", "-q", f"{registry.host}/other:1"))
    names = [f"{registry.host}/multi:{t}" for t in ("1", "2")]
    config = cu.hexpart(registry.image("multi", "1")[1])
    r = home.capsule("rmi", config[:12])
    assert r.returncode == 1, r.stdout
    assert "has 2 names" in r.stderr and names[0] in r.stderr and "rmi -f" in r.stderr
    assert r.stdout == ""
    assert len(home.images_json()) == 3
    r = ok(home.capsule("rmi", "-f", config[:12]))
    assert sorted(r.stdout.splitlines()) == [f"Deleted {n}" for n in names]
    assert [i["name"] for i in home.images_json()] == [f"{registry.host}/other:1"]
    # By name, one name goes and the image stays under the other.
    for tag in ("1", "2"):
        ok(home.capsule("pull", "-q", f"{registry.host}/multi:{tag}"))
    ok(home.capsule("rmi", names[1]))
    assert sorted(i["name"] for i in home.images_json()) == sorted(
        [names[0], f"{registry.host}/other:1"])
    # A tag and a digest of its repository are one reference: the ID removes both without -f.
    manifest = registry.image("multi", "1")[0]
    ok(home.capsule("pull", "-q", f"{registry.host}/multi@{manifest}"))
    assert len(home.images_json()) == 3
    r = ok(home.capsule("rmi", config[:12]))
    assert sorted(r.stdout.splitlines()) == sorted(
        [f"Deleted {names[0]}", f"Deleted {registry.host}/multi@{manifest}"])
    assert [i["name"] for i in home.images_json()] == [f"{registry.host}/other:1"]


def test_rmi_unknown_image(images, registry, home):
    r = home.capsule("rmi", f"{registry.host}/nothing:1", "also-nothing")
    assert r.returncode == 1
    assert r.stderr.count("capsule: ") == 2, r.stderr
    assert "not in the cache" in r.stderr
    r = home.capsule("rmi")
    assert r.returncode == 2


def test_gc_keeps_layers_a_container_uses(images, registry, home):
    images.push("other", registry.host, "other:1")
    name = f"{registry.host}/other:1"
    ok(home.capsule("pull", "-q", name))
    layers = registry.image("other", "1")[2]
    ok(home.capsule("create", "--name", "keeper", name, "/bin/true"))
    ok(home.capsule("rmi", name))
    ok(home.capsule("gc"))
    for d in layers:
        assert home.layer_dir(d).exists(), d
    ok(home.capsule("rm", "keeper"))
    r = ok(home.capsule("gc"))
    assert f"removed {len(layers)} layers" in r.stdout, r.stdout
    for d in layers:
        assert not home.layer_dir(d).exists(), d
