#!/usr/bin/env bash
# Issue 26: NCCL bus bandwidth when the two ranks of a group sit on two nodes,
# next to the same two GPUs in one daemon. Two daemons, each owning one GPU,
# each in its own network namespace joined by a veth pair, form a cluster with
# the cluster flags; one NCCL group across them (NCCL over sockets: P2P, SHM
# and IB off, the veth named, NVLS off) runs an all-reduce sweep with the exact
# check (where this machine makes no network namespaces, both daemons share the
# loopback instead: gpu-lib.sh's node_net, and the output says which). Then one
# daemon with both GPUs (NVLink) runs the same sweep. torch.distributed runs
# the cross-node sweep too, one rank per node in the same environment
# (bench/collective_compare.py --rank), as the reference beside benchd's, and
# raw TCP over the same link gives the socket path's ceiling. Then one
# daemon is killed mid-sweep (the failure must name its node), restarted, and
# the sweep passes again. Tables in $OUT/cross-node.txt, the jobs as JSON,
# the daemons' logs; the checks on them are tests/gpu/test_cross_node.py
# (report in cross-node-checks.txt; the script fails if one fails). Run as root on a machine with two GPUs
# (after `source .gpu-debs/unpack.sh`; carry .netdebs too where the machine
# has no `ip`, see gpu-lib.sh's ip_from_debs):
#   scripts/gpu-cross-node.sh
# Dry run on a CPU machine (Gloo between CPU workers, smaller sizes):
#   CROSS_DEVICES="cpu:0 cpu:1" CROSS_BACKEND=gloo CROSS_MAX=16MiB CROSS_BIN=build/bin \
#     CROSS_NO_GPU=1 PYTHON=.venv/bin/python scripts/gpu-cross-node.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
read -r -a DEVS <<< "${CROSS_DEVICES:-cuda:0 cuda:1}"
BACKEND=${CROSS_BACKEND:-nccl}
MIN=${CROSS_MIN:-1KiB}
MAX=${CROSS_MAX:-1GiB}
DATA=$(mktemp -d /tmp/benchd-cross-XXXXXX)
# The cluster's secret, which every member proves to the others (mode 0600).
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DATA/cluster-secret")
declare -A PID=()
NODE_NS=()

stop_node() {  # stop_node RANK [SIGNAL]
  local pid=${PID[$1]:-}
  [ -n "$pid" ] || return 0
  kill "-${2:-TERM}" "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "PID[$1]"
}
cleanup() {
  for r in "${!PID[@]}"; do stop_node "$r"; done
  # The daemons' logs and their workers' (NCCL's INFO lines name the transport).
  find "$DATA" -name '*.log' 2>/dev/null | while read -r f; do
    cp "$f" "$OUT/$(tr / _ <<< "${f#"$DATA"/}")"
  done
  node_net_drop
  # Daemons started inside the tee'd block below are not in this shell's
  # list: whatever still runs from this data dir goes too.
  stop_data_dir "$DATA"
}
trap cleanup EXIT

gpu_programs gpu-cross-node "${CROSS_NO_GPU:-}" "${CROSS_BIN:-}"

node_net "bxn$$" 10.232.0

# NCCL between the nodes goes over the sockets of the veth (or the loopback) only.
NCCL_SOCKETS=(NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1
  NCCL_NET=Socket NCCL_DEBUG=INFO "NCCL_DEBUG_SUBSYS=INIT,NET")
# node_bg RANK CMD...: CMD in the background in node RANK with the node's
# network environment: NCCL and Gloo on its interface only, and NCCL_HOSTID
# making each node a host of its own to NCCL, as on two machines (the
# namespaces share this host's hostname and boot id).
node_bg() {
  local r=$1
  shift
  in_node_bg "$r" env "${NCCL_SOCKETS[@]}" NCCL_SOCKET_IFNAME="${NODE_IF[$r]}" \
    GLOO_SOCKET_IFNAME="${NODE_IF[$r]}" NCCL_HOSTID="benchd-node$r" "$@"
}
start_node() {  # start_node RANK: the daemon of node RANK in its namespace, owning DEVS[RANK]
  local r=$1
  node_bg "$r" "$BIN/benchd" --listen "${NODE_IP[$r]}:${NODE_PORT[$r]}" --metrics off --insecure \
    --data-dir "$DATA/node$r" --device "${DEVS[$r]}" --cluster-lost-after 5 \
    --cluster-coordinator "${NODE_IP[0]}:${NODE_PORT[0]}" --node-rank "$r" --nodes 2 \
    --cluster-secret-file "$DATA/cluster-secret" \
    >> "$DATA/node$r.log" 2>&1
  PID[$r]=$NODE_BG_PID
}
ctl() {  # ctl RANK ARGS...: benchctl against node RANK, from its namespace
  local r=$1
  shift
  in_node "$r" "$BIN/benchctl" --address "${NODE_IP[$r]}:${NODE_PORT[$r]}" "$@"
}
workers_up() {  # workers_up RANK: every worker of the cluster UP, as node RANK sees it
  for _ in $(seq 1 180); do
    ctl "$1" nodes --json | python3 -c '
import json, sys
nodes = json.load(sys.stdin)["nodes"]
sys.exit(not all(n["state"] == "NODE_STATE_READY" and n["devices"] and
                 all(d.get("workerState") == "WORKER_STATE_UP" for d in n["devices"]) for n in nodes))' \
      2> /dev/null && return 0
    sleep 1
  done
  return 1
}
sweep() {  # sweep RANK GROUP NAME: the all-reduce sweep on GROUP through node RANK
  ctl "$1" --timeout 900 submit collective --group "$2" --op all_reduce --min "$MIN" --max "$MAX" \
    --watch --json < /dev/null > "$OUT/$3.json" 2> "$OUT/$3-progress.txt"
}
table() {  # table NAME: size, median µs, busbw and wrong elements of a sweep's JSON
  python3 - "$OUT/$1.json" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))
print(f"    {'size bytes':>12}  {'median us':>10}  {'p99 us':>10}  {'busbw GB/s':>10}  wrong")
for row in job["result"]["collective"]["rows"]:
    d = row["duration"]
    print(f"    {int(row['sizeBytes']):>12}  {d['median'] * 1e6:>10.1f}  {d['p99'] * 1e6:>10.1f}"
          f"  {row.get('busbwGbps', 0):>10.3f}  {row.get('wrongElements', '0')}")
PY
}
reference() {  # torch.distributed on the same two devices, one rank per node, the same NCCL env
  local r pids=() failed=0
  local sweep=(--devices "${DEVS[0]},${DEVS[1]}" --backend "$BACKEND" --op all_reduce
    --min "$MIN" --max "$MAX" --in-place)
  for r in 0 1; do
    node_bg "$r" "${PYTHON:-python3}" bench/collective_compare.py "${sweep[@]}" --rank "$r" \
      --store "${NODE_IP[0]}:7600" --torch-out "$OUT/torch-cross-node.json" \
      > "$OUT/torch-rank$r.log" 2>&1 < /dev/null
    pids+=("$NODE_BG_PID")
  done
  for r in 0 1; do wait "${pids[$r]}" || failed=1; done
  [ "$failed" = 0 ] && python3 bench/collective_compare.py "${sweep[@]}" \
    --compare-job "$OUT/cross-node.json" --torch-rows "$OUT/torch-cross-node.json" \
    --json "$OUT/cross-node-vs-torch.json" > "$OUT/cross-node-vs-torch.txt"
}

tcp_ceiling() {  # tcp_ceiling STREAMS: raw TCP from node1 to node0 over the same link
  in_node_bg 0 python3 bench/tcp_throughput.py --listen "${NODE_IP[0]}:7601" --streams "$1" \
    > "$OUT/tcp-$1.json" 2> "$OUT/tcp-$1.log"
  local receiver=$NODE_BG_PID
  in_node 1 python3 bench/tcp_throughput.py --connect "${NODE_IP[0]}:7601" --streams "$1" \
    --bytes "${CROSS_TCP_BYTES:-4GiB}" 2>> "$OUT/tcp-$1.log" && wait "$receiver" &&
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
print("    %d TCP stream(s), %.0f GiB: %.2f GB/s" % (r["streams"], r["bytes"] / 2**30, r["gbps"]))' \
      "$OUT/tcp-$1.json"
}

{
  start_node 0
  start_node 1
  if ctl 1 nodes --wait 2 --wait-timeout 120 > /dev/null && workers_up 1; then
    echo "the two daemons formed a cluster"
  else
    echo "gpu-cross-node: no cluster: $(ctl 1 nodes 2>&1 | tail -5)" >&2
    exit 1
  fi
  group=$(ctl 0 groups create --devices "node0/${DEVS[0]},node1/${DEVS[1]}" --backend "$BACKEND" \
    --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  if sweep 0 "$group" cross-node; then
    echo "cross-node $BACKEND all-reduce $MIN..$MAX (node0/${DEVS[0]}, node1/${DEVS[1]} over ${NODE_IF[0]}, $NODE_NET):"
    table cross-node
    if reference; then
      echo "torch.distributed on the same ranks across the nodes, beside benchd's sweep:"
      sed 's/^/    /' "$OUT/cross-node-vs-torch.txt"
    else
      echo "the torch.distributed reference failed: $(tail -3 "$OUT"/torch-rank*.log)"
    fi
    if ceiling=$(tcp_ceiling 1 && tcp_ceiling 2); then
      echo "raw TCP over the same link (bench/tcp_throughput.py), the socket path's ceiling:"
      echo "$ceiling"
    else
      echo "raw TCP over the link failed: $(tail -3 "$OUT"/tcp-*.log)"
    fi
  else
    echo "the cross-node sweep failed: $(tail -c 600 "$OUT/cross-node.json")"
  fi

  # One daemon killed mid-sweep: the failure names its node; then it comes back.
  ctl 0 --timeout 900 submit collective --group "$group" --op all_reduce --min "$MIN" --max "$MAX" \
    --iters "${CROSS_KILL_ITERS:-1000}" --json < /dev/null > "$OUT/killed-submit.json"
  id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$OUT/killed-submit.json")
  for _ in $(seq 1 120); do  # killed once the sweep runs, not while it is queued
    ctl 0 get "$id" --json | grep -q '"JOB_STATE_RUNNING"' && break
    sleep 0.5
  done
  sleep 2
  stop_node 1 KILL
  ctl 0 --timeout 900 watch "$id" > /dev/null 2>&1 || true
  ctl 0 get "$id" --json > "$OUT/killed.json" || true
  echo "node1's daemon killed mid-sweep; the job: $(python3 -c 'import json,sys
j = json.load(open(sys.argv[1])); print(j.get("state"), j.get("errorMessage", ""))' "$OUT/killed.json" 2>&1)"
  start_node 1
  if workers_up 0; then
    group=$(ctl 0 groups create --devices "node0/${DEVS[0]},node1/${DEVS[1]}" \
      --backend "$BACKEND" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
    sweep 0 "$group" after-restart || true
    echo "after node1's restart: the sweep on a new group $group ran"
  else
    echo "node1 did not come back"
  fi

  # The same two devices in one daemon (NVLink between the GPUs).
  stop_node 0
  stop_node 1
  in_node_bg 0 env NCCL_NVLS_ENABLE=0 "$BIN/benchd" --listen "127.0.0.1:${NODE_PORT[0]}" \
    --metrics off --data-dir "$DATA/one" --device "${DEVS[0]}" --device "${DEVS[1]}" \
    >> "$DATA/one-daemon.log" 2>&1
  PID[2]=$NODE_BG_PID
  for _ in $(seq 1 180); do
    in_node 0 "$BIN/benchctl" --address "127.0.0.1:${NODE_PORT[0]}" node --json 2>/dev/null |
      python3 -c 'import json,sys; sys.exit(not all(d.get("workerState")=="WORKER_STATE_UP" for d in json.load(sys.stdin)["devices"]))' \
        2> /dev/null && break  # nothing to read while the daemon starts
    sleep 1
  done
  if in_node 0 "$BIN/benchctl" --address "127.0.0.1:${NODE_PORT[0]}" --timeout 900 \
      submit collective --devices "${DEVS[0]},${DEVS[1]}" --backend "$BACKEND" --op all_reduce \
      --min "$MIN" --max "$MAX" --watch --json < /dev/null > "$OUT/one-daemon.json" \
      2> "$OUT/one-daemon-progress.txt"; then
    echo "one daemon, both devices ($BACKEND in one node):"
    table one-daemon
  else
    echo "the one-daemon sweep failed: $(tail -c 600 "$OUT/one-daemon.json")"
  fi
  echo "NCCL environment between the nodes: ${NCCL_SOCKETS[*]} NCCL_SOCKET_IFNAME=${NODE_IF[*]}" \
    "NCCL_HOSTID=benchd-node0 benchd-node1" \
    "(the nodes: $NODE_NET)"
} 2>&1 | tee "$OUT/cross-node.txt"
# The checks, on the files the steps above left (tests/gpu/test_cross_node.py).
gpu_pytest cross-node-checks tests/gpu/test_cross_node.py
