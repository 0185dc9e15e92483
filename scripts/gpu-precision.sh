#!/usr/bin/env bash
# The precision request on a GPU machine (after `source .gpu-debs/unpack.sh`):
# builds benchd, benchd-worker and benchctl into build-gpu (or reuses it),
# starts benchd on the GPU and runs the CS336 mixed_precision experiments on
# cuda:0 with the defaults (0.01 added 1000 times in the write-up's four
# loops; the ToyModel under CUDA autocast in bf16 and fp16), then checks the
# figures against the write-up: fp16 accumulation 9.953125, fp32 within 1e-3
# of 10, mixed = mixed_cast = 10.00213623046875; parameters and gradients
# fp32, fc1 and the logits in the autocast dtype, the layer norm's output and
# the loss fp32 (CUDA autocast's fp32 list): tests/gpu/test_precision.py.
# A CPU cell runs beside it, so the two autocasts' tables can be set side by
# side.
# Everything lands in $OUT (default gpu-out):
#   precision.md           both tables as benchctl prints them (cuda:0, then cpu:0)
#   precision.json         the cuda:0 Job (benchctl --json)
#   precision-cpu.json     the cpu:0 Job
#   precision.csv          the cuda:0 tables as CSV (benchctl get --csv)
#   precision-checks.txt   the checks' report (tests/gpu/test_precision.py; also
#                          printed); the script fails if one fails
#   benchd.log, node.txt, gpu.txt, build.log
#   ctest-precision.log    with GPU_PRECISION_CTEST=1
# GPU_PRECISION_SKIP_BUILD=1  use build-gpu as it is
# GPU_PRECISION_CTEST=1       also build worker_test and run the precision unit
#                             tests (CudaPrecisionTest: the same checks in C++)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup

if [ -n "${GPU_PRECISION_CTEST:-}" ]; then
  gpu_ctest precision "${GPU_PRECISION_SKIP_BUILD:-}" "CudaPrecision|PrecisionRun"
  GPU_PRECISION_SKIP_BUILD=1
fi
gpu_serve gpu-precision "${GPU_PRECISION_SKIP_BUILD:-}" --device cuda:0 --device cpu:0
"$BIN/benchctl" --timeout 120 node | tee "$OUT/node.txt"

{
  echo "## cuda:0"
  echo
  echo '```'
  "$BIN/benchctl" --timeout 300 submit precision --device cuda:0 --watch < /dev/null 2>&1
  echo '```'
} | tee "$OUT/precision.md"
{
  echo
  echo "## cpu:0 (CPU autocast, for comparison)"
  echo
  echo '```'
  "$BIN/benchctl" --timeout 300 submit precision --device cpu:0 --watch < /dev/null 2>&1
  echo '```'
} | tee -a "$OUT/precision.md"
"$BIN/benchctl" --timeout 300 submit precision --device cpu:0 --watch --json < /dev/null \
  > "$OUT/precision-cpu.json"

# The checks against the write-up (tests/gpu/test_precision.py), which runs
# the cuda:0 job with --json and saves it as precision.json; its tables as CSV.
checks=0
gpu_pytest precision-checks tests/gpu/test_precision.py || checks=$?
if [ -s "$OUT/precision.json" ]; then
  "$BIN/benchctl" get "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' \
    "$OUT/precision.json")" --csv > "$OUT/precision.csv" || true
fi
echo "gpu-precision: done on $(cut -d, -f1 "$OUT/gpu.txt")"
exit "$checks"
