#!/usr/bin/env bash
# On a GPU machine (after `source .gpu-debs/unpack.sh`): build with the
# machine's torch, run the unit tests, start benchd on the GPU and run
# benchmarks through benchctl. Writes logs and JSON results to $OUT (or ./gpu-out).
#   GPU_CHECK_CONFIGS  lines of "preset mode precision batch context [more benchctl flags]" to run
#   GPU_CHECK_CTEST    a ctest -R regex to run only some unit tests (default: all)
#   GPU_CHECK_PROFILES lines of "preset mode precision [more flags]" to profile (benchctl submit profile)
#   GPU_CHECK_DEVICES  more devices for the daemon besides the GPUs, e.g. "cpu:0 cpu:1"
#   GPU_CHECK_COLLECTIVE lines of "DEVICES BACKEND" to time all_reduce 1 MiB .. 64 MiB on
#                      (benchctl submit collective), e.g. "cuda:0,cuda:1 nccl" or "cpu:0,cpu:1 gloo"
#   GPU_CHECK_STALL    request kinds (benchmark profile memory) to stop mid-job on cuda:0 (SIGSTOP
#                      on its worker) and see fail at a 10 s progress deadline, the worker replaced
# The checks (stall, parity, notebook) are pytest's (tests/gpu, marker gpu): the script fails
# at the end if one failed.
#   GPU_CHECK_PARITY, GPU_CHECK_WARMUP, GPU_CHECK_AFTEREFFECT, GPU_CHECK_COMPARE: see each stage below
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup
gpu_build gpu-check -DBENCHD_TEST_PYTHON=/nonexistent
ctest --test-dir "$BUILD" -E integration ${GPU_CHECK_CTEST:+-R "$GPU_CHECK_CTEST"} --output-on-failure > "$OUT/ctest.log" 2>&1 || grep -B2 -A25 "Failure\|FAILED\|what()" "$OUT/ctest.log" | head -80
tail -3 "$OUT/ctest.log"

BIN=$BUILD/bin
DATA=$(mktemp -d /tmp/benchd-gpu-XXXXXX)
DEVICE_FLAGS=()
if [ -n "${GPU_CHECK_DEVICES:-}" ]; then
  for d in $(nvidia-smi --query-gpu=index --format=csv,noheader) ; do DEVICE_FLAGS+=(--device "cuda:$d"); done
  for d in $GPU_CHECK_DEVICES; do DEVICE_FLAGS+=(--device "$d"); done
fi
benchd_start --copy-logs "$OUT" "$BIN" "$DATA" "$OUT/benchd.log" --metrics 127.0.0.1:0 "${DEVICE_FLAGS[@]}"
# Every worker up (a CUDA worker takes seconds to start), then the node.
for _ in $(seq 1 180); do
  "$BIN/benchctl" node --json | python3 -c 'import json,sys; d=json.load(sys.stdin)["devices"]; sys.exit(any(x.get("workerState")!="WORKER_STATE_UP" for x in d))' && break
  sleep 1
done
"$BIN/benchctl" --timeout 120 node | tee "$OUT/node.txt"

# The default: the faithful step, and the same step on benchd's fused attention kernels.
CONFIGS=${GPU_CHECK_CONFIGS:-$'small train_step bf16 4 128\nsmall train_step bf16 4 128 --attention fused'}
i=0
while read -r preset mode precision batch ctx extra; do
  [ -n "$preset" ] || continue
  i=$((i + 1))
  echo "=== benchctl submit benchmark --preset $preset --mode $mode --precision $precision --batch-size $batch --context-length $ctx --warmup-steps 5 --steps 10 ${extra:-} --watch"
  # shellcheck disable=SC2086  # extra: more flags, split on spaces
  "$BIN/benchctl" --timeout 60 submit benchmark --preset "$preset" --mode "$mode" --precision "$precision" \
    --batch-size "$batch" --context-length "$ctx" --warmup-steps 5 --steps 10 ${extra:-} --watch || true
done <<< "$CONFIGS"
while read -r devices backend; do
  [ -n "$devices" ] || continue
  echo "=== benchctl submit collective --devices $devices --backend $backend --min 1MiB --max 64MiB --warmup 5 --iters 20 --watch"
  "$BIN/benchctl" --timeout 120 submit collective --devices "$devices" --backend "$backend" \
    --min 1MiB --max 64MiB --warmup 5 --iters 20 --watch || true
done <<< "${GPU_CHECK_COLLECTIVE:-}"
# A stopped worker mid-job (GPU_CHECK_STALL="memory benchmark profile"): the job fails at its
# progress deadline (10 s) with DEADLINE_EXCEEDED, and a new worker serves cuda:0
# (tests/gpu/test_stall.py; report in stall.txt, each job in stall-KIND.json).
checks=0
if [ -n "${GPU_CHECK_STALL:-}" ]; then
  BENCHD_GPU_STALL_KINDS="$GPU_CHECK_STALL" gpu_pytest stall tests/gpu/test_stall.py || checks=$?
fi
"$BIN/benchctl" list --limit 100 --json > "$OUT/jobs.json"
curl -s "http://$BENCHD_METRICS_ADDRESS/metrics" > "$OUT/metrics.txt" || true

# Parity with the Python reference on this GPU (GPU_CHECK_PARITY="small:fp32 small:bf16"):
# tests/gpu/test_parity.py, bench/reference/parity.py on each job's bundle (parity.txt,
# parity-PRESET-PRECISION.{txt,json}).
if [ -n "${GPU_CHECK_PARITY:-}" ]; then
  BENCHD_GPU_PARITY="$GPU_CHECK_PARITY" BENCHD_GPU_TEST_DATA="$DATA" gpu_pytest parity \
    tests/gpu/test_parity.py || checks=$?
fi

# Warm-up study (GPU_CHECK_WARMUP="small xl").
if [ -n "${GPU_CHECK_WARMUP:-}" ]; then
  echo "=== bench/warmup.py --presets $GPU_CHECK_WARMUP"
  python3 bench/warmup.py --benchctl "$BIN/benchctl" --presets $GPU_CHECK_WARMUP | tee "$OUT/warmup.md"
fi

# Profiles (GPU_CHECK_PROFILES: lines of "preset mode precision [more flags]", batch 4,
# context 256): each phase's kernels, kernel time and idle time, as benchctl prints them.
while read -r preset mode precision extra; do
  [ -n "$preset" ] || continue
  echo "=== benchctl submit profile --preset $preset --mode $mode --precision $precision --batch-size 4 --context-length 256 ${extra:-} --watch"
  # shellcheck disable=SC2086  # extra: more flags, split on spaces
  "$BIN/benchctl" --timeout 120 submit profile --preset "$preset" --mode "$mode" --precision "$precision" \
    --batch-size 4 --context-length 256 ${extra:-} --watch || true
  "$BIN/benchctl" --timeout 60 evict --all > /dev/null || true
done <<< "${GPU_CHECK_PROFILES:-}"

# Benchmarks before and after profile requests on this worker, ending with a CUDA graph
# (GPU_CHECK_AFTEREFFECT="small bf16": preset and precision of a train_step).
if [ -n "${GPU_CHECK_AFTEREFFECT:-}" ]; then
  read -r preset precision <<< "$GPU_CHECK_AFTEREFFECT"
  echo "=== bench/profile_aftereffect.py --preset $preset --precision $precision --cuda-graph"
  "$BIN/benchctl" --timeout 60 evict --all > /dev/null || true
  python3 bench/profile_aftereffect.py --benchctl "$BIN/benchctl" --preset "$preset" --precision "$precision" \
    --profiles "${GPU_CHECK_AFTEREFFECT_PROFILES:-2}" --cuda-graph | tee "$OUT/aftereffect.md"
  "$BIN/benchctl" --timeout 60 evict --all > /dev/null || true
fi

# benchd vs the Python reference (GPU_CHECK_COMPARE="--presets small medium ...").
# Several runs separated by ';', e.g. "--presets small ; --presets small --modes train_step
# --precisions bf16 --compile small/train_step/bf16 --benchd-flags=--attention=flash,--optimizer=foreach"
# (commas in --benchd-flags= stand for spaces, so the value stays one word here).
if [ -n "${GPU_CHECK_COMPARE:-}" ]; then
  n=0
  IFS=';' read -ra runs <<< "$GPU_CHECK_COMPARE"
  for run in "${runs[@]}"; do
    n=$((n + 1))
    read -ra argv <<< "$run"
    argv=("${argv[@]//,/ }")
    echo "=== bench/compare.py ${argv[*]}"
    python3 bench/compare.py --benchctl "$BIN/benchctl" "${argv[@]}" | tee "$OUT/compare-$n.md"
  done
fi

# The quickstart notebook against this GPU daemon (GPU_CHECK_NOTEBOOK=docs/notebooks/quickstart.ipynb;
# with GPU_CHECK_DEVICES="cpu:0 cpu:1" for its collective). The benchd package and nbclient with
# its kernel travel as wheels in .whl (carry it): python3 -m build --wheel -o .whl client/python,
# and pip download of nbclient, nbformat, ipykernel for Python 3.12 (DEVELOPERS.md).
if [ -n "${GPU_CHECK_NOTEBOOK:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/nb-site .whl/*.whl
  python3 -m pip show grpcio protobuf torch pandas | grep -E "^(Name|Version)" | paste - - \
    | tee "$OUT/python-versions.txt"
  # tests/gpu/test_notebook.py: docs/notebooks/run_notebook.py, the outputs in notebook.ipynb.
  BENCHD_GPU_NOTEBOOK="$GPU_CHECK_NOTEBOOK" BENCHD_GPU_NOTEBOOK_SITE=/tmp/nb-site \
    gpu_pytest notebook tests/gpu/test_notebook.py || checks=$?
fi
exit "$checks"
