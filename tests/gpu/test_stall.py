"""A worker stopped mid-job on a GPU (scripts/gpu-check.sh, GPU_CHECK_STALL):
the job fails at its progress deadline (10 s) with DEADLINE_EXCEEDED, and a
new worker serves cuda:0. BENCHD_GPU_STALL_KINDS picks the request kinds
(default: benchmark profile memory); the worker is SIGSTOPped, so the tests
run on the machine the daemon runs on."""
import json
import os
import signal
import time

import pytest

pytestmark = pytest.mark.gpu

ARGS = {
    "memory": ["memory", "--preset", "small", "--precision", "bf16", "--batch-size", "4",
               "--context-length", "128", "--warmup-steps", "5000", "--record-steps", "2"],
    "profile": ["profile", "--preset", "small", "--precision", "bf16", "--batch-size", "4",
                "--context-length", "128", "--profile-steps", "2", "--steps", "100000"],
    "benchmark": ["benchmark", "--preset", "small", "--precision", "bf16", "--batch-size", "4",
                  "--context-length", "128", "--steps", "100000"],
}
KINDS = os.environ.get("BENCHD_GPU_STALL_KINDS", "benchmark profile memory").split()
DEADLINE_EXCEEDED = 4


@pytest.mark.parametrize("kind", KINDS)
def test_a_stopped_worker_fails_its_job_at_the_deadline_and_is_replaced(ctl, out_dir, kind):
    assert kind in ARGS, f"BENCHD_GPU_STALL_KINDS: {kind!r} is none of {sorted(ARGS)}"
    pid = int(ctl.wait_up("cuda:0")["workerPid"])
    job_id = ctl.json("submit", *ARGS[kind], "--device", "cuda:0", "--progress-timeout", "10")["id"]
    time.sleep(6)  # past the model's build and the first steps
    os.kill(pid, signal.SIGSTOP)
    stopped = time.time()
    try:
        ctl.run("watch", job_id, timeout=300)
        took = time.time() - stopped
        job = ctl.json("get", job_id)
        with open(os.path.join(out_dir, f"stall-{kind}.json"), "w") as f:
            json.dump(job, f, indent=1)
        assert job.get("state") == "JOB_STATE_FAILED" and job.get("errorCode") == DEADLINE_EXCEEDED, (
            f"{job.get('state')} code {job.get('errorCode')} {took:.1f} s after SIGSTOP: "
            f"{job.get('errorMessage', '')[:300]}")
        deadline = time.time() + 120
        while True:
            new = int(ctl.wait_up("cuda:0", timeout=120)["workerPid"])
            if new != pid:
                break
            assert time.time() < deadline, f"cuda:0 still served by the stopped worker {pid}"
            time.sleep(1)
    finally:
        try:
            os.kill(pid, signal.SIGCONT)  # if the daemon has not killed it, let it go on
        except ProcessLookupError:
            pass
