"""gpuqd's /metrics as Prometheus reads it: valid for promtool in both formats, and the figures
a dashboard draws (jobs by queue and state, waits, GPUs, quotas, drain)."""

import subprocess

import gpuqutil as gu
from gpuqutil import QUEUES, submit


def promtool_ok(text):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_metrics(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann = users.user("ann")
    shared = workdir / "shared"
    a = submit(d, "--gpus", "2", "--", "sleep", "300", user=ann, cwd=shared)
    submit(d, "--mig", "1g.10gb:1", "--", "sleep", "300", user=ann, cwd=shared)
    held = submit(d, "--hold", "--", "true", user=ann, cwd=shared)
    d.wait_state(a, "RUNNING")
    text = gu.scrape(d.port).text()
    promtool_ok(text)
    m = gu.parse_metrics(text, allow_repeats=True)
    assert m[("gpuq_gpus", ())] == 10  # 7 whole GPUs and 3 MIG instances
    gu.wait_for(lambda: gu.parse_metrics(gu.scrape(d.port).text(), allow_repeats=True)
                [("gpuq_gpus_allocated", ())] == 3, 10, "three GPUs allocated")
    assert m[("gpuq_quota", (("queue", "batch"), ("resource", "gpus")))] == 4
    # The MIG job may start a pass after the first: its counts come from a scrape after it did.
    m = gu.parse_metrics(gu.scrape(d.port).text(), allow_repeats=True)
    assert m[("gpuq_jobs", (("queue", "batch"), ("state", "PENDING")))] == 1
    assert m[("gpuq_jobs", (("queue", "batch"), ("state", "RUNNING")))] == 2
    assert m[("gpuq_job_wait_seconds_count", (("queue", "batch"),))] == 2
    assert m[("gpuq_job_wait_seconds_bucket", (("le", "+Inf"), ("queue", "batch")))] == 2
    om = gu.scrape(d.port, accept="application/openmetrics-text; version=1.0.0").text()
    # (promtool's linter reads the text format only: in OpenMetrics a counter's HELP names it
    # without _total, which it would call missing.)
    assert om.endswith("# EOF\n") and "# TYPE gpuq_job_wait_seconds histogram" in om
    assert "# TYPE gpuq_preemptions counter" in om
    assert gu.parse_metrics(om, allow_repeats=True)[("gpuq_gpus", ())] == 10
    assert d.job(held)["state"] == "PENDING"
