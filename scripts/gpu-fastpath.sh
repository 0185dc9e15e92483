#!/usr/bin/env bash
# The fast path (issue 37) on a GPU machine (after `source .gpu-debs/unpack.sh`):
# builds into build-gpu (or reuses it), optionally runs the worker's CUDA tests,
# starts benchd on cuda:0 and runs bench/compiled_vs_eager.py --fastpath: each
# preset's fast train step (every --fast-variants column) against the roofline
# floor, then benchd's profile of each preset's fast step split into GEMMs,
# attention, optimizer, elementwise kinds and waits, then the strongest PyTorch
# setup (torch.compile mode reduce-overhead, fused torch.optim.AdamW, bf16
# autocast) at each peer cell. $OUT gets few files (a device call brings back 8
# at most), each rewritten as the run goes, so a call cut at its limit still
# returns every finished row:
#   fastpath.md, fastpath.json  the tables and the jobs/profiles, after each row
#   run.log                     this script's output
#   nvidia-smi.txt              the card as found (nvidia-smi, clocks, power)
#   logs.tar.gz                 configure/build logs, benchd's and the workers'
#   bin.tar.xz                  with GPU_FASTPATH_PACK_BIN=1: the built programs
# Environment:
#   GPU_FASTPATH_SKIP_BUILD=1  use build-gpu as it is
#   GPU_FASTPATH_BIN_TAR=FILE  unpack a bin.tar.xz of an earlier call (carried)
#                              into build-gpu/bin and skip the build, unless a
#                              library it needs is missing here
#   GPU_FASTPATH_PACK_BIN=1    pack the built benchd, benchd-worker, benchctl
#                              (stripped) into $OUT/bin.tar.xz for such a call
#   GPU_FASTPATH_BUDGET=S      the Python sections end S seconds after this
#                              script started: no job, profile or peer is
#                              started within its reserve of that (--deadline)
#   GPU_FASTPATH_TESTS=REGEX   build worker_test too and run its tests matching
#                              REGEX (gtest filter, e.g. 'Cuda*:AdamW*') first
#   GPU_FASTPATH_FLAGS         flags for bench/compiled_vs_eager.py (presets,
#                              contexts, --peer-cells, --fast-variants, ...);
#                              word-split, so no spaces inside a value
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
REAL_OUT=$(cd "$OUT" && pwd)
# The libraries (gpu-lib.sh, daemon-lib.sh) write their logs into $OUT: here
# they go to LOGS, packed into one file at the end.
LOGS=$(mktemp -d /tmp/gpu-fastpath-logs-XXXXXX)
OUT=$LOGS
exec > >(tee "$REAL_OUT/run.log") 2>&1
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
PACKER=""
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh

finish() {
  [ -z "$PACKER" ] || wait "$PACKER" 2>/dev/null || true
  tar -czf "$REAL_OUT/logs.tar.gz" -C "$LOGS" . 2>/dev/null || true
}
trap finish EXIT

{ nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,persistence_mode,compute_mode --format=csv; } \
  > "$REAL_OUT/nvidia-smi.txt" 2>&1 || true
gpu_setup

SKIP_BUILD=${GPU_FASTPATH_SKIP_BUILD:-}
if [ -z "$SKIP_BUILD" ] && [ -n "${GPU_FASTPATH_BIN_TAR:-}" ] && [ -f "$GPU_FASTPATH_BIN_TAR" ]; then
  mkdir -p "$BUILD/bin"
  tar -xJf "$GPU_FASTPATH_BIN_TAR" -C "$BUILD/bin"
  if ldd "$BUILD/bin/benchd" "$BUILD/bin/benchd-worker" "$BUILD/bin/benchctl" 2>&1 | grep -q "not found"; then
    echo "gpu-fastpath: $GPU_FASTPATH_BIN_TAR's programs miss libraries here; building"
    ldd "$BUILD/bin/benchd-worker" | grep "not found" | head -5
  else
    echo "gpu-fastpath: programs from $GPU_FASTPATH_BIN_TAR, no build"
    SKIP_BUILD=1
  fi
fi
if [ -z "$SKIP_BUILD" ]; then
  if [ -n "${GPU_FASTPATH_TESTS:-}" ]; then
    gpu_build gpu-fastpath -DBENCHD_BUILD_TESTS=ON --target benchd benchd-worker benchctl worker_test
  else
    gpu_build gpu-fastpath -DBENCHD_BUILD_TESTS=OFF --target benchd benchd-worker benchctl
  fi
  if [ -n "${GPU_FASTPATH_PACK_BIN:-}" ]; then
    (
      pack=$(mktemp -d /tmp/gpu-fastpath-bin-XXXXXX)
      for p in benchd benchd-worker benchctl; do
        strip -o "$pack/$p" "$BUILD/bin/$p" 2>/dev/null || cp "$BUILD/bin/$p" "$pack/$p"
      done
      nice -n 19 tar -cf - -C "$pack" . | nice -n 19 xz -T4 -6 > "$REAL_OUT/bin.tar.xz.tmp" &&
        mv "$REAL_OUT/bin.tar.xz.tmp" "$REAL_OUT/bin.tar.xz"
      echo "gpu-fastpath: packed the programs, $(du -h "$REAL_OUT/bin.tar.xz" | cut -f1)"
    ) &
    PACKER=$!
  fi
fi
if [ -n "${GPU_FASTPATH_TESTS:-}" ]; then
  t0=$(date +%s)
  test_bin=$(find "$BUILD" -name worker_test -type f -perm -u+x | head -1)
  if "$test_bin" --gtest_filter="$GPU_FASTPATH_TESTS" > "$LOGS/worker-test.log" 2>&1; then
    echo "PASS worker_test $GPU_FASTPATH_TESTS: $(grep -c '^\[       OK \]' "$LOGS/worker-test.log") passed," \
      "$(grep -c '^\[  SKIPPED \]' "$LOGS/worker-test.log") skipped in $(( $(date +%s) - t0 )) s"
  else
    echo "FAIL worker_test $GPU_FASTPATH_TESTS"
    grep -B2 -A20 "Failure\|FAILED\|what()" "$LOGS/worker-test.log" | head -60
  fi
fi

gpu_serve gpu-fastpath 1 --device cuda:0
trap 'benchd_stop; finish' EXIT
"$BIN/benchctl" --timeout 120 node > "$LOGS/node.txt"
deadline=()
[ -z "${GPU_FASTPATH_BUDGET:-}" ] || deadline=(--deadline $(( T0 + GPU_FASTPATH_BUDGET )))
t0=$(date +%s)
echo "gpu-fastpath: sections start $(( t0 - T0 )) s after the script"
# shellcheck disable=SC2086  # GPU_FASTPATH_FLAGS: flags, word-split on purpose
PYTHONUNBUFFERED=1 python3 bench/compiled_vs_eager.py --fastpath --benchctl "$BIN/benchctl" --device cuda:0 \
  --out "$REAL_OUT/fastpath.md" --json "$REAL_OUT/fastpath.json" "${deadline[@]}" ${GPU_FASTPATH_FLAGS:-} < /dev/null
echo "gpu-fastpath: sections took $(( $(date +%s) - t0 )) s, the script $(( $(date +%s) - T0 )) s on $(cut -d, -f1 "$LOGS/gpu.txt")"
