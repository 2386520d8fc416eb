"""coold refuses a config it does not understand, saying where, instead of guessing."""

import pathlib

import pytest

import sysutil

GOOD = """[controller]
device = {device}
poll_interval = 1s
[metrics]
listen = 127.0.0.1:{port}
[control]
socket = {dir}/coold.sock
audit_log = {dir}/audit.log
[shutdown]
command = /bin/true
hooks_dir = {dir}/hooks.d
docker_socket = {dir}/docker.sock
"""


def run_coold(workdir, text):
    conf = workdir / "coold.conf"
    conf.write_text(text.format(device=workdir / "tty", port=sysutil.free_port(), dir=workdir))
    return sysutil.run([sysutil.binary("coold"), "--config", conf], timeout=15)


def config_with(line, bad):
    """GOOD with `bad` at 1-based `line`: replacing that line when it sets the same key, else
    inserted before it."""
    lines = GOOD.splitlines()
    if lines[line - 1].split("=")[0].strip() == bad.split("=")[0].strip():
        lines[line - 1] = bad
    else:
        lines.insert(line - 1, bad)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("line,key,bad", [
    (3, "devcie", "devcie = /dev/ttyACM0"),
    (3, "poll_interval", "poll_interval = 5parsecs"),
    (12, "halt_within", "halt_within = -5s"),
])
def test_bad_config_is_refused_naming_key_and_line(workdir, line, key, bad):
    r = run_coold(workdir, config_with(line, bad))
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert key in out, out
    assert f":{line}" in out, f"message should name line {line}:\n{out}"
    assert not (workdir / "coold.sock").exists(), "a refused config still opened the socket"


def test_bad_listen_address_is_refused(workdir):
    r = run_coold(workdir, config_with(5, "listen = 127.0.0.1:99999"))
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "listen" in out and "99999" in out, out


def test_missing_config_file_is_named(workdir):
    r = sysutil.run([sysutil.binary("coold"), "--config", workdir / "absent.conf"], timeout=15)
    assert r.returncode != 0
    assert "absent.conf" in r.stderr


def test_version():
    r = sysutil.run([sysutil.binary("coold"), "--version"])
    assert r.returncode == 0
    assert "0.1.0" in r.stdout


def test_shipped_example_config_loads():
    """deploy/coold.conf.example is what people copy: it must stay valid as keys change."""
    example = pathlib.Path(__file__).resolve().parents[3] / "deploy" / "coold.conf.example"
    r = sysutil.run([sysutil.binary("coold"), "--config", example, "--check-config"])
    assert r.returncode == 0 and r.stdout.strip().endswith(": OK"), (r.stdout, r.stderr)


def test_check_config_reports_errors_without_starting(workdir):
    conf = workdir / "coold.conf"
    conf.write_text("[shutdown]\ncontainer_grace = soon\n")
    r = sysutil.run([sysutil.binary("coold"), "--config", conf, "--check-config"])
    assert r.returncode == 1 and "container_grace" in r.stderr, (r.stdout, r.stderr)
