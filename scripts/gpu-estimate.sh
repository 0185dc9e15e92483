#!/usr/bin/env bash
# Submit's memory check on a GPU machine (after `source .gpu-debs/unpack.sh`):
# builds into build-gpu (or reuses it), starts benchd on the GPU and shows
# that a step whose estimate (Bench.Estimate) exceeds the GPU's memory is
# refused at Submit, FAILED_PRECONDITION naming both figures; that with
# --force it is queued and really runs out of memory on the device; and that
# a step that fits runs. Writes PASS/FAIL lines to $OUT/estimate.txt (also
# printed), the estimates as JSON, benchd.log and gpu.txt.
#   GPU_ESTIMATE_SKIP_BUILD=1  use build-gpu as it is
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup

gpu_serve gpu-estimate "${GPU_ESTIMATE_SKIP_BUILD:-}"
# The check needs the worker's memory figure: wait for cuda:0 to be UP.
for _ in $(seq 1 120); do
  "$BIN/benchctl" node --json | python3 -c 'import json,sys; d=json.load(sys.stdin)["devices"]; sys.exit(not any(x["name"]=="cuda:0" and x.get("workerState")=="WORKER_STATE_UP" and int(x.get("totalMemoryBytes",0))>0 for x in d))' && break
  sleep 1
done
BIG=(--device cuda:0 --preset 2.7B --mode train_step --precision bf16 --batch-size 64 --context-length 1024
  --warmup-steps 1 --steps 2)
FITS=(--device cuda:0 --preset small --mode train_step --precision bf16 --batch-size 4 --context-length 256
  --warmup-steps 2 --steps 5)
{
  "$BIN/benchctl" estimate "${BIG[@]:2:10}" --json > "$OUT/estimate-big.json"
  "$BIN/benchctl" estimate "${BIG[@]:2:10}" | head -40
  if out=$("$BIN/benchctl" submit benchmark "${BIG[@]}" 2>&1); then
    echo "FAIL refused at Submit: it was queued ($out)"
  elif grep -q "memory estimate exceeds cuda:0's memory" <<< "$out"; then
    echo "PASS refused at Submit: $out"
  else
    echo "FAIL refused at Submit: $out"
  fi
  out=$("$BIN/benchctl" --timeout 300 submit benchmark "${BIG[@]}" --force --watch --json < /dev/null 2>&1 || true)
  if grep -Eq '"errorCode": ?8[,}]?' <<< "$out"; then
    echo "PASS --force: queued, and out of memory on the device: $(grep -o '"errorMessage": "[^"]*' <<< "$out" | cut -c1-300)"
  else
    echo "FAIL --force: $(tail -c 600 <<< "$out")"
  fi
  if "$BIN/benchctl" --timeout 300 submit benchmark "${FITS[@]}" --watch < /dev/null > "$OUT/fits.txt" 2>&1; then
    echo "PASS a step that fits runs: $(grep -m1 "succeeded:" "$OUT/fits.txt" || true)"
  else
    echo "FAIL a step that fits: $(tail -5 "$OUT/fits.txt")"
  fi
} 2>&1 | tee "$OUT/estimate.txt"
