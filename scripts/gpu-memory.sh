#!/usr/bin/env bash
# The memory request on a GPU machine (after `source .gpu-debs/unpack.sh`):
# builds into build-gpu (or reuses it), runs the CUDA memory unit tests, starts
# benchd on the GPU and runs `benchctl submit memory --watch` sweeps, then checks every
# snapshot pickle with PyTorch's own memory_viz and writes the peak tables.
# Everything lands in $OUT (default gpu-out):
#   memory-<preset>.txt        what benchctl submit memory --watch printed (tables, allocations)
#   memory-<preset>.json       the job (benchctl get --json)
#   svg/<job>-timeline-*.svg   benchd's own timeline pictures
#   pickles/<preset>-*.pickle  the snapshots (pytorch.org/memory_viz reads them)
#   html/<preset>-*.html       memory_viz trace_plot of each
#   memory_viz.txt             per pickle: `stats` and `trace_plot` read it or not
#   memory-viz.txt             those checks' report (tests/gpu/test_memory.py); the
#                              script fails if a pickle is not read
#   peaks.md                   the peak tables (bench/memory_table.py)
#   GPU_MEMORY_SWEEPS  lines of "preset batch contexts modes precisions stacks"
#                      (default: 2.7B and small, contexts 128,256,512,
#                      forward+train_step, fp32+bf16, batch 4, C++ stacks)
#                      ("none": build and unit tests only, e.g. as a first
#                      device call when one call of 10 minutes is too short)
#   GPU_MEMORY_SKIP_BUILD=1  use build-gpu as it is
# Frames show function names in a Release build; file:line need debug info
# (configure build-gpu with -DCMAKE_BUILD_TYPE=RelWithDebInfo).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT/svg" "$OUT/pickles" "$OUT/html"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup

[ -n "${GPU_MEMORY_SKIP_BUILD:-}" ] || gpu_build gpu-memory -DBENCHD_TEST_PYTHON=/nonexistent
# The memory unit tests that need the GPU (they skip without one).
gpu_ctest_run memory "CudaMemory|MemorySnapshot|MemoryRun"

BIN=$BUILD/bin
DATA=$(mktemp -d /tmp/benchd-gpu-memory-XXXXXX)
benchd_start --copy-logs "$OUT" "$BIN" "$DATA" "$OUT/benchd.log" --metrics 127.0.0.1:0
"$BIN/benchctl" --timeout 120 node | tee "$OUT/node.txt"

SWEEPS=${GPU_MEMORY_SWEEPS:-"2.7B 4 128,256,512 forward,train_step fp32,bf16 cpp
small 4 128,256,512 forward,train_step fp32,bf16 cpp"}
[ "$SWEEPS" = none ] && SWEEPS=""
jsons=()
while read -r preset batch contexts modes precisions stacks; do
  [ -n "$preset" ] || continue
  echo "=== benchctl submit memory --preset $preset --batch-size $batch --contexts $contexts --modes $modes --precisions $precisions --stacks $stacks --watch"
  t0=$(date +%s)
  "$BIN/benchctl" --timeout 120 submit memory --device cuda:0 --preset "$preset" --batch-size "$batch" \
    --contexts "$contexts" --modes "$modes" --precisions "$precisions" --stacks "$stacks" \
    --warmup-steps 2 --record-steps 2 --watch --svg-dir "$OUT/svg" < /dev/null > "$OUT/memory-$preset.txt" 2>&1 || true
  echo "gpu-memory: $preset sweep took $(( $(date +%s) - t0 )) s"
  tail -n +1 "$OUT/memory-$preset.txt" | sed -n '/^Peak memory per run/,/^$/p'
  # --watch says "submitted memory job N" first (on stderr, in the file too).
  id=$(sed -n 's/^submitted memory job \([0-9]*\).*/\1/p' "$OUT/memory-$preset.txt")
  if [ -z "$id" ]; then echo "gpu-memory: $preset: no job submitted"; cat "$OUT/memory-$preset.txt"; continue; fi
  "$BIN/benchctl" get "$id" --json < /dev/null > "$OUT/memory-$preset.json" || true
  jsons+=("$OUT/memory-$preset.json")
  for p in "$DATA/artifacts/$id"/*.pickle; do
    [ -e "$p" ] || continue
    cp "$p" "$OUT/pickles/$preset-$(basename "$p")"
  done
done <<< "$SWEEPS"

if [ ${#jsons[@]} -gt 0 ]; then
  { echo "# Peak memory through benchd ($(cut -d, -f1 "$OUT/gpu.txt"))"; echo;
    python3 bench/memory_table.py "${jsons[@]}"; } > "$OUT/peaks.md" && cat "$OUT/peaks.md"
fi
ls "$OUT/svg" | sed 's/^/svg: /'
# Every snapshot through PyTorch's memory_viz, stats and trace_plot
# (tests/gpu/test_memory.py): html/, memory_viz.txt; fails if one is not read.
if [ -n "$SWEEPS" ]; then
  BENCHD_GPU_TEST_PICKLES="$OUT/pickles" gpu_pytest memory-viz tests/gpu/test_memory.py
fi
