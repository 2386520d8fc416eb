"""coolctl against the real coold and coolsim: what an operator types."""

import json

import pytest

import sysutil

GOOD_CURVE = "30:35,45:65,55:100"

# Each refused curve breaks one rule of protocol §6 (defaults: min_duty 20, critical 60 C).
BAD_CURVES = {
    "temperatures-fall": ("1", "30:40,60:70,55:100"),
    "duty-falls": ("1", "30:70,45:40,55:100"),
    "never-100": ("1", "30:40,45:70,55:90"),
    "100-above-critical": ("1", "30:40,45:70,65:100"),
    "below-min-duty": ("1", "30:10,45:70,55:100"),
    "no-such-pump": ("9", "30:40,45:70,55:100"),
}


def curve_points(text):
    """'30.00:35,45:65' -> [(30.0, 35), (45.0, 65)], so formatting differences do not matter."""
    points = []
    for p in text.split(","):
        t, d = p.split(":")
        points.append((float(t), int(float(d))))
    return points


def coolctl(daemon, *args, user=None, timeout=60):
    return sysutil.run([sysutil.binary("coolctl", user), "--socket", daemon.socket, *args],
                       user=user, timeout=timeout)


@pytest.fixture
def stack(coolsim, coold, users):
    """coolsim (normal) + coold whose admin group holds users.names['admin']."""
    sim = coolsim("normal")
    daemon = coold(sim.link, admin_group=users.group)
    daemon.wait_up()
    return daemon


def audit_records(daemon):
    try:
        text = daemon.audit_log.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_status_shows_the_controller(stack):
    controller = stack.status()["controller"]
    r = coolctl(stack, "status")
    assert r.returncode == 0, r.stderr
    for word in (controller["model"], controller["fw"], controller["serial"], "normal", "inlet",
                 "outlet", "tank"):
        assert word in r.stdout, f"{word!r} missing from:\n{r.stdout}"
    r = coolctl(stack, "--json", "status")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["controller"]["link"] == "up"
    assert doc["telemetry"]["level"] == "normal"


def test_unreachable_daemon_exits_2(workdir):
    r = sysutil.run([sysutil.binary("coolctl"), "--socket", workdir / "nothing.sock", "status"])
    assert r.returncode == 2
    assert r.stderr.startswith("coolctl: ") and "nothing.sock" in r.stderr, r.stderr


def test_curve_set_is_read_back(stack):
    r = coolctl(stack, "curve", "set", "1", GOOD_CURVE)
    assert r.returncode == 0, r.stderr
    got = stack.get("/v1/settings/pump.1.curve")
    assert got.status == 200, got
    assert curve_points(got.json()["settings"]["pump.1.curve"]) == curve_points(GOOD_CURVE)
    r = coolctl(stack, "get", "pump.1.curve")
    assert r.returncode == 0, r.stderr
    key, _, value = r.stdout.strip().partition("=")
    assert key.strip() == "pump.1.curve"
    assert curve_points(value.strip()) == curve_points(GOOD_CURVE)


@pytest.mark.parametrize("case", sorted(BAD_CURVES))
def test_curve_refused_changes_nothing(stack, case):
    pump, points = BAD_CURVES[case]
    before = stack.settings()
    r = coolctl(stack, "curve", "set", pump, points)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.startswith("coolctl: "), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, f"error printed more than once:\n{r.stderr}"
    assert stack.settings() == before

    # The daemon and the controller refuse it too when a client skips the local checks.
    r = stack.put("/v1/settings", {"settings": {f"pump.{pump}.curve": points}})
    assert r.status == 400, r
    body = r.json()
    assert body["error"]
    assert body.get("code") == ("badkey" if case == "no-such-pump" else "badvalue"), body
    assert stack.settings() == before


def test_limits_set_is_atomic(stack):
    before = stack.settings()
    # precritical above critical: the whole write is refused, warning included.
    r = stack.put("/v1/settings", {"settings": {"limit.warning": "40",
                                                "limit.precritical": "65"}})
    assert r.status == 400, r
    assert stack.settings() == before
    r = coolctl(stack, "limits", "set", "warning=44", "precritical=54")
    assert r.returncode == 0, r.stderr
    after = stack.settings()
    assert float(after["limit.warning"]) == 44 and float(after["limit.precritical"]) == 54


def test_writes_need_the_admin_group_and_are_audited(stack, users):
    reader = users.ids("reader")
    admin = users.ids("admin")
    r = coolctl(stack, "status", user=reader)
    assert r.returncode == 0, r.stderr
    r = coolctl(stack, "get", user=reader)
    assert r.returncode == 0 and "pump.1.curve" in r.stdout, r.stderr

    before = stack.settings()
    r = coolctl(stack, "curve", "set", "1", GOOD_CURVE, user=reader)
    assert r.returncode == 1, (r.stdout, r.stderr)
    # The refusal names the group that grants writes, so the user knows whom to ask.
    assert users.group in r.stderr, r.stderr
    assert stack.settings() == before

    r = coolctl(stack, "curve", "set", "1", GOOD_CURVE, user=admin)
    assert r.returncode == 0, r.stderr
    r = coolctl(stack, "set", "limit.warning=43")
    assert r.returncode == 0, r.stderr

    records = audit_records(stack)
    refused = [a for a in records if a["uid"] == reader[0]]
    assert refused and all(a["status"] == 403 for a in refused), records
    assert any(a["uid"] == admin[0] and a["status"] == 200 and a["method"] == "PUT"
               for a in records), records
    assert any(a["uid"] == 0 and a["status"] == 200 for a in records), records
    # Reads are not writes: nothing audited for the reader's status and get.
    assert all(a["method"] != "GET" for a in records), records
