#!/usr/bin/env bash
# The attention request on a GPU machine (after `source .gpu-debs/unpack.sh`):
# builds benchd, benchd-worker and benchctl into build-gpu (or reuses it),
# starts benchd on the GPU, checks a real memory cap, then runs the CS336
# pytorch_attention grid with bench/attention_grid.py, one `benchctl submit
# attention` job per cell: batch 8, d in {16,32,64,128} x seq in {256,1024,
# 4096,8192,16384}, the course's attention vs flash vs cudnn, fp32 and bf16
# (flash and cudnn take bf16/fp16 only on CUDA: their fp32 cells are
# "refused" rows with the daemon's reason). Passes: 100 after 5 warm-up
# passes, and 20 after 3 for seq >= 8192 (each of those passes takes up to a
# few hundred ms; the medians are steady well before 20). Then the first
# cell that runs out of memory: the faithful fp32 cell at d 128, seq 16384
# with batch 12, 16, 24, 32 until one does (its row carries the worker's
# memory figures and the score matrix by formula).
# Everything lands in $OUT (default gpu-out):
#   attention.md         the table (markdown), also printed
#   attention-jobs.json  every cell's Job (benchctl get --json)
#   cap.txt              the memory-cap checks (tests/gpu/test_attention.py's report)
#   benchd.log, node.txt, gpu.txt, build.log
#   ctest-attention.log  with GPU_ATTENTION_CTEST=1
# GPU_ATTENTION_SKIP_BUILD=1  use build-gpu as it is
# GPU_ATTENTION_CTEST=1       also build worker_test and run the CUDA attention
#                             unit tests (saved bytes against the formulas, the
#                             cap); about a minute more of build on 16 cores
# GPU_ATTENTION_GRID="..."    extra flags for bench/attention_grid.py (e.g.
#                             "--dims 64 --seqs 1024" for a quick look)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup

if [ -n "${GPU_ATTENTION_CTEST:-}" ]; then
  gpu_ctest attention "${GPU_ATTENTION_SKIP_BUILD:-}" "CudaAttention|AttentionRun"
elif [ -z "${GPU_ATTENTION_SKIP_BUILD:-}" ]; then
  gpu_build gpu-attention -DBENCHD_BUILD_TESTS=OFF --target benchd benchd-worker benchctl
fi

BIN=$BUILD/bin
DATA=$(mktemp -d /tmp/benchd-gpu-attention-XXXXXX)
benchd_start --copy-logs "$OUT" "$BIN" "$DATA" "$OUT/benchd.log"
"$BIN/benchctl" --timeout 120 node | tee "$OUT/node.txt"

# The memory cap's checks: tests/gpu/test_attention.py (a cell over the cap
# runs out of memory, the next one uncapped runs). The grid runs either way;
# the script fails at the end if a check failed.
checks=0
gpu_pytest cap tests/gpu/test_attention.py || checks=$?

t0=$(date +%s)
# shellcheck disable=SC2086  # GPU_ATTENTION_GRID: flags, word-split on purpose
python3 bench/attention_grid.py --benchctl "$BIN/benchctl" --device cuda:0 --out "$OUT" \
  --oom-batches 12,16,24,32 ${GPU_ATTENTION_GRID:-} < /dev/null
echo "gpu-attention: the grid took $(( $(date +%s) - t0 )) s on $(cut -d, -f1 "$OUT/gpu.txt")"
exit "$checks"
