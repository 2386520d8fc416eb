"""Fixtures for gpuq's system tests: a temp dir per test (any user may enter it, for jobs run as
test users) and the session's test users. Helpers live in gpuqutil.py."""

import shutil

import pytest

import gpuqutil as gu


@pytest.fixture
def workdir():
    d = gu.short_tmpdir("gpuq-test-")
    (d / "shared").mkdir(mode=0o777)
    (d / "shared").chmod(0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def users():
    """Test users of this session (gntest.TestUsers), removed at its end."""
    u = gu.TestUsers("gq-")
    yield u
    u.remove()


@pytest.fixture
def gpuqd(workdir):
    """A factory: gpuqd(config=..., ...) starts one; all are stopped at the end of the test."""
    started = []

    def make(**kw):
        d = gu.Gpuqd(workdir, **kw)
        started.append(d)
        return d.start()

    yield make
    reports = []
    for d in started:
        d.destroy()
        log = d.log()
        if any(m in log for m in gu.SANITIZER_MARKERS):
            reports.append(log[-4000:])
    if reports:
        pytest.fail("gpuqd's sanitizer reported:\n" + "\n".join(reports))
