"""Settings for gpumon's system tests that pytest takes only from a conftest.py. Helpers and
fixtures live in gpumonutil.py (coolant/tests/system has a conftest.py of its own; both folders
run in one session)."""


def pytest_configure(config):
    # test_deploy.py reads only the source tree: `-m no_build` selects the tests that can run
    # before anything is built, `-m "not no_build"` the others.
    config.addinivalue_line("markers", "no_build: needs no build dir (reads only the source tree)")
