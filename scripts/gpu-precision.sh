#!/usr/bin/env bash
# The precision request on a GPU machine (after `source .gpu-debs/unpack.sh`):
# builds benchd, benchd-worker and benchctl into build-gpu (or reuses it),
# starts benchd on the GPU and runs the CS336 mixed_precision experiments on
# cuda:0 with the defaults (0.01 added 1000 times in the write-up's four
# loops; the ToyModel under CUDA autocast in bf16 and fp16), then checks the
# figures against the write-up: fp16 accumulation 9.953125, fp32 within 1e-3
# of 10, mixed = mixed_cast = 10.00213623046875; parameters and gradients
# fp32, fc1 and the logits in the autocast dtype, the layer norm's output and
# the loss fp32 (CUDA autocast's fp32 list). A CPU cell runs beside it, so the
# two autocasts' tables can be set side by side.
# Everything lands in $OUT (default gpu-out):
#   precision.md           both tables as benchctl prints them (cuda:0, then cpu:0)
#   precision.json         the cuda:0 Job (benchctl --json)
#   precision-cpu.json     the cpu:0 Job
#   precision.csv          the cuda:0 tables as CSV (benchctl get --csv)
#   precision-checks.txt   PASS/FAIL lines (also printed)
#   benchd.log, node.txt, gpu.txt, build.log
#   ctest-precision.log    with GPU_PRECISION_CTEST=1
# GPU_PRECISION_SKIP_BUILD=1  use build-gpu as it is
# GPU_PRECISION_CTEST=1       also build worker_test and run the precision unit
#                             tests (CudaPrecisionTest: the same checks in C++)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup

if [ -n "${GPU_PRECISION_CTEST:-}" ]; then
  gpu_ctest precision "${GPU_PRECISION_SKIP_BUILD:-}" "CudaPrecision|PrecisionRun"
  GPU_PRECISION_SKIP_BUILD=1
fi
gpu_serve gpu-precision "${GPU_PRECISION_SKIP_BUILD:-}" --device cuda:0 --device cpu:0
"$BIN/benchctl" --timeout 120 node | tee "$OUT/node.txt"

{
  echo "## cuda:0"
  echo
  echo '```'
  "$BIN/benchctl" --timeout 300 submit precision --device cuda:0 --watch < /dev/null 2>&1
  echo '```'
} | tee "$OUT/precision.md"
"$BIN/benchctl" --timeout 300 submit precision --device cuda:0 --watch --json < /dev/null \
  > "$OUT/precision.json"
"$BIN/benchctl" get "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' \
  "$OUT/precision.json")" --csv > "$OUT/precision.csv"
{
  echo
  echo "## cpu:0 (CPU autocast, for comparison)"
  echo
  echo '```'
  "$BIN/benchctl" --timeout 300 submit precision --device cpu:0 --watch < /dev/null 2>&1
  echo '```'
} | tee -a "$OUT/precision.md"
"$BIN/benchctl" --timeout 300 submit precision --device cpu:0 --watch --json < /dev/null \
  > "$OUT/precision-cpu.json"

python3 - "$OUT/precision.json" <<'PY' | tee "$OUT/precision-checks.txt"
import json
import sys

job = json.load(open(sys.argv[1]))
res = job.get("result", {}).get("precision", {})
ok = True


def check(name, cond, detail):
    global ok
    ok &= bool(cond)
    print(f"{'PASS' if cond else 'FAIL'} {name}: {detail}")


check("job", job.get("state") == "JOB_STATE_SUCCEEDED", job.get("state"))
rows = {r["name"]: r for r in res.get("accumulation", [])}
get = lambda n: float(rows.get(n, {}).get("result", "nan"))
check("fp16 accumulation", get("fp16") == 9.953125, get("fp16"))
check("fp32 accumulation", abs(get("fp32") - 10) < 1e-3, get("fp32"))
check("mixed accumulation", get("mixed") == get("mixed_cast") == 10.00213623046875,
      (get("mixed"), get("mixed_cast")))
for run in res.get("autocast", []):
    low = {"PRECISION_BF16": "bfloat16", "PRECISION_FP16": "float16"}[run["autocastDtype"]]
    d = {t["tensor"]: t["dtype"] for t in run["tensors"]}
    want = {"fc1.weight": "float32", "ln.weight": "float32", "ln.bias": "float32",
            "fc2.weight": "float32", "fc1": low, "relu": low, "ln": "float32", "fc2": low,
            "loss": "float32", "fc1.weight.grad": "float32", "ln.weight.grad": "float32",
            "ln.bias.grad": "float32", "fc2.weight.grad": "float32"}
    check(f"autocast {low} on {run['autocastDeviceType']}",
          d == want and run["autocastDeviceType"] == "cuda", d)
check("two autocast runs", len(res.get("autocast", [])) == 2, len(res.get("autocast", [])))
sys.exit(0 if ok else 1)
PY
echo "gpu-precision: done on $(cut -d, -f1 "$OUT/gpu.txt")"
