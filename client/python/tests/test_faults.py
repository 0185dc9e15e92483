"""A daemon restart during wait() (reconnect, report what it stored), a
daemon that does not come back (give up, never hang), and a daemon that does
not answer (every call has a deadline). Each test has a daemon of its own."""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import Iterator

import pytest

import benchd
from conftest import TINY, Daemon


@pytest.fixture
def own_daemon() -> Iterator[Daemon]:
    d = Daemon(["cpu:0"], prefix="benchd-py-fault-").start()
    try:
        d.wait_workers_up()
        yield d
    finally:
        if d.proc is not None and d.proc.poll() is None:
            try:
                os.kill(d.proc.pid, signal.SIGCONT)
            except OSError:
                pass
        d.cleanup()


def _running(job: benchd.Job) -> None:
    deadline = time.monotonic() + 60
    while job.state != benchd.JobState.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_restart_during_wait_reports_interrupted(own_daemon: Daemon) -> None:
    c = benchd.Client(own_daemon.address, reconnect_timeout=60)
    job = c.benchmark(**{**TINY, "steps": 100000})
    _running(job)
    restarter = threading.Thread(target=lambda: (time.sleep(0.5), own_daemon.restart()))
    restarter.start()
    t = time.monotonic()
    job.wait(timeout=90, progress=False)
    restarter.join()
    assert job.state == benchd.JobState.INTERRUPTED
    assert time.monotonic() - t < 60
    with pytest.raises(benchd.JobFailed) as e:
        job.result
    assert e.value.state == "interrupted"
    # The same client goes on working against the restarted daemon.
    assert c.job(job.id).state == benchd.JobState.INTERRUPTED
    c.close()


def test_restart_after_the_job_ended_reports_the_result(own_daemon: Daemon) -> None:
    c = benchd.Client(own_daemon.address)
    job = c.benchmark(**TINY)
    job.wait(timeout=60, progress=False)  # ends normally
    own_daemon.restart()
    fresh = c.job(job.id).wait(timeout=30, progress=False)
    assert fresh.state == benchd.JobState.SUCCEEDED
    assert len(fresh.result.to_pandas()) == 4
    c.close()


def test_daemon_gone_for_good_wait_gives_up(own_daemon: Daemon) -> None:
    """Killed outright, the daemon says nothing more: the wait gives up. (A
    daemon stopped by SIGTERM tells its watchers the job was interrupted
    first: test_restart_during_wait_reports_interrupted, test_lifecycle.py.)"""
    c = benchd.Client(own_daemon.address, reconnect_timeout=2)
    job = c.benchmark(**{**TINY, "steps": 100000})
    _running(job)
    threading.Timer(0.3, own_daemon.stop, kwargs={"sig": signal.SIGKILL}).start()
    t = time.monotonic()
    with pytest.raises(benchd.Unavailable) as e:
        job.wait(progress=False)
    assert time.monotonic() - t < 30
    assert own_daemon.address in str(e.value) and f"job {job.id}" in str(e.value)
    c.close()



def wait_until_stopped(pid: int, timeout: float = 10) -> None:
    """Until every thread of pid is in state T (stopped), as /proc says."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                continue
        if states and all(s in ("T", "t") for s in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"benchd {pid} did not stop within {timeout} s")


def test_a_silent_daemon_hits_the_call_deadline(own_daemon: Daemon) -> None:
    c = benchd.Client(own_daemon.address, timeout=1)
    c.node()  # connected
    assert own_daemon.proc is not None
    os.kill(own_daemon.proc.pid, signal.SIGSTOP)
    try:
        # kill() returns before every thread has stopped; a thread still
        # running can answer the call (seen once with the tests side by side).
        wait_until_stopped(own_daemon.proc.pid)
        t = time.monotonic()
        with pytest.raises(benchd.DeadlineExceeded) as e:
            c.jobs()
        assert 0.9 < time.monotonic() - t < 5
        assert "did not answer ListJobs within 1 s" in str(e.value)
    finally:
        os.kill(own_daemon.proc.pid, signal.SIGCONT)
    assert c.node().device_names == ["cpu:0"]
    c.close()
