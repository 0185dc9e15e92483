#!/usr/bin/env bash
# Build benchd's FlashAttention-2 kernels into a shared library and run the
# correctness tests and the benchmark on this machine's GPU. Outputs go to
# $OUT (the device tool's folder; default /tmp/flash_out).
#   bench/flash_attention/run_gpu.sh [test|bench|profile|all]   (default all)
set -uo pipefail
cd "$(dirname "$0")/../.."
WHAT=${1:-all}
OUT=${OUT:-/tmp/flash_out}
BUILD=${BUILD:-/tmp/flash_build}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PY=${PY:-python3}
mkdir -p "$OUT" "$BUILD"
export PYTHONUNBUFFERED=1
FLAGS="-std=c++17 -O3 -I. -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=compute_80"
# SKIP_BUILD=1 reuses $BUILD/libbenchd_flash.so of an earlier call in the same machine
if [ "${SKIP_BUILD:-0}" != 1 ]; then
pids=()
for f in worker/flash/flash_attention_kernel.cu worker/flash/flash_attention_fwd.cu \
         worker/flash/flash_attention_bwd.cu worker/flash/flash_attention_fp32.cu \
         worker/flash/flash_attention_sm90.cu \
         bench/flash_attention/flash_shim.cu; do
  n=$(basename "$f" .cu)
  $NVCC $FLAGS -Xptxas -v -c "$f" -o "$BUILD/$n.o" > "$BUILD/$n.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
cat "$BUILD"/*.log | grep -E "error|warning|Used|spill|Compiling entry" | grep -v "0 bytes spill" > "$OUT/ptxas.txt" || true
if [ $rc -ne 0 ]; then cat "$BUILD"/*.log | grep -B2 -A5 error | head -80; echo "BUILD FAILED"; exit 1; fi
$NVCC -shared "$BUILD"/flash_attention_*.o "$BUILD"/flash_shim.o -o "$BUILD/libbenchd_flash.so" || exit 1
# the Hopper kernels must run on wgmma (HGMMA in SASS), not on a slower path
CUOBJDUMP=$(dirname "$NVCC")/cuobjdump
$CUOBJDUMP -sass "$BUILD/flash_attention_sm90.o" 2>/dev/null | grep -oE "HGMMA\.[0-9A-Za-z.]+" | sort | uniq -c | tee "$OUT/hgmma.txt"
# registers actually used (highest R index + 1) and local-memory accesses per kernel
$CUOBJDUMP -sass "$BUILD/flash_attention_sm90.o" 2>/dev/null | awk '
  /Function :/ { f = $3 }
  /STL|LDL/ { stl[f]++ }
  { line = $0; while (match(line, /R[0-9]+/)) { r = substr(line, RSTART + 1, RLENGTH - 1) + 0; if (r > mx[f]) mx[f] = r; line = substr(line, RSTART + RLENGTH) } }
  END { for (f in mx) printf "regs %d local %d %s\n", mx[f] + 1, stl[f] + 0, f }' | sort -k6 > "$OUT/sass_regs.txt" || true
grep -E "Fwd|Bwd" "$OUT/sass_regs.txt" | sed -E 's/_ZN6benchd6worker5flash6detail[0-9]+_GLOBAL__N__[0-9a-f_]+flash_attention_sm90_cu_[0-9a-f]+//' || true
# SASS of the bf16 d64 backward kernels of runs 13- (instruction mix per kernel)
$CUOBJDUMP -sass "$BUILD/flash_attention_sm90.o" 2>/dev/null | awk '/Function :/ { on = ($3 ~ /BwdWs128KernelI13/) } on' > "$OUT/sass_bwd128.txt" || true
awk '/Function :/ { f = $3 } /^ +\/\*[0-9a-f]+\*\// { n[f]++; split($2, a, "."); op[f" "a[1]]++ } END { for (k in op) print op[k], k }' "$OUT/sass_bwd128.txt" | sort -k2,2 -k1,1nr | sed -E 's/_ZN6benchd[^ ]*BwdWs128KernelI13__nv_bfloat16Li64E//' > "$OUT/sass_bwd128_mix.txt" || true
fi
LIB="$BUILD/libbenchd_flash.so"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
status=0
if [ "$WHAT" = test ] || [ "$WHAT" = all ]; then
  timeout ${TEST_TIMEOUT:-240} $PY bench/flash_attention/flash_harness.py test --lib "$LIB" 2>&1 | tee "$OUT/test.log" || status=1
fi
if [ "$WHAT" = bench ] || [ "$WHAT" = all ]; then
  timeout ${BENCH_TIMEOUT:-240} $PY bench/flash_attention/flash_harness.py bench --lib "$LIB" 2>&1 | tee "$OUT/bench.log" || status=1
fi
# PROFILE=1 profiles only after a clean test run (PROFILE=force: always); NCU_EXTRA: more ncu
# arguments (e.g. --metrics for the stall reasons)
if [ "$WHAT" = profile ] || { [ "${PROFILE:-0}" = 1 ] && [ $status = 0 ]; } || [ "${PROFILE:-0}" = force ]; then
  timeout ${PROFILE_TIMEOUT:-150} ncu --clock-control none -k regex:"FwdKernel|BwdKernel|FwdWgmma|FwdWs|BwdWgmma|BwdWs" -c 5 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis --section WarpStateStats ${NCU_EXTRA:-} \
      $PY bench/flash_attention/flash_harness.py profile --lib "$LIB" > "$OUT/ncu.txt" 2>&1 || status=1
  grep -E "FwdKernel|BwdKernel|FwdWgmma|FwdWs|BwdWgmma|BwdWs|Duration|Throughput|Achieved Occupancy|Registers|Warp Cycles Per Issued|Issued Ipc|Stall|Pipe" "$OUT/ncu.txt" | head -80
fi
# NCU_SRC=1: per-instruction warp-stall sampling (SourceCounters) of one launch of the default
# d64 backward main kernel: source.csv (SASS with its samples per stall reason), ncu_src.log
if [ "${NCU_SRC:-0}" = 1 ]; then
  timeout ${PROFILE_TIMEOUT:-150} ncu --clock-control none -k regex:"BwdWs128Kernel" -c 1 \
      --section SourceCounters --section WarpStateStats --section SpeedOfLight \
      --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis ${NCU_EXTRA:-} \
      -f -o "$BUILD/bwd_src" $PY bench/flash_attention/flash_harness.py profile --lib "$LIB" \
      > "$OUT/ncu_src.log" 2>&1 || status=1
  ncu -i "$BUILD/bwd_src.ncu-rep" --page source --csv --print-source sass > "$OUT/source.csv" 2>&1 ||
    ncu -i "$BUILD/bwd_src.ncu-rep" --page source --csv > "$OUT/source.csv" 2>&1
  ncu -i "$BUILD/bwd_src.ncu-rep" --page details >> "$OUT/ncu_src.log" 2>&1
fi
exit $status
