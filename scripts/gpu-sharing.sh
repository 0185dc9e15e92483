#!/usr/bin/env bash
# --gpu-sharing when-idle on a GPU machine (after `source .gpu-debs/unpack.sh`):
# builds benchd, benchd-worker and benchctl into build-gpu (or reuses it);
# tests/gpu/test_gpu_sharing.py then starts its own when-idle daemon on cuda:0
# and a Python/torch process holding 2 GiB of the GPU: Submit is refused
# naming that process (pid, name, memory) and the GPU's UUID; once it is
# killed the benchmark runs; one that comes during a benchmark leaves the job
# a warning. Report: $OUT/gpu-sharing.txt (what nvidia-smi showed at each
# point), $OUT/sharing.txt (pytest), $OUT/benchd-gpu-sharing.log.
#   GPU_SHARING_SKIP_BUILD=1  use build-gpu as it is
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
gpu_setup
[ -n "${GPU_SHARING_SKIP_BUILD:-}" ] ||
  gpu_build gpu-sharing -DBENCHD_BUILD_TESTS=OFF --target benchd benchd-worker benchctl
BIN=$(cd "$BUILD/bin" && pwd)
# No BENCHD_ADDRESS: the test starts its own daemon (when-idle) on cuda:0.
BENCHD_ADDRESS="" gpu_pytest sharing tests/gpu/test_gpu_sharing.py
