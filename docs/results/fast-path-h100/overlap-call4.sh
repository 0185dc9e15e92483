#!/usr/bin/env bash
# Not run yet (written for the next session): copy into the root of a clean `git archive`
# (.clean-overlap, carried) and start from the checkout's root as `bash .clean-overlap/overlap-call4.sh`.
# Call 4 of issue 37's optimizer_overlap measurement: cuBLASLt, where PyTorch's SM carveout
# reaches the matmuls, with the updates capped to the freed SMs (run from the repo root, after unpack.sh).
set -uo pipefail
cd "$(dirname "$0")"
ROOT_OUT=$OUT
F="--peer-contexts 0 --warmup-steps 5 --fast-steps 10 --skip profile"
V="fast=@best;overlap=@best,--optimizer-overlap"
GPU_FASTPATH_TESTS='CudaOptionsTest.OptimizerOverlap*' \
GPU_FASTPATH_FLAGS="--presets 2.7B,xl,small --contexts 256 --fast-variants $V $F" timeout 250 scripts/gpu-fastpath.sh
run() {  # name, env...
  local name=$1; shift
  mkdir -p /tmp/x/$name
  env OUT=/tmp/x/$name GPU_FASTPATH_SKIP_BUILD=1 "$@" GPU_FASTPATH_FLAGS="--presets 2.7B,xl,small --contexts 256 --fast-variants $V $F" \
    timeout 90 scripts/gpu-fastpath.sh > /dev/null 2>&1
  { echo "### $name ($*)"; grep "^| .* | 256 | \(fast\|overlap\) |" /tmp/x/$name/fastpath.md; grep -i "error\|refused\|failed" /tmp/x/$name/run.log | head -5; echo; } >> $ROOT_OUT/extras.md
  tail -n 8 /tmp/x/$name/fastpath.md
}
run lt BENCHD_BLAS_BACKEND=lt
run lt_carveout100 BENCHD_BLAS_BACKEND=lt BENCHD_OVERLAP_SM_CARVEOUT=100
run lt_carveout16_blocks128 BENCHD_BLAS_BACKEND=lt BENCHD_OVERLAP_SM_CARVEOUT=16 BENCHD_OVERLAP_MAX_BLOCKS=128
run lt_carveout32_blocks256 BENCHD_BLAS_BACKEND=lt BENCHD_OVERLAP_SM_CARVEOUT=32 BENCHD_OVERLAP_MAX_BLOCKS=256
run lt_carveout8_blocks64 BENCHD_BLAS_BACKEND=lt BENCHD_OVERLAP_SM_CARVEOUT=8 BENCHD_OVERLAP_MAX_BLOCKS=64
