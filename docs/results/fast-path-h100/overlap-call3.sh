#!/usr/bin/env bash
# As run: copied into the root of a clean `git archive` of the tree (.clean-overlap, carried) and
# started from the checkout's root as `bash .clean-overlap/<name>.sh` (call 2 named it overlap-call.sh).
# Call 3 of issue 37's optimizer_overlap measurement: the knobs that might let
# the updates share SMs with the backward (run from the repo root, after unpack.sh).
set -uo pipefail
cd "$(dirname "$0")"
ROOT_OUT=$OUT
F="--peer-contexts 0 --warmup-steps 5 --fast-steps 10 --skip profile"
V="fast=@best;overlap=@best,--optimizer-overlap"
GPU_FASTPATH_TESTS='CudaOptionsTest.OptimizerOverlap*:CudaOptionsTest.WeightCopy*:AdamWImplsTest.Overlapped*' \
GPU_FASTPATH_FLAGS="--presets 2.7B,xl,small --contexts 256 --fast-variants $V $F" timeout 250 scripts/gpu-fastpath.sh
run() {  # name, env...
  local name=$1; shift
  mkdir -p /tmp/x/$name
  env OUT=/tmp/x/$name GPU_FASTPATH_SKIP_BUILD=1 "$@" GPU_FASTPATH_FLAGS="--presets 2.7B,xl,small --contexts 256 --fast-variants $V $F" \
    timeout 90 scripts/gpu-fastpath.sh > /dev/null 2>&1
  { echo "### $name ($*)"; grep "^| .* | 256 | \(fast\|overlap\) |" /tmp/x/$name/fastpath.md; grep -i "error\|refused\|failed" /tmp/x/$name/run.log | head -5; echo; } >> $ROOT_OUT/extras.md
  tail -n 8 /tmp/x/$name/fastpath.md
}
run carveout100 BENCHD_OVERLAP_SM_CARVEOUT=100
run blocks128 BENCHD_OVERLAP_MAX_BLOCKS=128
run blocks128_carveout16 BENCHD_OVERLAP_MAX_BLOCKS=128 BENCHD_OVERLAP_SM_CARVEOUT=16
run blocks128_high BENCHD_OVERLAP_MAX_BLOCKS=128 BENCHD_OVERLAP_PRIORITY=high
run blocks1056 BENCHD_OVERLAP_MAX_BLOCKS=1056
run blocks528_high BENCHD_OVERLAP_MAX_BLOCKS=528 BENCHD_OVERLAP_PRIORITY=high
