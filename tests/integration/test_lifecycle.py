"""Failure paths with real processes: a killed worker, cancelled jobs, a
restarted daemon. Nothing is lost and every failure says what happened."""
import json
import os
import signal
import subprocess
import threading
import time

import grpc

from conftest import BIN, Daemon, bench_pb2, wait_for_state

# Long enough to be caught running (tiny steps take milliseconds on a CPU).
LONG = ["--preset", "tiny", "--batch-size", "2", "--context-length", "16", "--mode", "train_step",
        "--warmup-steps", "0", "--steps", "100000"]
SHORT = ["--preset", "tiny", "--batch-size", "2", "--context-length", "16", "--warmup-steps", "1",
         "--steps", "2"]


def submit(daemon, args):
    return json.loads(daemon.benchctl("submit", "benchmark", *args, "--json", check=0).stdout)["id"]


def wait_first_step(daemon, job_id, timeout=120):
    for event in daemon.stub.Watch(bench_pb2.WatchRequest(job_id=job_id), timeout=timeout):
        if event.HasField("step"):
            return event
        assert not event.HasField("failed"), event
    raise AssertionError("no step event")


def test_killed_worker_fails_job_clearly_and_next_job_runs(daemon):
    job_id = submit(daemon, LONG)
    wait_first_step(daemon, job_id)
    worker = daemon.wait_worker_up()
    os.kill(worker.worker_pid, signal.SIGKILL)

    job = wait_for_state(daemon.stub, job_id, [bench_pb2.JOB_STATE_FAILED], timeout=60)
    assert "killed by signal 9" in job.error_message, job.error_message
    assert f"pid {worker.worker_pid}" in job.error_message
    r = daemon.benchctl("get", job_id)
    assert r.returncode == 1 and "killed by signal 9" in r.stdout + r.stderr

    # The supervisor restarted the worker; the next job runs there.
    after = daemon.wait_worker_up()
    assert after.worker_pid != worker.worker_pid and after.worker_restarts == 1
    nxt = submit(daemon, SHORT)
    assert wait_for_state(daemon.stub, nxt, [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED]).state == \
        bench_pb2.JOB_STATE_SUCCEEDED


def test_cancel_queued_and_running_jobs(daemon):
    running = submit(daemon, LONG)
    queued = submit(daemon, SHORT)
    wait_first_step(daemon, running)

    r = daemon.benchctl("cancel", queued, check=0)
    job = daemon.stub.GetJob(bench_pb2.GetJobRequest(job_id=queued))
    assert job.state == bench_pb2.JOB_STATE_CANCELLED and "before it started" in job.error_message

    daemon.benchctl("cancel", running, check=0)
    job = wait_for_state(daemon.stub, running, [bench_pb2.JOB_STATE_CANCELLED], timeout=30)
    assert job.HasField("finished")
    # Watch on a cancelled job ends with its terminal event; benchctl exits 1.
    assert daemon.benchctl("watch", running, "--json").returncode == 1
    # Cancelling again is refused clearly.
    r = daemon.benchctl("cancel", running, check=4)
    assert "already ended" in r.stderr

    nxt = submit(daemon, SHORT)
    assert wait_for_state(daemon.stub, nxt, [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED]).state == \
        bench_pb2.JOB_STATE_SUCCEEDED


def test_results_survive_restart_and_running_job_is_interrupted(tmp_data_dir):
    d = Daemon(tmp_data_dir).start()
    try:
        done = submit(d, SHORT)
        result = wait_for_state(d.stub, done, [bench_pb2.JOB_STATE_SUCCEEDED]).result
        running = submit(d, LONG)
        wait_first_step(d, running)
        queued = submit(d, SHORT)

        d.restart()  # SIGTERM while a job runs and another waits

        again = d.stub.GetJob(bench_pb2.GetJobRequest(job_id=done))
        assert again.state == bench_pb2.JOB_STATE_SUCCEEDED and again.result == result
        job = d.stub.GetJob(bench_pb2.GetJobRequest(job_id=running))
        assert job.state == bench_pb2.JOB_STATE_INTERRUPTED and "daemon stopped" in job.error_message
        # The job that waited in the queue runs after the restart.
        assert wait_for_state(d.stub, queued, [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED]).state == \
            bench_pb2.JOB_STATE_SUCCEEDED
        # Watch on a job from before the restart answers from the store.
        events = list(d.stub.Watch(bench_pb2.WatchRequest(job_id=done), timeout=30))
        assert len(events) == 1 and events[0].HasField("result")

        # A daemon killed outright: its running job is found interrupted at the next start.
        running = submit(d, LONG)
        wait_first_step(d, running)
        orphan = d.wait_worker_up().worker_pid
        d.stop(sig=signal.SIGKILL)
        # Its worker ends with it (PR_SET_PDEATHSIG), mid-job or not.
        deadline = time.time() + 30
        while time.time() < deadline and os.path.exists(f"/proc/{orphan}"):
            time.sleep(0.1)
        assert not os.path.exists(f"/proc/{orphan}"), "the worker outlived its killed daemon"
        d.start()
        job = d.stub.GetJob(bench_pb2.GetJobRequest(job_id=running))
        assert job.state == bench_pb2.JOB_STATE_INTERRUPTED
        ids = [j.id for j in d.stub.ListJobs(bench_pb2.ListJobsRequest()).jobs]
        assert ids == sorted(ids, key=int, reverse=True) and done in ids
    finally:
        d.stop()


def test_sigterm_lets_a_running_job_finish_within_the_grace(tmp_data_dir):
    # A few seconds of steps: it finishes well inside the 60 s grace.
    finishing = ["--preset", "tiny", "--batch-size", "2", "--context-length", "16",
                 "--warmup-steps", "0", "--steps", "300"]
    d = Daemon(tmp_data_dir, ["--stop-grace", "60"]).start()
    try:
        running = submit(d, finishing)
        wait_first_step(d, running)
        queued = submit(d, SHORT)
        d.stop()  # SIGTERM: drain, then stop
        assert "running jobs have 60 s to finish" in d.log()
        d.start()
        job = d.stub.GetJob(bench_pb2.GetJobRequest(job_id=running))
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, (job.state, job.error_message)
        # The queued one did not start during the drain; it runs now.
        assert wait_for_state(d.stub, queued, [bench_pb2.JOB_STATE_SUCCEEDED]).state == \
            bench_pb2.JOB_STATE_SUCCEEDED
    finally:
        d.stop()


def test_ctrl_c_during_watch_says_the_job_runs_on_and_how_to_follow_or_cancel_it(daemon):
    watcher = subprocess.Popen(
        [os.path.join(BIN, "benchctl"), "--address", daemon.address, "submit", "benchmark", *LONG,
         "--watch"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        jobs = []
        while not jobs and time.time() < deadline:
            jobs = list(daemon.stub.ListJobs(bench_pb2.ListJobsRequest()).jobs)
            time.sleep(0.1)
        assert jobs, "the watched submit made no job"
        job_id = jobs[0].id
        wait_first_step(daemon, job_id)
        watcher.send_signal(signal.SIGINT)
        out, err = watcher.communicate(timeout=30)
    finally:
        if watcher.poll() is None:
            watcher.kill()
    assert watcher.returncode == 130, (watcher.returncode, out, err)
    assert f"stopped watching job {job_id} (Ctrl-C); the job is still running" in err, err
    assert f"benchctl watch {job_id}" in err and f"benchctl cancel {job_id}" in err, err
    job = daemon.stub.GetJob(bench_pb2.GetJobRequest(job_id=job_id))
    assert job.state == bench_pb2.JOB_STATE_RUNNING, job
    daemon.benchctl("cancel", job_id, check=0)
    wait_for_state(daemon.stub, job_id, [bench_pb2.JOB_STATE_CANCELLED], timeout=30)


def test_a_watcher_gets_the_interrupted_event_when_the_daemon_stops(tmp_data_dir):
    """SIGTERM with a job still running past the grace: its watcher gets the
    job's `interrupted` event, not UNAVAILABLE, before the daemon goes."""
    d = Daemon(tmp_data_dir, ["--stop-grace", "0"]).start()
    running = submit(d, LONG)
    wait_first_step(d, running)
    events, errors = [], []
    first = threading.Event()

    def watch():
        try:
            for e in d.stub.Watch(bench_pb2.WatchRequest(job_id=running), timeout=120):
                events.append(e)
                first.set()
        except grpc.RpcError as e:
            errors.append(e)
        first.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    assert first.wait(30), "the watch never started"
    d.stop()
    watcher.join(60)
    assert not watcher.is_alive(), "the watch outlived the daemon"
    assert not errors, (errors[0].code(), errors[0].details())
    assert events and events[-1].HasField("interrupted"), events[-1]
    assert "daemon stopped" in events[-1].interrupted.error_message, events[-1]
