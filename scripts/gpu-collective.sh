#!/usr/bin/env bash
# The collective request on a GPU machine (after `source .gpu-debs/unpack.sh`,
# with .gpu-debs packed by GPU_DEBS_EXTRA=libgloo-dev ../shared/gpu/pack-debs.sh:
# the worker needs Gloo's headers): builds into build-gpu (or reuses it),
# starts benchd on every GPU plus as many cpu:N workers, and for 2 ranks (and
# 4 where there are 4 GPUs) runs all-reduce 1 MiB .. 1 GiB:
#   - NCCL on GPUs through benchd (a resident group, created and timed first,
#     then two requests on it: the second shows no set-up) against
#     torch.distributed (bench/collective_compare.py), and
#   - Gloo on CPU workers the same way (the CS336 NCCL+GPU vs Gloo+CPU),
#   - one benchd sweep over backends and world sizes with its three plots.
# Outputs in $OUT (default gpu-out): compare-*.txt/json, groups.txt,
# sweep.txt, svg/*.svg, benchd.log and the workers' logs.
#   GPU_COLLECTIVE_SKIP_BUILD=1   use build-gpu as it is
#   GPU_COLLECTIVE_MIN            smallest size (default 1MiB)
#   GPU_COLLECTIVE_MAX            largest size (default 1GiB)
#   GPU_COLLECTIVE_FACTOR         each size this times the last (default 2; the seeds'
#                                 grid 1 MB, 10 MB, 100 MB, 1 GB: MIN=1MB MAX=1GB FACTOR=10)
#   GPU_COLLECTIVE_GLOO_MAX       largest Gloo size (default 256MiB: Gloo on CPUs is slow)
#   GPU_COLLECTIVE_ITERS          measured iterations (default 20), warm-up 5
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT/svg"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
MIN=${GPU_COLLECTIVE_MIN:-1MiB}
MAX=${GPU_COLLECTIVE_MAX:-1GiB}
FACTOR=${GPU_COLLECTIVE_FACTOR:-2}
GLOO_MAX=${GPU_COLLECTIVE_GLOO_MAX:-256MiB}
ITERS=${GPU_COLLECTIVE_ITERS:-20}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1 || true
NGPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
[ "$NGPU" -ge 2 ] || { echo "gpu-collective: needs 2 or more GPUs, found $NGPU"; exit 1; }

if [ -z "${GPU_COLLECTIVE_SKIP_BUILD:-}" ]; then
  gpu_build gpu-collective -DBENCHD_TEST_PYTHON=/nonexistent
  grep "benchd-worker:" "$OUT/configure.log" || true
fi
BIN=$BUILD/bin

WORLDS="2"; [ "$NGPU" -ge 4 ] && WORLDS="2 4"
TOP=$(( NGPU >= 4 ? 4 : 2 ))
DEVARGS=""; GPUS=""; CPUS=""
for i in $(seq 0 $((TOP - 1))); do
  DEVARGS="$DEVARGS --device cuda:$i --device cpu:$i"
  GPUS="$GPUS${GPUS:+,}cuda:$i"; CPUS="$CPUS${CPUS:+,}cpu:$i"
done
DATA=$(mktemp -d /tmp/benchd-gpu-collective-XXXXXX)
# NCCL's NVLS (multicast) stays off on these machines (KINDS.md); unpack.sh sets it too.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
# shellcheck disable=SC2086  # DEVARGS: --device flags, split on spaces
benchd_start --copy-logs "$OUT" "$BIN" "$DATA" "$OUT/benchd.log" --metrics 127.0.0.1:0 $DEVARGS
for _ in $(seq 1 300); do
  up=$("$BIN/benchctl" node --json | python3 -c 'import json,sys; print(sum(d.get("workerState")=="WORKER_STATE_UP" for d in json.load(sys.stdin)["devices"]))')
  [ "$up" -ge $((2 * TOP)) ] && break; sleep 1
done
"$BIN/benchctl" --timeout 120 node | tee "$OUT/node.txt"

for W in $WORLDS; do
  G=$(seq -s, -f "cuda:%g" 0 $((W - 1))); C=$(seq -s, -f "cpu:%g" 0 $((W - 1)))
  for pair in "nccl $G $MAX" "gloo $C $GLOO_MAX"; do
    set -- $pair; BACKEND=$1; DEVS=$2; TOPSIZE=$3
    echo "=== $BACKEND x$W on $DEVS: group set-up, then all_reduce $MIN..$TOPSIZE (x$FACTOR) twice on it, then torch.distributed"
    t0=$(date +%s.%N)
    "$BIN/benchctl" --timeout 600 groups create --devices "$DEVS" --backend "$BACKEND" --json > "$OUT/group-$BACKEND-$W.json"
    GID=$(python3 -c 'import json,sys; g=json.load(open(sys.argv[1])); print(g["id"]); print("setup_seconds", g.get("setupSeconds"), file=sys.stderr)' "$OUT/group-$BACKEND-$W.json")
    echo "created group $GID in $(python3 -c "print(round($(date +%s.%N)-$t0,3))") s (wall, benchctl)"
    # First request on the resident group (the compare), then a second one: neither pays set-up.
    timeout 1800 python3 bench/collective_compare.py --benchctl "$BIN/benchctl" --address "$BENCHD_ADDRESS" \
      --devices "$DEVS" --backend "$BACKEND" --group "$GID" --op all_reduce --min "$MIN" --max "$TOPSIZE" --factor "$FACTOR" \
      --warmup 5 --iters "$ITERS" --json "$OUT/compare-$BACKEND-$W.json" < /dev/null | tee "$OUT/compare-$BACKEND-$W.txt" || echo "FAIL compare $BACKEND x$W"
    "$BIN/benchctl" submit collective --group "$GID" --sizes 1MiB,64MiB --warmup 2 --iters 5 --watch < /dev/null \
      > "$OUT/second-request-$BACKEND-$W.txt" 2>&1 || echo "FAIL second request $BACKEND x$W"
    grep -E "^group|resident" "$OUT/second-request-$BACKEND-$W.txt" || true
    # A transient group for comparison: the set-up a request without a resident group pays.
    "$BIN/benchctl" submit collective --devices "$DEVS" --backend "$BACKEND" --sizes 1MiB --warmup 2 --iters 5 --watch \
      < /dev/null \
      > "$OUT/transient-$BACKEND-$W.txt" 2>&1 || echo "FAIL transient $BACKEND x$W"
    grep -E "^group" "$OUT/transient-$BACKEND-$W.txt" || true
  done
done
"$BIN/benchctl" groups list | tee "$OUT/groups.txt"

echo "=== one request: backends x world sizes (NCCL on GPUs and Gloo on GPUs' tensors), 3 plots"
WS=$(echo $WORLDS | tr ' ' ,)
timeout 1800 "$BIN/benchctl" submit collective --devices "$GPUS" --backends nccl,gloo --world-sizes "$WS" \
  --min 1MiB --max 256MiB --factor 4 --warmup 3 --iters 10 --watch --svg-dir "$OUT/svg" < /dev/null \
  > "$OUT/sweep.txt" 2>&1 || echo "FAIL sweep"
sed -n '/^all_reduce/,$p' "$OUT/sweep.txt"
curl -s "http://$BENCHD_METRICS_ADDRESS/metrics" \
  | grep benchd_collective_bus_bandwidth > "$OUT/metrics.txt" || true
echo "gpu-collective: done; outputs in $OUT"
