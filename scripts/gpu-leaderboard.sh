#!/usr/bin/env bash
# The CS336 FlashAttention leaderboard's case on a GPU machine (after `source
# .gpu-debs/unpack.sh`): builds benchd, benchd-worker and benchctl into
# build-gpu, starts benchd on the GPU and runs bench/attention_leaderboard.py
# (benchd's `--preset leaderboard` jobs beside triton's do_bench on SDPA's
# cuDNN and FlashAttention-2, in the same call).
# Outputs in $OUT (default gpu-out): leaderboard.txt/.json, benchd.log, gpu.txt.
#   GPU_LEADERBOARD_IMPLS  benchd's implementations (default fused,cudnn,flash)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup
gpu_build gpu-leaderboard -DBENCHD_BUILD_TESTS=OFF --target benchd benchd-worker benchctl
DATA=$(mktemp -d /tmp/benchd-gpu-leaderboard-XXXXXX)
benchd_start --copy-logs "$OUT" "$BUILD/bin" "$DATA" "$OUT/benchd.log"
python3 bench/attention_leaderboard.py --benchctl "$BUILD/bin/benchctl" \
  --impls "${GPU_LEADERBOARD_IMPLS:-fused,cudnn,flash}" --json-out "$OUT/leaderboard.json" \
  < /dev/null 2>&1 | tee "$OUT/leaderboard.txt"
benchd_stop
