#!/usr/bin/env bash
# The fast path (issue 37) on a GPU machine (after `source .gpu-debs/unpack.sh`):
# builds into build-gpu (or reuses it), optionally runs the worker's CUDA tests,
# starts benchd on cuda:0 and runs bench/compiled_vs_eager.py --fastpath: each
# preset's fast train step (every --fast-variants column) against the strongest
# PyTorch setup (torch.compile mode reduce-overhead, fused torch.optim.AdamW,
# bf16 autocast) and the roofline floor, then benchd's profile of each preset's
# fast step split into GEMMs, attention, optimizer, elementwise kinds and waits.
# Writes $OUT/fastpath.md (also printed), fastpath.json (the jobs and
# profiles), benchd.log, gpu.txt, build.log.
#   GPU_FASTPATH_SKIP_BUILD=1  use build-gpu as it is
#   GPU_FASTPATH_TESTS=REGEX   build worker_test too and run its tests matching
#                              REGEX (gtest filter, e.g. 'Cuda*:AdamW*') first
#   GPU_FASTPATH_FLAGS         flags for bench/compiled_vs_eager.py (presets,
#                              contexts, --peer-contexts, --fast-variants, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup

if [ -z "${GPU_FASTPATH_SKIP_BUILD:-}" ]; then
  if [ -n "${GPU_FASTPATH_TESTS:-}" ]; then
    gpu_build gpu-fastpath -DBENCHD_BUILD_TESTS=ON --target benchd benchd-worker benchctl worker_test
  else
    gpu_build gpu-fastpath -DBENCHD_BUILD_TESTS=OFF --target benchd benchd-worker benchctl
  fi
fi
if [ -n "${GPU_FASTPATH_TESTS:-}" ]; then
  t0=$(date +%s)
  test_bin=$(find "$BUILD" -name worker_test -type f -perm -u+x | head -1)
  if "$test_bin" --gtest_filter="$GPU_FASTPATH_TESTS" > "$OUT/worker-test.log" 2>&1; then
    echo "PASS worker_test $GPU_FASTPATH_TESTS: $(grep -c '^\[       OK \]' "$OUT/worker-test.log") passed," \
      "$(grep -c '^\[  SKIPPED \]' "$OUT/worker-test.log") skipped in $(( $(date +%s) - t0 )) s"
  else
    echo "FAIL worker_test $GPU_FASTPATH_TESTS"
    grep -B2 -A20 "Failure\|FAILED\|what()" "$OUT/worker-test.log" | head -60
  fi
fi

gpu_serve gpu-fastpath 1 --device cuda:0
"$BIN/benchctl" --timeout 120 node > "$OUT/node.txt"
t0=$(date +%s)
# shellcheck disable=SC2086  # GPU_FASTPATH_FLAGS: flags, word-split on purpose
python3 bench/compiled_vs_eager.py --fastpath --benchctl "$BIN/benchctl" --device cuda:0 \
  --out "$OUT/fastpath.md" --json "$OUT/fastpath.json" ${GPU_FASTPATH_FLAGS:-} < /dev/null
echo "gpu-fastpath: took $(( $(date +%s) - t0 )) s on $(cut -d, -f1 "$OUT/gpu.txt")"
