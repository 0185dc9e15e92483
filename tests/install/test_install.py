"""The installed benchd outlives its checkout: `cmake --install` into a fresh
prefix, and the Debian package CPack makes of the same install, each run a
real job with the checkout (sources, build/, .venv) hidden under an empty
tmpfs in a mount namespace of their own, so nothing can load from it.

Environment: BENCHD_BUILD_DIR (the configured build folder), BENCHD_SOURCE_DIR.
Root, like tests/cluster (unshare --mount, mount): strict, a missing tool fails."""
import os
import re
import shutil
import subprocess
import textwrap

import pytest

BUILD = os.path.realpath(os.environ["BENCHD_BUILD_DIR"])
SRC = os.path.realpath(os.environ["BENCHD_SOURCE_DIR"])
# The toolkit the build compiled with: hidden too, so the installed worker
# shows it needs no CUDA toolkit on the node.
TOOLKITS = [p for p in ("/usr/local/cuda", "/usr/local/cuda-13.0") if os.path.isdir(p)]
HIDDEN = [SRC] + ([] if BUILD.startswith(SRC + "/") else [BUILD]) + TOOLKITS

# Run inside the namespace: hide the checkout and the toolkit, start the
# installed daemon on port 0, run a train step through the installed benchctl.
JOB = textwrap.dedent("""\
    set -eu
    prefix=$1 data=$2; shift 2
    for d in "$@"; do mount -t tmpfs -o size=1m benchd-hidden "$d"; done
    test ! -e "{src}/CMakeLists.txt"
    "$prefix/bin/benchd" --data-dir "$data" --listen 127.0.0.1:0 --metrics off \\
        --device cpu:0 2>"$data.log" &
    pid=$!
    trap 'kill $pid 2>/dev/null; wait $pid' EXIT
    i=0
    while [ ! -s "$data/endpoints.json" ]; do
      kill -0 $pid || {{ cat "$data.log"; exit 1; }}
      i=$((i + 1)); [ $i -lt 600 ] || {{ echo "no endpoints.json"; exit 1; }}
      sleep 0.05
    done
    address=$(sed -n 's/.*"grpc":"\\([^"]*\\)".*/\\1/p' "$data/endpoints.json")
    "$prefix/bin/benchctl" --address "$address" --timeout 60 submit benchmark --preset mini \\
        --mode train_step --precision fp32 --batch-size 2 --context-length 32 \\
        --warmup-steps 1 --steps 3 --watch
    "$prefix/bin/benchctl" --address "$address" get 1 --json
    """).format(src=SRC)


def run_installed(tmp_path, prefix):
    script = tmp_path / "job.sh"
    script.write_text(JOB)
    data = tmp_path / "data"
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", str(script),
                        str(prefix), str(data), *HIDDEN],
                       capture_output=True, text=True, timeout=300, cwd="/")
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert re.search(r'"state":\s*"JOB_STATE_SUCCEEDED"', r.stdout), r.stdout
    # The worker that ran is the installed one.
    logs = "".join(p.read_text(errors="replace") for p in (data / "logs").glob("*.log"))
    assert SRC not in logs, logs[-2000:]
    return r.stdout


def runpath(binary):
    out = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", out)
    return m.group(1) if m else ""


@pytest.fixture
def tmp_path(tmp_path):
    """pytest's tmp_path, emptied after the test: an install holds ~3.6 GB of
    LibTorch and CUDA libraries, too much to leave for pytest's rotation."""
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_cmake_install_runs_a_job_without_the_checkout(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)], check=True,
                   capture_output=True, text=True)
    for program in ("benchd", "benchd-worker", "benchctl", "benchd-health", "benchd-cluster-run"):
        assert os.access(prefix / "bin" / program, os.X_OK), program
    rp = runpath(prefix / "bin" / "benchd-worker")
    assert rp.startswith("$ORIGIN/../lib/benchd/site-packages/torch/lib"), rp
    assert SRC not in rp and "/usr/local/cuda" not in rp, rp
    assert (prefix / "lib/benchd/site-packages/torch/lib/libtorch_cpu.so").exists()
    unit = (prefix / "lib/systemd/system/benchd.service").read_text()
    assert f"ExecStart={prefix}/bin/benchd " in unit and "/usr/local/" not in unit
    assert f"{prefix}/lib/benchd/benchd-wait-ready" in unit
    assert os.access(prefix / "lib/benchd/benchd-wait-ready", os.X_OK)
    assert (prefix / "share/benchd/benchd.env").exists()
    # The prefix can move: every path is relative to the programs.
    moved = tmp_path / "moved"
    prefix.rename(moved)
    out = run_installed(tmp_path, moved)
    assert "train_step" in out


def test_debian_package_runs_a_job_without_the_checkout(tmp_path):
    if not shutil.which("cpack") or not shutil.which("dpkg-deb"):
        pytest.fail("needs cpack and dpkg-deb")
    subprocess.run(["cpack", "-G", "DEB", "-B", str(tmp_path / "pkg")], cwd=BUILD, check=True,
                   capture_output=True, text=True)
    (deb,) = (tmp_path / "pkg").glob("benchd_*.deb")
    fields = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Depends"],
                            capture_output=True, text=True, check=True).stdout
    assert "Package: benchd" in fields and "libgrpc++1.51" in fields, fields
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    shutil.rmtree(tmp_path / "pkg")
    unit = (root / "usr/lib/systemd/system/benchd.service").read_text()
    assert "ExecStart=/usr/bin/benchd " in unit
    out = run_installed(tmp_path, root / "usr")
    assert "train_step" in out
