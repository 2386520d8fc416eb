"""Fixtures for capsule's system tests: a temp dir and a capsule home per test, registries
(plain, htpasswd Basic auth, token auth) on free ports, and the test images, built once per
session (an OCI layout is read-only once built; every test pushes what it needs into its own
registry). Helpers live in capsuleutil.py."""

import shutil

import pytest

import capsuleutil as cu

USERS = cu.USERS


@pytest.fixture(scope="session")
def images():
    """The OCI layout with the test images (capsuleutil.build_images)."""
    d = cu.short_tmpdir("capsule-images-")
    try:
        yield cu.build_images(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def debian():
    """A debootstrapped Debian 12 as image "debian" (capsuleutil.debian_image), made once."""
    d = cu.short_tmpdir("capsule-debian-")
    try:
        yield cu.debian_image(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def workdir():
    d = cu.short_tmpdir("capsule-test-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def home(workdir):
    """A capsule user's own cache, data and config dirs."""
    return cu.Home(workdir / "user")


@pytest.fixture
def registry(workdir):
    """docker-registry without auth."""
    reg = cu.Registry(workdir / "registry")
    yield reg
    reg.stop()


@pytest.fixture
def basic_registry(workdir):
    """docker-registry with htpasswd (bcrypt) Basic auth; users: USERS."""
    htpasswd = cu.make_htpasswd(workdir / "htpasswd", USERS)
    reg = cu.Registry(workdir / "registry", auth=("htpasswd", htpasswd))
    yield reg
    reg.stop()


@pytest.fixture
def token_registry(workdir):
    """docker-registry with token auth and its token server: (registry, token server)."""
    ts = cu.TokenServer(workdir, USERS)
    reg = cu.Registry(workdir / "registry", auth=("token", ts))
    yield reg, ts
    reg.stop()
    ts.stop()


@pytest.fixture(scope="session")
def capsule_users():
    """Test users of this session (gntest.TestUsers), removed at its end."""
    users = cu.TestUsers("cst-")
    yield users
    users.remove()
