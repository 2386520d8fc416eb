"""gpuq's scheduling with real processes on the fake NVML's 8-GPU fixture (7 whole GPUs and 3
MIG instances): priority order, service classes, preemption with each job's checkpoint signal
and exact grace, requeue and resume from a checkpoint, retries with backoff, drain and resume,
kill -9 of gpuqd."""

import json
import os
import time
from pathlib import Path

import gpuqutil as gu
from gpuqutil import QUEUES, gpuq, submit, wait_for

ALL = "7"  # every whole GPU of the fixture


def events(d, jid):
    return d.api("GET", f"/v1/jobs/{jid}").json()["events"]


def event_time(d, jid, text):
    for e in events(d, jid):
        if text in e["text"]:
            return e["time"]
    raise AssertionError(f"job {jid} has no event with {text!r}: {events(d, jid)}")


def test_priority_order(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann = users.user("ann")
    shared = workdir / "shared"
    order = shared / "order"
    rec = gu.script(workdir, "rec.sh", f'echo "$1" >> {order}; sleep 0.3\n')
    gpuq(d, "drain")  # nothing starts while the jobs are queued
    low = submit(d, "--gpus", ALL, "--", rec, "low", user=ann, cwd=shared)
    high = submit(d, "--gpus", ALL, "--priority-class", "high", "--", rec, "high", user=ann,
                  cwd=shared)
    inter = submit(d, "--gpus", ALL, "--interactive", "--", rec, "interactive", user=ann,
                   cwd=shared)
    later = submit(d, "--gpus", ALL, "--", rec, "later", user=ann, cwd=shared)
    d.wait_reason(later)
    listed = {j["id"]: j for j in json.loads(gpuq(d, "ls", "--json").stdout)["jobs"]}
    assert [listed[j]["position"] for j in (inter, high, low, later)] == [1, 2, 3, 4]
    assert all(listed[j]["reason"] == "Drained" for j in (inter, high, low, later))
    gpuq(d, "resume")
    for j in (low, high, inter, later):
        assert d.wait_state(j, ("COMPLETED", "FAILED"), timeout=60)["state"] == "COMPLETED"
    assert order.read_text().split() == ["interactive", "high", "low", "later"]


def test_guaranteed_jobs_are_never_preempted(gpuqd, workdir, users):
    cfg = """
[priority-class.high]
value = 1000
[queue.steady]
class = guaranteed
gpus = 7
[queue.urgent]
priority = 100
class = burstable
gpus = 7
"""
    d = gpuqd(config=cfg)
    ann, bob = users.user("ann"), users.user("bob")
    shared = workdir / "shared"
    g = submit(d, "--queue", "steady", "--gpus", ALL, "--", "sleep", "300", user=ann, cwd=shared)
    d.wait_state(g, "RUNNING")
    u = submit(d, "--queue", "urgent", "--priority-class", "high", "--gpus", "1", "--", "true",
               user=bob, cwd=shared)
    # Passes run at once on a submit; give a few of them time to (wrongly) preempt.
    time.sleep(2)
    assert d.job(g)["state"] == "RUNNING" and d.job(g)["preemptions"] == 0
    assert d.job(u)["state"] == "PENDING"
    gpuq(d, "cancel", g, user=ann)
    assert d.wait_state(u, "COMPLETED")["state"] == "COMPLETED"


def test_besteffort_checkpoints_on_its_signal_and_is_killed_after_its_grace(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann, bob = users.user("ann"), users.user("bob")
    shared = workdir / "shared"
    ck = shared / "ck"
    # It checkpoints on SIGUSR1 and then goes on as if it never heard: the grace must end it.
    ready = shared / "ready"
    stubborn = gu.trapping_script(workdir, "stubborn.sh", f"trap 'date +%s.%N > {ck}' USR1",
                                  ready)
    be = submit(d, "--queue", "scavenger", "--gpus", ALL, "--checkpoint-signal", "USR1",
                "--grace", "3", "--", stubborn, user=ann, cwd=shared)
    d.wait_state(be, "RUNNING")
    gu.wait_for(ready.exists, 20, "the job's trap")
    b = submit(d, "--gpus", "1", "--", "sleep", "1", user=bob, cwd=shared)
    job = d.wait_state(be, "PENDING", timeout=20)
    assert job["preemptions"] == 1
    assert "PENDING Preempted" in events(d, be)[-1]["text"]
    assert ck.exists(), "the job never got its checkpoint signal"
    signalled = event_time(d, be, "SIGUSR1 sent")
    killed = event_time(d, be, "ended by SIGKILL")
    # Not before the grace is over; the upper bounds leave a loaded machine room to get there.
    assert 2.9 <= killed - signalled <= 6, (signalled, killed)
    assert -0.5 < float(ck.read_text()) - signalled < 3
    assert d.wait_state(b, "COMPLETED")["state"] == "COMPLETED"
    # Back on idle capacity, it runs again.
    assert d.wait_state(be, "RUNNING")["runs"] == 2


def test_preempted_job_resumes_from_its_checkpoint_and_finishes(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann, bob = users.user("ann"), users.user("bob")
    shared = workdir / "shared"
    ck = shared / "step"
    train = gu.script(workdir, "train.sh", f"""
n=$(cat {ck} 2>/dev/null || echo 0)
echo "start at $n"
trap 'echo $n > {ck}; echo "checkpointed at $n"; exit 0' TERM
while [ $n -lt 40 ]; do
  n=$((n + 1)); sleep 0.1
  if [ $((n % 5)) = 0 ]; then echo $n > {ck}; {gu.gpuq_path()} --socket {d.socket} checkpoint; fi
done
echo "done at $n"
""")
    be = submit(d, "--queue", "scavenger", "--gpus", ALL, "--grace", "10", "--", train,
                user=ann, cwd=shared)
    wait_for(lambda: ck.exists() and int(ck.read_text() or 0) >= 10, 30, "two checkpoints")
    assert d.job(be)["last_checkpoint"] is not None
    b = submit(d, "--gpus", "1", "--", "sleep", "1", user=bob, cwd=shared)
    job = d.wait_state(be, "COMPLETED", timeout=60)
    assert d.job(b)["state"] == "COMPLETED"
    assert job["runs"] == 2 and job["preemptions"] == 1 and job["failures"] == 0
    log = d.joblog(be)
    assert "start at 0" in log and "checkpointed at" in log and "done at 40" in log
    resumed = [line for line in log.splitlines() if line.startswith("start at ")][1]
    assert int(resumed.split()[-1]) >= 10  # the second run went on from the checkpoint
    assert any("checkpoint reported" in e["text"] for e in events(d, be))


def test_backoff_limit_counts_failures_not_preemptions(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann, bob = users.user("ann"), users.user("bob")
    shared = workdir / "shared"
    runs = shared / "runs"
    flaky = gu.script(workdir, "flaky.sh", f"""
n=$(( $(cat {runs} 2>/dev/null || echo 0) + 1 )); echo $n > {runs}
if [ $n = 1 ]; then trap 'exit 0' TERM; touch {shared}/waiting; while :; do sleep 0.1; done; fi
exit 3
""")
    be = submit(d, "--queue", "scavenger", "--gpus", ALL, "--backoff-limit", "1", "--", flaky,
                user=ann, cwd=shared)
    wait_for(lambda: (shared / "waiting").exists(), 20, "the first run")
    submit(d, "--gpus", "1", "--", "sleep", "1", user=bob, cwd=shared)
    job = d.wait_state(be, "FAILED", timeout=60)
    # Run 1 preempted (not counted), run 2 failed (retried once), run 3 failed: the limit.
    assert (job["runs"], job["preemptions"], job["failures"]) == (3, 1, 2)
    assert job["reason"] == "BackoffLimitExceeded" and job["exit_code"] == 3
    m = gu.parse_metrics(gu.scrape(d.port).text(), allow_repeats=True)
    assert m[("gpuq_preemptions_total", (("queue", "scavenger"),))] == 1
    assert m[("gpuq_retries_total", (("queue", "scavenger"),))] == 1


def test_drain_stops_everything_and_admits_nothing_until_resume(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann = users.user("ann")
    shared = workdir / "shared"
    ck = shared / "ck"
    ready = shared / "ready"
    job = gu.trapping_script(workdir, "job.sh", f"trap 'echo saved >> {ck}; exit 0' TERM", ready)
    a = submit(d, "--gpus", "2", "--", job, user=ann, cwd=shared)
    d.wait_state(a, "RUNNING")
    gu.wait_for(ready.exists, 20, "the job's trap")
    r = gpuq(d, "drain", "--wait", "20")
    assert "1" in r.stdout
    assert ck.read_text() == "saved\n"
    assert d.job(a)["state"] == "PENDING" and d.job(a)["reason"] == "Drained"
    b = submit(d, "--", "true", user=ann, cwd=shared)
    time.sleep(1)
    assert d.job(b)["state"] == "PENDING" and d.wait_reason(b)["reason"] == "Drained"
    assert gu.parse_metrics(gu.scrape(d.port).text(), allow_repeats=True)[("gpuq_drained", ())] == 1
    gpuq(d, "resume")
    assert d.wait_state(b, "COMPLETED")["state"] == "COMPLETED"
    assert d.wait_state(a, "RUNNING")["runs"] == 2


def test_kill_9_of_gpuqd_loses_nothing(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann = users.user("ann")
    shared = workdir / "shared"
    go = shared / "go"
    running = submit(d, "--gpus", "1", "--", "sleep", "300", user=ann, cwd=shared)
    ends = submit(d, "--backoff-limit", "0", "--", "sh", "-c",
                  f"while [ ! -e {go} ]; do sleep 0.1; done; exit 7", user=ann, cwd=shared)
    held = submit(d, "--hold", "--", "true", user=ann, cwd=shared)
    waiting = submit(d, "--gpus", ALL, "--", "true", user=ann, cwd=shared)
    before = d.wait_state(running, "RUNNING")
    d.wait_state(ends, "RUNNING")

    def processes(job):
        return [p for p in Path("/proc").iterdir() if p.name.isdigit()
                and f"/{d.cgroup.name}/gpuq-job-{job}.scope" in gu.scope_of(p.name)]
    sleeper, ender = processes(running), processes(ends)
    assert sleeper and ender
    d.kill9()
    go.touch()  # `ends` ends while gpuqd is down; the sleeper goes on
    gu.wait_for(lambda: not any(p.exists() for p in ender), 20, "`ends` to end")
    assert all(p.exists() for p in sleeper)
    d.start()
    after = d.job(running)
    assert after["state"] == "RUNNING" and after["start_time"] == before["start_time"]
    job = d.wait_state(ends, "FAILED")
    assert job["exit_code"] == 7
    assert d.job(held)["state"] == "PENDING" and d.job(held)["held"]
    assert d.job(waiting)["state"] == "PENDING"
    # The recovered run is still gpuqd's to stop: the cancel reaches the process.
    gpuq(d, "cancel", running, user=ann)
    assert d.wait_state(running, "CANCELLED")["state"] == "CANCELLED"
    wait_for(lambda: not any(p.exists() for p in sleeper), 10, "the job's processes to end")
    assert d.wait_state(waiting, "COMPLETED")["state"] == "COMPLETED"
    # New ids continue after the old ones.
    assert submit(d, "--", "true", user=ann, cwd=shared) == waiting + 1


def test_fair_share_puts_the_lighter_user_first(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann, bob = users.user("ann"), users.user("bob")
    shared = workdir / "shared"
    order = shared / "order"
    order.touch(mode=0o666)
    order.chmod(0o666)  # both users' jobs append to it
    rec = gu.script(workdir, "rec.sh", f'echo "$1" >> {order}\n')
    heavy = submit(d, "--gpus", ALL, "--", "sleep", "2", user=ann, cwd=shared)
    d.wait_state(heavy, "COMPLETED")
    gpuq(d, "drain")
    a = submit(d, "--gpus", ALL, "--", rec, "ann", user=ann, cwd=shared)
    b = submit(d, "--gpus", ALL, "--", rec, "bob", user=bob, cwd=shared)
    listed = {j["id"]: j for j in json.loads(gpuq(d, "ls", "--json").stdout)["jobs"]}
    assert listed[b]["position"] < listed[a]["position"]
    gpuq(d, "resume")
    for j in (a, b):
        st = d.wait_state(j, ("COMPLETED", "FAILED"), timeout=10)
        assert st["state"] == "COMPLETED", (st, events(d, j), d.joblog(j))
    assert order.read_text().split() == ["bob", "ann"]


def test_time_limit_and_active_deadline(gpuqd, workdir, users):
    d = gpuqd(config=QUEUES)
    ann = users.user("ann")
    shared = workdir / "shared"
    limited = submit(d, "--time", "0:02", "--grace", "1", "--", "sleep", "300", user=ann,
                     cwd=shared)
    # The deadline covers every retry: the second run is cut short by it.
    deadline = submit(d, "--active-deadline", "3s", "--backoff-limit", "5", "--", "sh", "-c",
                      "sleep 2; exit 1", user=ann, cwd=shared)
    job = d.wait_state(limited, "TIMEOUT", timeout=15)
    assert job["reason"] == "TimeLimit" and job["runs"] == 1
    assert 2 <= job["end_time"] - job["start_time"] <= 6
    job = d.wait_state(deadline, "TIMEOUT", timeout=20)
    assert job["reason"] == "DeadlineExceeded"


def test_no_grace_outlasts_the_admin(gpuqd, workdir, users):
    """A job that ignores its signal and asks for a long grace: the node's max_grace refuses a
    longer one, a second cancel ends it at once, a drain's cap shortens a grace running."""
    d = gpuqd(config=QUEUES.replace("[scheduler]\n", "[scheduler]\nmax_grace = 10m\n"))
    ann = users.user("ann")
    shared = workdir / "shared"
    deaf = gu.trapping_script(workdir, "deaf.sh", "trap '' TERM USR1",
                              shared / "ready-$GPUQ_JOB_ID")
    r = gpuq(d, "submit", "--grace", "1h", "--", deaf, user=ann, cwd=shared, check=False)
    assert r.returncode != 0 and "max_grace" in r.stderr, r.stderr
    a = submit(d, "--grace", "9m", "--", deaf, user=ann, cwd=shared)
    b = submit(d, "--grace", "9m", "--", deaf, user=ann, cwd=shared)
    d.wait_state(a, "RUNNING")
    d.wait_state(b, "RUNNING")
    for job in (a, b):
        gu.wait_for((shared / f"ready-{job}").exists, 20, f"job {job}'s trap")
    gpuq(d, "cancel", a, user=ann)
    assert d.job(a)["state"] == "STOPPING"
    gpuq(d, "cancel", a)  # again: now
    assert d.wait_state(a, "CANCELLED", timeout=10)["reason"] == "Cancelled"
    gpuq(d, "drain", "--grace-max", "1", "--wait", "10")
    job = d.wait_state(b, "PENDING", timeout=10)
    assert job["preemptions"] == 1
