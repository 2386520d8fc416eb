"""A pytest plugin for every component's system tests (the root conftest.py loads it): where
GPUNODE_TEST_NO_SKIP is set to anything but "" or "0" (scripts/test.sh sets it in CI, whose
machine has every tool, privilege and kernel feature the tests ask for), a skipped test is
reported as failed, naming the reason it gave: there, that reason holding is the bug. The C
tests' counterpart is tests/unit/test-skip.h."""

import os

import pytest


def skips_fail():
    value = os.environ.get("GPUNODE_TEST_NO_SKIP", "")
    return value not in ("", "0")


@pytest.hookimpl(hookwrapper=True)
def pytest_collectreport(report):
    """A module skipped as a whole (pytest.skip(allow_module_level=True), importorskip) is not a
    test report at all: fail the collection instead, so the module's absence shows. Changed
    before the other implementations of this hook (the terminal, junitxml) see the report."""
    if report.skipped and skips_fail():
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (f"{report.nodeid} would be skipped ({reason}), but "
                           "GPUNODE_TEST_NO_SKIP makes a skip a failure")
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.skipped or hasattr(rep, "wasxfail") or not skips_fail():
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    rep.outcome = "failed"
    rep.longrepr = (f"would be skipped ({reason}), but GPUNODE_TEST_NO_SKIP makes a skip a "
                    "failure")
