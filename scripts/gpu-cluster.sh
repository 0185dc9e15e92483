#!/usr/bin/env bash
# Issue 25's single-GPU proof (docs/results/cluster-gpu.md): two daemons, each
# in its own network namespace joined by a veth pair, form a cluster. node0
# owns the GPU (cuda:0) and a CPU worker, node1 CPU workers only. A bf16
# benchmark and a profile submitted to node1 for node0/cuda:0 are forwarded,
# run on the GPU, and are read (result, events, artifacts) from both nodes; a
# Gloo group across the nodes' CPU workers runs an all-reduce sweep with the
# exact check. PASS/FAIL lines in $OUT/cluster.txt (also printed), the jobs as
# JSON, both daemons' logs. Where this machine makes no network namespaces,
# both daemons share the loopback instead (gpu-lib.sh's node_net says so). Run as root (ip netns), after
# `source .gpu-debs/unpack.sh` on a GPU machine:
#   scripts/gpu-cluster.sh
# Dry run on a CPU machine with the build's binaries:
#   CLUSTER_GPU_DEVICE=cpu:1 CLUSTER_BIN=build/bin CLUSTER_NO_GPU=1 scripts/gpu-cluster.sh
# The namespaces are private and torn down at exit, so the daemons run with
# --insecure there (tests/integration/test_cluster_trust.py covers TLS and
# tokens between nodes).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
GPU=${CLUSTER_GPU_DEVICE:-cuda:0}
DATA=$(mktemp -d /tmp/benchd-cluster-XXXXXX)
PIDS=()
NODE_NS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  cp "$DATA"/node*.log "$OUT/" 2>/dev/null || true
  node_net_drop
  # Daemons started inside the tee'd block below are not in this shell's
  # list: whatever still runs from this data dir goes too.
  stop_data_dir "$DATA"
}
trap cleanup EXIT

gpu_programs gpu-cluster "${CLUSTER_NO_GPU:-}" "${CLUSTER_BIN:-}"

node_net "bcl$$" 10.231.0

# start_node RANK DEVICE... : node RANK's daemon in its namespace.
start_node() {
  local rank=$1
  shift
  local devices=()
  for d in "$@"; do devices+=(--device "$d"); done
  in_node_bg "$rank" env GLOO_SOCKET_IFNAME="${NODE_IF[$rank]}" \
    "$BIN/benchd" --listen "${NODE_IP[$rank]}:${NODE_PORT[$rank]}" --metrics off --insecure \
    --data-dir "$DATA/node$rank" "${devices[@]}" \
    --cluster-coordinator "${NODE_IP[0]}:${NODE_PORT[0]}" --node-rank "$rank" --nodes 2 \
    > "$DATA/node$rank.log" 2>&1
  PIDS+=("$NODE_BG_PID")
}
ctl() {  # ctl RANK ARGS...: benchctl in node RANK's namespace against that node
  local rank=$1
  shift
  in_node "$rank" "$BIN/benchctl" --address "${NODE_IP[$rank]}:${NODE_PORT[$rank]}" "$@"
}
start_node 0 "$GPU" cpu:0
start_node 1 cpu:0 cpu:1

{
  t0=$(date +%s.%N)
  if ctl 1 nodes --wait 2 --wait-timeout 120 > "$OUT/nodes.txt"; then
    echo "PASS cluster formed in $(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')") s (from node1's view):"
    sed 's/^/    /' "$OUT/nodes.txt"
  else
    echo "FAIL cluster did not form: $(cat "$OUT/nodes.txt")"
    exit 1
  fi
  # Every worker up on both nodes (the GPU worker loads CUDA first).
  for _ in $(seq 1 180); do
    ctl 1 nodes --json | python3 -c '
import json, sys
nodes = json.load(sys.stdin)["nodes"]
sys.exit(not all(d.get("workerState") == "WORKER_STATE_UP" for n in nodes for d in n["devices"]))' && break
    sleep 1
  done

  # A bf16 benchmark for node0's GPU, submitted to node1.
  BENCH=(submit benchmark --device "node0/$GPU" --preset small --mode train_step --precision bf16
    --batch-size 4 --context-length 256 --warmup-steps 3 --steps 10)
  if ctl 1 --timeout 600 "${BENCH[@]}" --watch --json < /dev/null > "$OUT/benchmark.json" \
      2> "$OUT/benchmark-progress.txt"; then
    id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$OUT/benchmark.json")
    median=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["result"]["benchmark"]["step"]["median"])' "$OUT/benchmark.json")
    echo "PASS forwarded benchmark $id (small train_step bf16 4x256 on node0/$GPU via node1): median step ${median} s"
    local_id=${id#node0/}
    ctl 0 get "$local_id" > "$OUT/benchmark-node0.txt"
    ctl 1 get "$id" > "$OUT/benchmark-node1.txt"
    if diff <(grep -v "^Job " "$OUT/benchmark-node0.txt" | sed 's#node0/##g') \
            <(grep -v "^Job " "$OUT/benchmark-node1.txt" | sed 's#node0/##g') > /dev/null; then
      echo "PASS the same result from node0 (job $local_id) and node1 (job $id)"
    else
      echo "FAIL node0 and node1 show the job differently (see benchmark-node*.txt)"
    fi
  else
    echo "FAIL forwarded benchmark: $(tail -c 600 "$OUT/benchmark.json")"
  fi

  # A profile for the GPU via node1: its trace fetched through both nodes.
  if ctl 1 --timeout 600 submit profile --device "node0/$GPU" --preset small \
      --precision bf16 --batch-size 4 --context-length 256 --watch --json < /dev/null > "$OUT/profile.json" \
      2> "$OUT/profile-progress.txt"; then
    id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$OUT/profile.json")
    ctl 1 artifacts get "$id" trace.json -o "$DATA/trace-via-node1.json" > /dev/null
    ctl 0 artifacts get "${id#node0/}" trace.json -o "$DATA/trace-on-node0.json" > /dev/null
    if cmp -s "$DATA/trace-via-node1.json" "$DATA/trace-on-node0.json"; then
      echo "PASS profile $id: trace.json ($(stat -c %s "$DATA/trace-on-node0.json") bytes) the same through node1 and node0"
    else
      echo "FAIL profile $id: the traces differ"
    fi
  else
    echo "FAIL forwarded profile: $(tail -c 600 "$OUT/profile.json")"
  fi

  # A Gloo group across the nodes' CPU workers: the exact check.
  if group=$(ctl 0 groups create --devices node0/cpu:0,node1/cpu:0 --backend gloo --json |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'); then
    if ctl 0 --timeout 600 submit collective --group "$group" --op all_reduce \
        --min 1KiB --max 64MiB --factor 4 --watch < /dev/null > "$OUT/allreduce.txt" 2>&1 &&
        grep -q "wrong elements: 0 (all results exact)" "$OUT/allreduce.txt"; then
      echo "PASS cross-node Gloo all-reduce on $group (node0/cpu:0, node1/cpu:0 over ${NODE_IF[0]}, $NODE_NET):"
      awk '/^ *size +world/{on=1} on&&/^$/{exit} on' "$OUT/allreduce.txt" | sed 's/^/    /'
    else
      echo "FAIL cross-node Gloo all-reduce: $(tail -5 "$OUT/allreduce.txt")"
    fi
  else
    echo "FAIL groups create across the nodes"
  fi
} 2>&1 | tee "$OUT/cluster.txt"
! grep -q "^FAIL" "$OUT/cluster.txt"
