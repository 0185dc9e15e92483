#!/usr/bin/env bash
# Data-parallel training on a machine with 2 or more GPUs (after `source
# .gpu-debs/unpack.sh`, .gpu-debs packed with GPU_DEBS_EXTRA="libgloo-dev
# libssl-dev"): builds build-gpu with the tests, runs the CUDA tests named by
# GPU_DDP_CTEST (default: the DDP engine on two GPUs and the fused attention
# kernels), then starts benchd on the GPUs and runs bench/ddp_compare.py
# (benchd's ddp job beside PyTorch DDP and ZeRO-1 on the same GPUs) for each
# precision of GPU_DDP_PRECISIONS (default "fp32 bf16").
# Outputs in $OUT (default gpu-out): ctest-ddp.log, ddp-<precision>.txt/.json,
# ddp-timeline-job<N>.svg, rank 0's Kineto traces (job<N>-ddp-run<R>-rank0.trace.json.gz),
# benchd.log and the workers' logs.
#   GPU_DDP_PRESET       model preset (default xl, the course's)
#   GPU_DDP_CONTEXT      context length (default 128)
#   GPU_DDP_BATCH        global batch (default 8)
#   GPU_DDP_STEPS        measured steps (default 10), warm-up 3
#   GPU_DDP_WORLD        ranks (default 2)
#   GPU_DDP_VARIANTS, GPU_DDP_BUCKET_MB, GPU_DDP_OPTIMIZERS, GPU_DDP_OPTIMIZER_IMPL
#                        benchd's runs (defaults: every variant; 1,10,25,100,1000;
#                        adamw,sharded_adamw; faithful)
#   GPU_DDP_COMPRESSIONS benchd's --gradient-compressions (default none; none,bf16: both)
#   GPU_DDP_AUTOGRAD     1: benchd's runs through the autograd engine (--autograd; add
#                        reducer to GPU_DDP_VARIANTS for c10d's Reducer)
#   GPU_DDP_PEERS        the PyTorch peers to run: ddp,zero (default), any of ddp, zero,
#                        ddp_bf16 (DDP + bf16_compress_hook), or none
#   GPU_DDP_TAG          prefix of every output file (several runs into one $OUT)
#   GPU_DDP_SKIP_BUILD   1: use $BUILD as it is
#   GPU_DDP_CTEST        ctest regex, or none: build without tests and run none
# The daemon's environment reaches its workers: NCCL_* or BENCHD_WORKER_THREADS exported
# before this script apply to benchd's side.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup
# NCCL's NVLS (multicast) stays off on these machines (KINDS.md).
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} TORCH_SYMM_MEM_DISABLE_MULTICAST=1
TAG=${GPU_DDP_TAG:-}
if [ -n "${GPU_DDP_SKIP_BUILD:-}" ] && [ "${GPU_DDP_CTEST:-}" = none ]; then
  echo "gpu-ddp: using $BUILD as it is"
elif [ "${GPU_DDP_CTEST:-}" = none ]; then
  gpu_build gpu-ddp -DBENCHD_BUILD_TESTS=OFF --target benchd benchd-worker benchctl
else
  gpu_ctest ddp "${GPU_DDP_SKIP_BUILD:-}" "${GPU_DDP_CTEST:-CudaDdp|Fused}"
fi

W=${GPU_DDP_WORLD:-2}
DEVS=$(seq -s, -f "cuda:%g" 0 $((W - 1)))
DEVARGS=""
for i in $(seq 0 $((W - 1))); do DEVARGS="$DEVARGS --device cuda:$i"; done
DATA=$(mktemp -d /tmp/benchd-gpu-ddp-XXXXXX)
# shellcheck disable=SC2086  # DEVARGS: --device flags, split on spaces
benchd_start --copy-logs "$OUT" "$BUILD/bin" "$DATA" "$OUT/${TAG}benchd.log" $DEVARGS
for _ in $(seq 1 300); do
  up=$("$BUILD/bin/benchctl" node --json | python3 -c 'import json,sys; print(sum(d.get("workerState")=="WORKER_STATE_UP" for d in json.load(sys.stdin)["devices"]))')
  [ "$up" -ge "$W" ] && break; sleep 1
done
for P in ${GPU_DDP_PRECISIONS:-fp32 bf16}; do
  timeout 1200 python3 bench/ddp_compare.py --benchctl "$BUILD/bin/benchctl" --devices "$DEVS" \
    --preset "${GPU_DDP_PRESET:-xl}" --precision "$P" --context-length "${GPU_DDP_CONTEXT:-128}" \
    --global-batch "${GPU_DDP_BATCH:-8}" --steps "${GPU_DDP_STEPS:-10}" \
    --variants "${GPU_DDP_VARIANTS:-naive,flat,overlap,bucketed}" \
    --bucket-mb "${GPU_DDP_BUCKET_MB:-1,10,25,100,1000}" \
    --optimizers "${GPU_DDP_OPTIMIZERS:-adamw,sharded_adamw}" \
    --gradient-compressions "${GPU_DDP_COMPRESSIONS:-none}" \
    --optimizer-impl "${GPU_DDP_OPTIMIZER_IMPL:-faithful}" --peers "${GPU_DDP_PEERS:-ddp,zero}" \
    ${GPU_DDP_AUTOGRAD:+--autograd} \
    --json-out "$OUT/${TAG}ddp-$P.json" 2>&1 | tee "$OUT/${TAG}ddp-$P.txt" || echo "FAIL ddp_compare $P"
done
# The timelines' pictures and rank 0's traces (gzipped) of every job.
for d in "$DATA"/artifacts/*/; do
  j=$(basename "$d")
  [ -f "$d/ddp-timeline.svg" ] && cp "$d/ddp-timeline.svg" "$OUT/${TAG}ddp-timeline-job$j.svg"
  for t in "$d"/ddp-run*-rank0.trace.json; do
    [ -f "$t" ] && gzip -c "$t" > "$OUT/${TAG}job$j-$(basename "$t").gz"
  done
done
benchd_stop
