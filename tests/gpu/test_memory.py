"""The memory request's snapshots on a GPU (scripts/gpu-memory.sh): every
snapshot pickle a sweep wrote is read by PyTorch's own memory_viz, `stats`
and `trace_plot` (an HTML page with the Active Memory Timeline).

The pickles: $BENCHD_GPU_TEST_PICKLES (the script copies its sweeps' there),
else one small sweep run here on cuda:0 (its daemon's data dir must be known:
a daemon this session started, or BENCHD_GPU_TEST_DATA). Outputs go to
out_dir/html/<name>.{stats.txt,html}, a line per pickle to memory_viz.txt."""
import glob
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def pickles(ctl):
    folder = os.environ.get("BENCHD_GPU_TEST_PICKLES")
    if folder:
        found = sorted(glob.glob(os.path.join(folder, "*.pickle")))
        assert found, f"no snapshot pickles in {folder}: did the sweeps run?"
        return found
    if not ctl.data_dir:
        pytest.skip("no BENCHD_GPU_TEST_PICKLES and the daemon's data dir is unknown "
                    "(set BENCHD_GPU_TEST_DATA)")
    ctl.wait_up("cuda:0")
    job_id = ctl.json("submit", "memory", "--device", "cuda:0", "--preset", "small",
                      "--batch-size", "4", "--contexts", "128", "--modes", "forward,train_step",
                      "--precisions", "bf16", "--stacks", "cpp", "--warmup-steps", "2",
                      "--record-steps", "2")["id"]
    ctl.run("watch", job_id, rpc_timeout=120)
    job = ctl.json("get", job_id)
    assert job.get("state") == "JOB_STATE_SUCCEEDED", (job.get("state"), job.get("errorMessage"))
    found = sorted(glob.glob(os.path.join(ctl.data_dir, "artifacts", job_id, "*.pickle")))
    assert found, f"memory job {job_id} left no snapshot pickle"
    return found


def test_memory_viz_reads_every_snapshot(pickles, out_dir):
    html = os.path.join(out_dir, "html")
    os.makedirs(html, exist_ok=True)
    lines, failed = [], []
    for p in pickles:
        name = os.path.basename(p)[:-len(".pickle")]
        stats = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "stats", p],
                               capture_output=True, text=True, timeout=600)
        with open(os.path.join(html, f"{name}.stats.txt"), "w") as f:
            f.write(stats.stdout + stats.stderr)
        page = os.path.join(html, f"{name}.html")
        plot = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "trace_plot", p,
                               "-o", page], capture_output=True, text=True, timeout=600)
        drawn = plot.returncode == 0 and os.path.exists(page) and \
            "Active Memory Timeline" in open(page, errors="replace").read()
        reserved = [line for line in stats.stdout.splitlines() if "total_reserved" in line]
        lines.append(f"{name}: stats {'read' if stats.returncode == 0 else 'failed'} "
                     f"({(reserved or [stats.stderr.strip()[-200:]])[0]}), trace_plot "
                     f"{'drawn' if drawn else 'failed: ' + (plot.stdout + plot.stderr).strip()[-200:]}")
        if stats.returncode != 0 or not drawn:
            failed.append(lines[-1])
    with open(os.path.join(out_dir, "memory_viz.txt"), "a") as f:
        f.write("\n".join(lines) + "\n")
    assert not failed, "\n".join(failed)
