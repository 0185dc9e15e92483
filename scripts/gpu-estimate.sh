#!/usr/bin/env bash
# Submit's memory check on a GPU machine (after `source .gpu-debs/unpack.sh`):
# builds into build-gpu (or reuses it), starts benchd on the GPU and shows
# that a step whose estimate (Bench.Estimate) exceeds the GPU's memory is
# refused at Submit, FAILED_PRECONDITION naming both figures; that with
# --force it is queued and really runs out of memory on the device; and that
# a step that fits runs: the checks are tests/gpu/test_estimate.py (pytest,
# marker gpu), their report in $OUT/estimate.txt (also printed); the estimate
# as JSON and text, fits.txt, benchd.log and gpu.txt. Fails if a check fails.
#   GPU_ESTIMATE_SKIP_BUILD=1  use build-gpu as it is
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup

gpu_serve gpu-estimate "${GPU_ESTIMATE_SKIP_BUILD:-}"
# The checks: tests/gpu/test_estimate.py (waits for cuda:0's worker and its memory figure).
gpu_pytest estimate tests/gpu/test_estimate.py
