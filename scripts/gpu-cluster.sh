#!/usr/bin/env bash
# Issue 25's single-GPU proof (docs/results/cluster-gpu.md): two daemons, each
# in its own network namespace joined by a veth pair, form a cluster. node0
# owns the GPU (cuda:0) and a CPU worker, node1 CPU workers only. A bf16
# benchmark and a profile submitted to node1 for node0/cuda:0 are forwarded,
# run on the GPU, and are read (result, events, artifacts) from both nodes; a
# Gloo group across the nodes' CPU workers runs an all-reduce sweep with the
# exact check: tests/gpu/test_cluster.py (pytest, marker gpu), its report in
# $OUT/cluster.txt (also printed; the script fails if a check does), the jobs
# as JSON, both daemons' logs. Where this machine makes no network namespaces,
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
# The cluster's secret, which every member proves to the others (mode 0600).
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DATA/cluster-secret")
PIDS=()
NODE_NS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  cp "$DATA"/node*.log "$OUT/" 2>/dev/null || true
  node_net_drop
  # Whatever still runs from this data dir (a worker) goes too.
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
    --cluster-secret-file "$DATA/cluster-secret" \
    > "$DATA/node$rank.log" 2>&1
  PIDS+=("$NODE_BG_PID")
}
start_node 0 "$GPU" cpu:0
start_node 1 cpu:0 cpu:1

# The checks (tests/gpu/test_cluster.py), run in node1's namespace: node0 is
# reached over the veth as node1's daemon reaches it.
in_node 1 env BENCHD_BIN_DIR="$BIN" BENCHD_GPU_OUT="$OUT" BENCHD_GPU_CLUSTER_DEVICE="$GPU" \
  BENCHD_GPU_TEST_NODES="${NODE_IP[0]}:${NODE_PORT[0]} ${NODE_IP[1]}:${NODE_PORT[1]}" \
  "${BENCHD_TEST_PYTHON:-python3}" -m pytest -m gpu -v -s -rfEs --tb=short -p no:cacheprovider \
  tests/gpu/test_cluster.py < /dev/null 2>&1 | tee "$OUT/cluster.txt"
