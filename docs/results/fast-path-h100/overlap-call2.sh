#!/usr/bin/env bash
# As run: copied into the root of a clean `git archive` of the tree (.clean-overlap, carried) and
# started from the checkout's root as `bash .clean-overlap/<name>.sh` (call 2 named it overlap-call.sh).
# Call 2 of issue 37's optimizer_overlap measurement (run from the repo root, after unpack.sh).
set -uo pipefail
cd "$(dirname "$0")"
ROOT_OUT=$OUT
F="--peer-contexts 0 --warmup-steps 5 --fast-steps 10"
V="fast=@best;overlap=@best,--optimizer-overlap"
# A: build + tests, 2.7B at 256 and 1024 both ways, the overlapped 2.7B step's profile (eager)
GPU_FASTPATH_TESTS='CudaOptionsTest.OptimizerOverlap*:AdamWImplsTest.Overlapped*:BenchmarkTest.OptimizerOverlap*' \
GPU_FASTPATH_FLAGS="--presets 2.7B --contexts 256,1024 --fast-variants $V --profile-flags @best,--optimizer-overlap --profile-steps 3 $F" \
  timeout 270 scripts/gpu-fastpath.sh
run() {  # name, env..., then flags
  local name=$1; shift
  mkdir -p /tmp/x/$name
  env OUT=/tmp/x/$name GPU_FASTPATH_SKIP_BUILD=1 "$@" timeout 100 scripts/gpu-fastpath.sh > /dev/null 2>&1
  { echo "### $name ($*)"; cat /tmp/x/$name/fastpath.md; grep -i "error\|refused\|failed" /tmp/x/$name/run.log | head -5; echo; } >> $ROOT_OUT/extras.md
  tail -n 20 /tmp/x/$name/fastpath.md
}
# B: the sequential 2.7B step's profile at 256 (same flags without the overlap)
run seqprofile GPU_FASTPATH_FLAGS="--presets 2.7B --contexts 256 --skip fastpath --profile-steps 3 $F"
cp /tmp/x/seqprofile/fastpath.json $ROOT_OUT/seqprofile.json
# C..: the knobs, every preset at 256 and 1024, both variants
for knob in "BENCHD_OVERLAP_SM_CARVEOUT=16" "BENCHD_OVERLAP_SM_CARVEOUT=32" "BENCHD_OVERLAP_PRIORITY=high" "BENCHD_OVERLAP_SM_CARVEOUT=16 BENCHD_OVERLAP_PRIORITY=high"; do
  name=$(echo "$knob" | tr -c 'A-Za-z0-9=\n' _ | sed 's/BENCHD_OVERLAP_//g')
  run "$name" $knob GPU_FASTPATH_FLAGS="--presets 2.7B,xl,small --contexts 256,1024 --fast-variants $V --skip profile $F"
done
# and the default again (no knob), the same cells: a second sample beside call 1's
run default GPU_FASTPATH_FLAGS="--presets 2.7B,xl,small --contexts 256,1024 --fast-variants $V --skip profile $F"
