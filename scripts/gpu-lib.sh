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
# on) into $BUILD first. Prints PASS or FAIL (with the failures); the log is
# $OUT/ctest-NAME.log. The build it leaves serves gpu_serve with SKIP_BUILD set.
gpu_ctest() {
  local name=$1 skip=$2 regex=$3 log="$OUT/ctest-$1.log"
  [ -n "$skip" ] ||
    gpu_build "gpu-$name" -DBENCHD_BUILD_TESTS=ON --target benchd benchd-worker benchctl worker_test
  if ctest --test-dir "$BUILD" -R "$regex" --output-on-failure > "$log" 2>&1; then
    echo "PASS ctest $name ($(grep -c Passed "$log") passed)"
  else
    echo "FAIL ctest $name"
    grep -B2 -A25 "Failure\|FAILED\|what()" "$log" | head -60
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
