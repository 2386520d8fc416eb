"""What pytest loads for every component's system tests (coolant/, gpumon/, capsule/ each have a
tests/system/conftest.py of their own): the plugin that turns skips into failures in CI
(tests/pylib/gnskip.py, found through pytest.ini's pythonpath), and SIGTERM handled as Ctrl-C."""

import signal

pytest_plugins = ["gnskip"]


def _interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config):
    # scripts/test.sh ends a run that takes too long with SIGTERM (timeout(1)): as an interrupt,
    # pytest still tears the fixtures down, so daemons, mounts and test users do not outlive it.
    signal.signal(signal.SIGTERM, _interrupted)
