# shellcheck shell=bash
# Sourced by scripts/gpu-*.sh (on a GPU machine, after `source .gpu-debs/unpack.sh`):
# the set-up and the build they share. Expects OUT and BUILD to be set.

# Fixes the unpacked libraries, then writes the GPUs to $OUT/gpu.txt.
gpu_setup() {
  # unpack.sh drops Debian's libfmt.so.9.1.0 in favour of the machine's soname,
  # but fmt's CMake targets still name the file: point it at the machine's copy.
  local lib=${GPU_DEPS:-/opt/gpu-deps}/usr/lib/x86_64-linux-gnu
  if [ -d "$lib" ] && [ ! -e "$lib/libfmt.so.9.1.0" ] && [ -e /usr/lib/x86_64-linux-gnu/libfmt.so.9 ]; then
    ln -sf /usr/lib/x86_64-linux-gnu/libfmt.so.9 "$lib/libfmt.so.9.1.0"
  fi
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
}

# gpu_build NAME CMAKE_OPTION [BUILD_ARGS...]: a Release build into $BUILD with the
# machine's torch (CMAKE_PREFIX_PATH from unpack.sh) and one more -D option, e.g.
# -DBENCHD_BUILD_TESTS=OFF; BUILD_ARGS go to `cmake --build` (e.g. --target benchd).
# Logs in $OUT/configure.log and $OUT/build.log; their errors and exit 1 on failure.
gpu_build() {
  local name=$1 option=$2 gen="" t0
  shift 2
  command -v ninja >/dev/null && gen="-G Ninja"
  t0=$(date +%s)
  # shellcheck disable=SC2086  # gen: empty or two words
  cmake -S . -B "$BUILD" $gen -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH" \
    "$option" > "$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD" -j "$(nproc)" "$@" > "$OUT/build.log" 2>&1 \
    || { grep -E "error|Error" "$OUT/build.log" | head -40; exit 1; }
  echo "$name: built in $(( $(date +%s) - t0 )) s"
}

# gpu_ctest NAME SKIP_BUILD REGEX: the worker's CUDA tests matching REGEX on this
# GPU. Unless SKIP_BUILD is non-empty, builds the programs and worker_test (tests
# on) into $BUILD first. Prints PASS, FAIL or SKIP (gpu_ctest_run); the log is
# $OUT/ctest-NAME.log. The build it leaves serves gpu_serve with SKIP_BUILD set.
gpu_ctest() {
  local name=$1 skip=$2 regex=$3
  [ -n "$skip" ] ||
    gpu_build "gpu-$name" -DBENCHD_BUILD_TESTS=ON --target benchd benchd-worker benchctl worker_test
  gpu_ctest_run "$name" "$regex"
}

# gpu_ctest_run NAME REGEX: ctest -R REGEX in $BUILD as it is, log $OUT/ctest-NAME.log;
# prints PASS (with the count), FAIL (with the failures), or SKIP where $BUILD
# holds no such test (a build with tests off, reused with a SKIP_BUILD variable:
# ctest finds none and exits 0, which is no pass).
gpu_ctest_run() {
  local name=$1 regex=$2 log="$OUT/ctest-$1.log"
  if ctest --test-dir "$BUILD" -R "$regex" --output-on-failure > "$log" 2>&1; then
    if grep -q "No tests were found" "$log"; then
      echo "SKIP ctest $name: no test matches '$regex' in $BUILD (configured with BENCHD_BUILD_TESTS=OFF?)"
    else
      echo "PASS ctest $name ($(grep -c Passed "$log") passed)"
    fi
  else
    echo "FAIL ctest $name"
    grep -B2 -A25 "Failure\|FAILED\|what()" "$log" | head -60 || true
  fi
}

# gpu_programs NAME NO_GPU PREBUILT: for scripts that start their own daemons
# (gpu-cluster.sh, gpu-cross-node.sh). Unless NO_GPU is non-empty, gpu_setup;
# then BIN is PREBUILT when given (a dry run with a CPU build), else the
# programs built into $BUILD (tests off).
gpu_programs() {
  local name=$1 no_gpu=$2 prebuilt=$3
  [ -n "$no_gpu" ] || gpu_setup
  if [ -n "$prebuilt" ]; then
    BIN=$prebuilt
  else
    gpu_build "$name" -DBENCHD_BUILD_TESTS=OFF --target benchd benchd-worker benchctl
    BIN=$BUILD/bin
  fi
  BIN=$(cd "$BIN" && pwd)
}

# stop_data_dir DIR: every process still running from DIR (daemons started in
# a subshell the caller's list does not know, their workers) is stopped, then
# DIR removed.
stop_data_dir() {
  pkill -TERM -f "$1" 2>/dev/null && sleep 3
  pkill -KILL -f "$1" 2>/dev/null || true
  rm -rf "$1"
}

# gpu_serve NAME SKIP_BUILD [BENCHD_FLAGS...]: what the request scripts
# (gpu-compiled.sh, gpu-estimate.sh, gpu-sweep.sh) share. Unless SKIP_BUILD is
# non-empty, builds benchd, benchd-worker and benchctl (no tests) into $BUILD;
# then starts benchd (scripts/daemon-lib.sh's benchd_start: call this in the
# script's own shell, not in $(...)) with its and the workers' logs in $OUT,
# and sets BIN to the programs' folder.
gpu_serve() {
  local name=$1 skip=$2 data
  shift 2
  [ -n "$skip" ] || gpu_build "$name" -DBENCHD_BUILD_TESTS=OFF --target benchd benchd-worker benchctl
  BIN=$BUILD/bin
  data=$(mktemp -d "/tmp/benchd-$name-XXXXXX")
  benchd_start --copy-logs "$OUT" "$BIN" "$data" "$OUT/benchd.log" "$@"
}

# node_net PREFIX SUBNET: the two "nodes" of gpu-cluster.sh and gpu-cross-node.sh.
# Where root may make network namespaces here, each node is a namespace holding
# one end of a veth pair (SUBNET.1 and SUBNET.2) and a TCP connection between
# them is tried; where it may not (a sandbox such as gVisor can refuse ip netns
# or veth), both nodes share the host's loopback (127.0.0.1 and 127.0.0.2, or
# 127.0.0.1 twice where the sandbox binds no other loopback address) and
# NODE_NET says so. Sets NODE_NET (netns or loopback), and by rank NODE_NS,
# NODE_IF (the interface for NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME),
# NODE_IP and NODE_PORT (two ports, so either layout works). node_net_drop
# removes the namespaces; in_node RANK CMD... runs CMD in node RANK's
# (in_node_bg in the background).
node_net() {
  local prefix=$1 subnet=$2
  NODE_NS=("${prefix}n0" "${prefix}n1")
  NODE_IF=("${prefix}a" "${prefix}b")
  NODE_IP=("$subnet.1" "$subnet.2")
  NODE_PORT=(7531 7532)
  # The programs run in a namespace get the caller's library path, not the
  # one ip_from_debs gives ip.
  NODE_ENV=(env "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}")
  if ! command -v ip > /dev/null || [ -n "${NODE_NET_IP_FROM_DEBS:-}" ]; then
    ip_from_debs .netdebs >> "$OUT/node-net.log" 2>&1 || true
  fi
  if [ -z "${NODE_NET_LOOPBACK:-}" ] && command -v ip > /dev/null &&
      node_net_make >> "$OUT/node-net.log" 2>&1; then
    NODE_NET=netns
    return 0
  fi
  node_net_drop
  NODE_NET=loopback
  NODE_NS=("" "")
  NODE_IF=(lo lo)
  NODE_IP=(127.0.0.1 127.0.0.2)
  python3 -c 'import socket; socket.socket().bind(("127.0.0.2", 0))' 2> /dev/null ||
    NODE_IP=(127.0.0.1 127.0.0.1)
  echo "node_net: no network namespaces here ($(command -v ip > /dev/null || echo "no ip command; ")$(tail -1 "$OUT/node-net.log" 2> /dev/null)):" \
    "both nodes on the loopback, ${NODE_IP[0]} and ${NODE_IP[1]}" | tee -a "$OUT/node-net.log"
}
# ip_from_debs DIR: where a machine has no iproute2 (the GPU machines), the
# `ip` of Debian's iproute2 and its libraries, carried as .deb files in DIR
# (made here with: mkdir -p .netdebs && cd .netdebs && apt-get download iproute2
# libbpf1 libbsd0 libcap2 libelf1 libmd0 libmnl0 zlib1g), unpacked into a
# prefix of their own and put first on PATH as a wrapper that alone sees them.
ip_from_debs() {
  local dir=$1 prefix=/opt/benchd-iproute2 f
  ls "$dir"/iproute2_*.deb > /dev/null || return 1
  mkdir -p "$prefix/root" "$prefix/lib" "$prefix/bin"
  for f in "$dir"/*.deb; do dpkg -x "$f" "$prefix/root" || return 1; done
  find "$prefix/root" -name '*.so*' -exec cp -P {} "$prefix/lib/" \;
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib exec %s/root/bin/ip "$@"\n' "$prefix" "$prefix" \
    > "$prefix/bin/ip"
  chmod +x "$prefix/bin/ip"
  export PATH="$prefix/bin:$PATH"
  ip -V
}
node_net_make() {  # every step checked by hand: errexit does not hold inside an `if`
  ip netns add "${NODE_NS[0]}" || return 1
  ip netns add "${NODE_NS[1]}" || return 1
  ip link add "${NODE_IF[0]}" type veth peer name "${NODE_IF[1]}" || return 1
  for r in 0 1; do
    ip link set "${NODE_IF[$r]}" netns "${NODE_NS[$r]}" &&
      ip -n "${NODE_NS[$r]}" addr add "${NODE_IP[$r]}/24" dev "${NODE_IF[$r]}" &&
      ip -n "${NODE_NS[$r]}" link set lo up &&
      ip -n "${NODE_NS[$r]}" link set "${NODE_IF[$r]}" up || return 1
  done
  # A namespace pair that cannot carry a TCP connection is no use: try one.
  ip netns exec "${NODE_NS[0]}" "${NODE_ENV[@]}" timeout 10 python3 -c '
import socket, sys
socket.create_server((sys.argv[1], int(sys.argv[2]))).accept()' "${NODE_IP[0]}" "${NODE_PORT[0]}" &
  local server=$!
  sleep 1
  ip netns exec "${NODE_NS[1]}" "${NODE_ENV[@]}" timeout 5 python3 -c '
import socket, sys
socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)' "${NODE_IP[0]}" "${NODE_PORT[0]}" ||
    { kill "$server" 2> /dev/null; return 1; }
  wait "$server"
}
node_net_drop() {
  local ns
  for ns in "${NODE_NS[@]}"; do
    [ -z "$ns" ] || ip netns del "$ns" 2> /dev/null || true
  done
}
in_node() {
  local r=$1
  shift
  if [ "$NODE_NET" = netns ]; then
    ip netns exec "${NODE_NS[$r]}" "${NODE_ENV[@]}" "$@"
  else
    "$@"
  fi
}
# in_node_bg RANK CMD...: CMD in the background in node RANK's namespace, its
# pid in NODE_BG_PID (the program's own, so that a signal sent to it reaches
# the program and not a subshell around it).
in_node_bg() {
  local r=$1
  shift
  if [ "$NODE_NET" = netns ]; then
    ip netns exec "${NODE_NS[$r]}" "${NODE_ENV[@]}" "$@" &
  else
    "$@" &
  fi
  # shellcheck disable=SC2034  # read by the caller
  NODE_BG_PID=$!
}

# gpu_pytest NAME TEST_FILE...: a script's checks, pytest tests marked `gpu`
# (tests/gpu; python3 or BENCHD_TEST_PYTHON), against the daemon benchd_start
# started (BENCHD_ADDRESS; BENCHD_GPU_TEST_DATA, when the caller sets it, is
# its data dir) with BIN's benchctl; what they fetch lands in $OUT, where they
# also read what the script left. BENCHD_GPU_SCRIPT names the script: run by
# one, the tests do not skip (a CPU dry run included). pytest's report in
# $OUT/NAME.txt, also printed. Returns pytest's exit status: call it as
# `gpu_pytest ... || rc=$?` where the script goes on after a failed check.
gpu_pytest() {
  local name=$1
  shift
  BENCHD_BIN_DIR="$BIN" BENCHD_GPU_TEST_ADDRESS="${BENCHD_ADDRESS:-}" BENCHD_GPU_OUT="$OUT" \
    BENCHD_GPU_SCRIPT="$(basename "$0" .sh)" \
    "${BENCHD_TEST_PYTHON:-python3}" -m pytest -m gpu -v -rfEs --tb=short -p no:cacheprovider \
    "$@" < /dev/null 2>&1 | tee "$OUT/$name.txt"
  return "${PIPESTATUS[0]}"
}
