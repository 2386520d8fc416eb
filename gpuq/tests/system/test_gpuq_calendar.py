"""Quota calendars on gpuqd's own clock (libfaketime moves it; nothing else on the machine):
a window opens at its local start time, and across a daylight-saving change it opens at the
local time the zone really has, not at a fixed UTC offset."""

import calendar
import json
import time

import gpuqutil as gu
from gpuqutil import gpuq, submit, wait_for

CONFIG = """
[scheduler]
time_zone = Europe/Rome

[queue.research]
class = guaranteed
gpus = 1

[window.evenings]
queue = research
days = mon-fri
start = 20:00
end = 06:00
gpus = 3

[window.early]
queue = research
dates = 2026-03-29, 2026-10-25
start = 02:30
end = 05:00
gpus = 2
"""


def utc(text):
    return calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S"))


def research(d):
    q = json.loads(gpuq(d, "queues", "--json").stdout)
    return [x for x in q["queues"] if x["name"] == "research"][0]


def test_window_opens_at_its_boundary_and_raises_the_quota(gpuqd, workdir, users):
    # Thursday 2026-01-15 19:59:52 in Rome (CET, UTC+1): eight seconds to submit and look.
    d = gpuqd(config=CONFIG, clock="2026-01-15 18:59:52")
    ann = users.user("ann")
    shared = workdir / "shared"
    q = research(d)
    assert q["window"] is None and q["quota"]["gpus"] == 1
    assert q["next_change"] == utc("2026-01-15 19:00:00")
    jobs = [submit(d, "--queue", "research", "--gpus", "1", "--", "sleep", "300", user=ann,
                   cwd=shared) for _ in range(3)]
    d.wait_state(jobs[0], "RUNNING")
    assert [d.wait_reason(j)["reason"] for j in jobs[1:]] == ["QuotaExceeded"] * 2
    # 20:00 in Rome: the evening window gives the queue three GPUs.
    for j in jobs[1:]:
        d.wait_state(j, "RUNNING", timeout=20)
    q = research(d)
    assert q["window"] == "evenings" and q["quota"]["gpus"] == 3 and q["used"]["gpus"] == 3
    assert q["next_change"] == utc("2026-01-16 05:00:00")  # 06:00 CET
    m = gu.parse_metrics(gu.scrape(d.port).text(), allow_repeats=True)
    assert m[("gpuq_quota", (("queue", "research"), ("resource", "gpus")))] == 3


def test_window_opens_right_across_the_spring_forward(gpuqd, workdir, users):
    """On 2026-03-29 Rome's clocks go from 02:00 CET to 03:00 CEST (01:00 UTC): 02:30 does not
    exist that day, so the 02:30 window opens at 03:00 CEST, 01:00 UTC (a fixed UTC+1 would say
    01:30 UTC, and UTC+2 00:30)."""
    d = gpuqd(config=CONFIG, clock="2026-03-29 00:59:52")
    ann = users.user("ann")
    shared = workdir / "shared"
    q = research(d)
    assert q["window"] is None and q["next_change"] == utc("2026-03-29 01:00:00")
    jobs = [submit(d, "--queue", "research", "--gpus", "1", "--", "sleep", "300", user=ann,
                   cwd=shared) for _ in range(2)]
    d.wait_state(jobs[0], "RUNNING")
    assert d.wait_reason(jobs[1])["reason"] == "QuotaExceeded"
    d.wait_state(jobs[1], "RUNNING", timeout=20)
    q = research(d)
    assert q["window"] == "early" and q["quota"]["gpus"] == 2
    assert q["next_change"] == utc("2026-03-29 03:00:00")  # 05:00 CEST


def test_window_ends_right_across_the_fall_back(gpuqd, workdir):
    """On 2026-10-25 02:00-03:00 happens twice in Rome (CEST, then CET from 01:00 UTC): the
    window that starts at 02:30 starts at the first 02:30 (00:30 UTC) and ends at 05:00 CET
    (04:00 UTC)."""
    d = gpuqd(config=CONFIG, clock="2026-10-25 00:00:00")
    q = research(d)
    assert q["window"] is None and q["next_change"] == utc("2026-10-25 00:30:00")
    d.set_clock("2026-10-25 02:00:00")  # 03:00 CET: open
    wait_for(lambda: research(d)["window"] == "early", 10, "the window to be open")
    assert research(d)["next_change"] == utc("2026-10-25 04:00:00")
