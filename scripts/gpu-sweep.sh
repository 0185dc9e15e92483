#!/usr/bin/env bash
# A sweep on a GPU machine (after `source .gpu-debs/unpack.sh`): builds into
# build-gpu (or reuses it), starts benchd on the GPU and runs ONE sweep
# request, by default the CS336 mixed-precision table: every preset x
# forward/train_step x fp32/bf16/fp16 (batch 4, context 128); then prints
# the write-up's layouts with `benchctl get --pivot`: median step ms,
# speed-up against fp32, tokens/s, and each phase's share of the step.
# Writes $OUT/sweep.md (also printed), sweep.json (the Job), benchd.log.
#   GPU_SWEEP_SECONDS     follow it at most this long (default 1500)
#   GPU_SWEEP_FLAGS       the request (default: the mixed-precision sweep below)
#   GPU_SWEEP_PIVOT       ROWS,COLS of the pivots (default model.preset,precision)
#   GPU_SWEEP_SKIP_BUILD=1  use build-gpu as it is
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup

gpu_serve gpu-sweep "${GPU_SWEEP_SKIP_BUILD:-}"
FLAGS=${GPU_SWEEP_FLAGS:-"--device cuda:0 --batch-size 4 --context-length 128 --warmup-steps 5 --steps 10
  --sweep model.preset=small,medium,large,xl,2.7B --sweep mode=forward,train_step
  --sweep precision=fp32,bf16,fp16 --cell-timeout 300"}
PIVOT=${GPU_SWEEP_PIVOT:-model.preset,precision}
t0=$(date +%s)
# shellcheck disable=SC2086  # FLAGS: flags, word-split on purpose
id=$("$BIN/benchctl" submit benchmark $FLAGS < /dev/null)
# Followed for at most GPU_SWEEP_SECONDS: the rows finished by then are
# stored with the RUNNING job, so the pivots below show them either way.
timeout "${GPU_SWEEP_SECONDS:-1500}" "$BIN/benchctl" watch "$id" > "$OUT/watch.log" 2>&1 || true
took=$(( $(date +%s) - t0 ))
"$BIN/benchctl" get "$id" --json > "$OUT/sweep.json"
{
  echo "# One sweep request on $(cut -d, -f1 "$OUT/gpu.txt"): job $id, ${took} s, $(grep -o '"state": "[A-Z_]*"' "$OUT/sweep.json" | head -1)"
  echo
  echo '```'
  echo "benchctl submit benchmark $(tr -s ' \n' ' ' <<< "$FLAGS")"
  echo '```'
  for value in median_step_ms speedup_vs_fp32 tokens_per_second forward_share backward_share optimizer_share; do
    echo
    echo "## $value"
    echo
    echo '```'
    "$BIN/benchctl" get "$id" --pivot "$PIVOT" --value "$value"
    echo '```'
  done
  echo
  echo "## Every cell"
  echo
  echo '```'
  "$BIN/benchctl" get "$id"
  echo '```'
} | tee "$OUT/sweep.md"
