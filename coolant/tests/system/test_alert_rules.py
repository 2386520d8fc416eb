"""The alert rules shipped in deploy/prometheus load in a real Prometheus toolchain and fire
when, and only when, their conditions hold (promtool's rule unit tests)."""
import pathlib
import shutil
import subprocess

import pytest

RULES = pathlib.Path(__file__).resolve().parents[3] / "deploy" / "prometheus"


@pytest.fixture(scope="module")
def promtool():
    path = shutil.which("promtool")
    if not path:
        pytest.fail("promtool is missing: scripts/install-deps.sh installs package prometheus")
    return path


def test_rules_are_valid(promtool):
    out = subprocess.run([promtool, "check", "rules", str(RULES / "coold-rules.yml")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_rules_fire_as_specified(promtool):
    out = subprocess.run([promtool, "test", "rules", "coold-rules.test.yml"], cwd=RULES,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
