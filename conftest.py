"""What pytest loads for every component's system tests (coolant/, gpumon/, capsule/ each have a
tests/system/conftest.py of their own): the shared helpers' folder on the path, and the plugin
that turns skips into failures in CI (tests/pylib/gnskip.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests" / "pylib"))

pytest_plugins = ["gnskip"]
