"""The quickstart notebook against the GPU daemon (scripts/gpu-check.sh,
GPU_CHECK_NOTEBOOK): docs/notebooks/run_notebook.py runs it top to bottom
(any cell's error fails) and saves the outputs into out_dir/notebook.ipynb.
BENCHD_GPU_NOTEBOOK names the notebook; BENCHD_GPU_NOTEBOOK_SITE a folder
with the benchd package and nbclient (the wheels the script installs aside),
put on the runner's PYTHONPATH only."""
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
NOTEBOOK = os.environ.get("BENCHD_GPU_NOTEBOOK")


@pytest.mark.skipif(not NOTEBOOK, reason="BENCHD_GPU_NOTEBOOK is unset (gpu-check.sh's "
                                         "GPU_CHECK_NOTEBOOK)")
def test_the_notebook_runs_top_to_bottom(ctl, out_dir):
    written = os.path.join(out_dir, "notebook.ipynb")
    shutil.copy(NOTEBOOK, written)
    env = dict(os.environ)
    site = os.environ.get("BENCHD_GPU_NOTEBOOK_SITE")
    if site:
        env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "docs", "notebooks", "run_notebook.py"),
                        "--address", ctl.address, "--write", written],
                       capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                       timeout=1800)
    with open(os.path.join(out_dir, "notebook.txt"), "w") as f:
        f.write(r.stdout + r.stderr)
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
