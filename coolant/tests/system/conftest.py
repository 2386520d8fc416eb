"""Fixtures for gpunode's system tests. Each test gets its own temp dir, sockets and ports; the
Docker Engine and the test users are shared by the whole session.

The binaries under test come from $GPUNODE_BUILD (default: <repo>/build), so the same tests run
against a sanitizer build (scripts/test.sh does). Set GPUNODE_KEEP_TMP=1 to keep the temp dirs.
"""

import grp
import os
import pwd
import shutil
import subprocess

import pytest

import sysutil


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Teardown of the process fixtures prints their logs only when the test failed.
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def _failed(request):
    rep = getattr(request.node, "rep_call", None)
    return rep is None or rep.failed


@pytest.fixture
def workdir(request):
    path = sysutil.short_tmpdir("gn-test-")
    yield path
    if not os.environ.get("GPUNODE_KEEP_TMP"):
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def dockerd():
    """A private Docker Engine with the busybox image imported (Dockerd.IMAGE)."""
    engine = sysutil.Dockerd()
    yield engine
    engine.stop()


@pytest.fixture
def container(dockerd):
    """Starts a detached container; every container started is removed after the test."""
    names = []

    def start(name, script, volumes=()):
        args = ["run", "-d", "--name", name, "--network=none"]
        for host, guest in volumes:
            args += ["-v", f"{host}:{guest}"]
        dockerd.docker(*args, dockerd.IMAGE, "/bin/sh", "-c", script)
        names.append(name)
        sysutil.wait_for(lambda: dockerd.running(name), 20, f"container {name} running")
        return name

    yield start
    for name in names:
        subprocess.run([dockerd.cli, "rm", "-f", name], capture_output=True,
                       env={**os.environ, "DOCKER_HOST": dockerd.host})


@pytest.fixture
def coolsim(workdir, request):
    """Factory: coolsim(scenario, duration=None, seed=1, eeprom=None, extra=()) -> Coolsim.
    Every simulator still running at the end is stopped."""
    sims = []

    def start(scenario, **kw):
        sim = sysutil.Coolsim(workdir, scenario, **kw)
        sims.append(sim)
        return sim

    yield start
    for sim in sims:
        sim.stop()
        if _failed(request):
            print(f"--- {sim.proc.log_path.name} ---\n{sim.proc.tail()}")


@pytest.fixture
def coold(workdir, request):
    """Factory: coold(device, **options) -> Coold, started and answering. At the end every
    daemon is stopped with SIGTERM and must exit cleanly without a sanitizer report; one that
    died of a signal during the test fails it too."""
    daemons = []

    def start(device, **kw):
        kw.setdefault("name", f"coold{len(daemons) or ''}")
        d = sysutil.Coold(workdir, device, **kw)
        daemons.append(d)
        return d

    yield start
    problems = []
    for d in daemons:
        was_running = d.proc.running()
        rc = d.stop()
        if _failed(request):
            print(f"--- {d.proc.log_path.name} ---\n{d.proc.tail(80)}")
        report = d.proc.sanitizer_report()
        if report:
            problems.append(f"{d.name}: {report}")
        elif was_running and rc != 0:
            problems.append(f"{d.name}: exit status {rc} after SIGTERM:\n{d.proc.tail()}")
        elif not was_running and rc < 0:
            problems.append(f"{d.name}: killed by signal {-rc} during the test:\n{d.proc.tail()}")
    assert not problems, "\n".join(problems)


class CoolantUsers:
    """Two local users for authorisation tests: `admin` is in `group` (coold's admin_group),
    `reader` is not."""

    def __init__(self):
        self.users = sysutil.TestUsers("gnst-")
        self.group = self.users.group("adm")
        self.users.user("reader")
        self.users.user("admin", group="adm")
        self.names = {role: self.users.name(role) for role in ("reader", "admin")}

    def ids(self, role):
        """(uid, gid) of a role, for sysutil.run(user=...)."""
        return self.users.user(role)

    def remove(self):
        self.users.remove()


@pytest.fixture(scope="session")
def users():
    try:
        grp.getgrnam("nogroup")
    except KeyError:
        pytest.fail("group 'nogroup' missing")
    u = CoolantUsers()
    yield u
    u.remove()
