"""coolsim on its own: the scenarios it offers, and that its verdict can fail."""

import sysutil

SCENARIOS = ["normal", "pump-failure", "flow-loss", "sensor-failure", "unplug", "garbage",
             "controller-reboot"]


def test_list_scenarios_names_every_scenario():
    r = sysutil.run([sysutil.binary("coolsim"), "--list-scenarios"])
    assert r.returncode == 0, r.stderr
    listed = {line.split()[0] for line in r.stdout.splitlines() if line.strip()}
    missing = [s for s in SCENARIOS if s not in listed]
    assert not missing, f"--list-scenarios lacks {missing}:\n{r.stdout}"


def test_normal_run_ends_without_cut(coolsim):
    sim = coolsim("normal", duration=2)
    assert sim.wait(15) == 0, sim.proc.tail()
    report = sim.report()
    assert report["scenario"] == "normal"
    assert report["power_cut"] is False


def test_pump_failure_without_host_is_a_hard_cut(workdir, coolsim):
    # Nobody listens, so nobody says HALT: the controller cuts a running host, and coolsim must
    # say so with exit status 2. Without this, "exit 0" in the other tests would prove nothing.
    # The shortest cut delay the controller allows keeps the test short.
    eeprom = sysutil.write_eeprom(workdir / "eeprom", {"limit.cut_delay": 5})
    sim = coolsim("pump-failure", duration=120, eeprom=eeprom)
    assert sim.wait(60) == 2, sim.proc.tail()
    report = sim.report()
    assert report["power_cut"] is True
    assert report["orderly"] is False
    assert report["halt_received"] is False
    assert 9 <= report["cut_at_s"] <= 15, report


def test_unknown_scenario_is_a_usage_error(workdir):
    r = sysutil.run([sysutil.binary("coolsim"), "--scenario", "no-such-thing",
                     "--link", workdir / "tty"])
    assert r.returncode == 1
    assert "no-such-thing" in r.stderr
