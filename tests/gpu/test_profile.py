"""The profile request on a GPU (scripts/gpu-profile.sh): a trace fetched
through benchctl (FetchArtifact) is valid Chrome-trace JSON with kernels and
the named ranges (step, forward, attention.softmax); and the jobs
bench/profile_compare.py ran pass its checks (a GEMM on top of every
forward, xl fp32's forward kernels within 10% of its CUDA-event time)."""
import glob
import json
import os

import pytest

pytestmark = pytest.mark.gpu


def test_a_fetched_trace_has_kernels_and_the_named_ranges(ctl, out_dir, tmp_path):
    ctl.wait_up("cuda:0")
    trace = tmp_path / "trace-small.json"  # large: only the summary stays
    r = ctl.run("submit", "profile", "--device", "cuda:0", "--preset", "small",
                "--context-length", "256", "--profile-steps", "2", "--watch", "--trace", trace,
                rpc_timeout=120)
    with open(os.path.join(out_dir, "profile-small-cli.txt"), "w") as f:
        f.write(r.stdout + r.stderr)
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    events = json.loads(trace.read_text())["traceEvents"]
    cats = {}
    for e in events:
        cats[e.get("cat")] = cats.get(e.get("cat"), 0) + 1
    ranges = {e["name"] for e in events if e.get("cat") in ("gpu_user_annotation", "user_annotation")}
    need = {"step", "forward", "attention.softmax"}
    summary = (f"trace: {len(events)} events, by category "
               f"{dict(sorted(cats.items(), key=lambda x: str(x[0])))}; ranges {sorted(need & ranges)}")
    with open(os.path.join(out_dir, "trace-check.txt"), "w") as f:
        f.write(summary + "\n")
    assert cats.get("kernel", 0) > 0, summary
    assert need <= ranges, f"missing ranges {sorted(need - ranges)}: {summary}"


# bench/profile_compare.py's jobs (its --out folder: profile-PRESET-MODE-PRECISION.json,
# each a Job as `benchctl get --json` prints it); scripts/gpu-profile.sh sets this.
PROFILES = os.environ.get("BENCHD_GPU_TEST_PROFILES")


def compare_jobs():
    return sorted(glob.glob(os.path.join(PROFILES, "profile-*.json"))) if PROFILES else []


@pytest.mark.skipif(not PROFILES, reason="BENCHD_GPU_TEST_PROFILES is unset: these check the jobs "
                                         "bench/profile_compare.py --out DIR saved")
def test_profile_compare_saved_its_jobs():
    assert compare_jobs(), f"no profile-*.json in {PROFILES}"


@pytest.mark.parametrize("path", compare_jobs(), ids=os.path.basename)
def test_profile_compare_top_forward_kernel_is_a_gemm_and_kernels_match_events(path):
    """Every profile succeeded and its top forward kernel is a GEMM; for xl
    fp32 the forward's kernels are within 10% of the forward timed by CUDA
    events without the profiler (host-bound rows are not: their GPU idles)."""
    preset, mode, precision = os.path.basename(path)[len("profile-"):-len(".json")].rsplit("-", 2)
    with open(path) as f:
        job = json.load(f)
    assert job.get("state") == "JOB_STATE_SUCCEEDED", (job.get("state"), job.get("errorMessage"))
    profile = job["result"]["profile"]
    forward = {r["name"]: r for r in profile.get("ranges", [])}.get("forward", {})
    top = (forward.get("kernels") or [{}])[0]
    assert top.get("gemm"), f"top forward kernel {top.get('name', '')[:60]} is not a GEMM"
    if preset == "xl" and precision == "fp32":
        events = profile["unprofiled"].get("forward", {}).get("median", 0)
        kernels = forward.get("kernelSecondsPerStep", 0)
        assert events and abs(kernels / events - 1) <= 0.10, (
            f"forward kernels {kernels * 1e3:.3f} ms vs {events * 1e3:.3f} ms by CUDA events")
