#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine needs and builds benchd into build/.
# Re-running it is quick and changes nothing that is already right.
#   scripts/setup.sh         what the demo runs: the build packages, torch in
#                            .venv, and benchd, benchd-worker and benchctl
#                            (no tests; scripts/demo.sh)
#   scripts/setup.sh --test  all of that, then what the tests need: the
#                            test-only packages and servers (Slurm, Prometheus,
#                            clang), the test venvs, the whole build with its
#                            tests and the sanitizer build (scripts/test.sh)
#   BENCHD_BUILD_DIR  build directory (default: build)
#   BENCHD_PYTHON     python3 to make the venv with (default: python3)
#   BENCHD_FUZZ_BUILD_LATER=1  with --test, configure the sanitizer build only
#   BENCHD_FUZZ_BUILD_DIR  with --test, the sanitizer + fuzz build's folder
#                     (clang: ASan+UBSan unit tests and the fuzz.* tests;
#                     default build-fuzz; none: no sanitizer build)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PROFILE=demo
[ "${1:-}" = --test ] && PROFILE=test
BUILD=${BENCHD_BUILD_DIR:-build}
TORCH_VERSION=2.11.0

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# 1. Debian packages: the build's, then (--test) the tests'.
PKGS="build-essential cmake ninja-build pkg-config python3-venv
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  prometheus-cpp-dev libsqlite3-dev libssl-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libgloo-dev libjemalloc-dev"
FUZZ_BUILD=none
if [ "$PROFILE" = test ]; then
  # GoogleTest; promtool (prometheus) for the metrics and rules tests; the
  # style check; git for the tests that read the tree.
  PKGS="$PKGS libgtest-dev libgmock-dev prometheus clang-format git
    systemd iproute2 util-linux munge slurmctld slurmd slurm-client shellcheck
    nginx-core"
  # nginx-core: ctest integration.http2_abuse runs the HTTP/2 attacks through
  # the TLS-terminating nginx that docs/security.md puts in front of gRPC 1.51
  # (deploy/nginx/benchd.conf), as its own process on its own files. Debian
  # starts nginx.service (port 80) on install; the test needs no service
  # (`systemctl disable --now nginx` frees the port).
  # The line before: ctest cluster.slurm's throwaway Slurm cluster (tests/cluster):
  # Debian's munged, slurmctld, slurmd and the client commands (sbatch, srun,
  # scontrol), nodes in network namespaces (ip, unshare, nsenter). Their units
  # stay as Debian ships them (slurmctld and slurmd start only with an
  # /etc/slurm/slurm.conf); the test starts its own daemons on its own files.
  # The same test runs shellcheck on deploy/slurm/benchd.sbatch.
  FUZZ_BUILD=${BENCHD_FUZZ_BUILD_DIR:-build-fuzz}
  # libFuzzer and the sanitizer runtimes of Debian 12's clang (14).
  [ "$FUZZ_BUILD" = none ] || PKGS="$PKGS clang libclang-rt-14-dev"
fi
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  sudo_if_needed apt-get update -q
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
fi

# 1b. The sanitizer build: the torch-free code and its unit tests under ASan
#    and UBSan, and the libFuzzer targets of fuzz/ (when BENCHD_FUZZ_BUILD_DIR
#    names a folder). No worker: LibTorch is not built twice (DEVELOPERS.md).
#    It needs nothing below, so with BENCHD_FUZZ_BUILD_LATER=1 (scripts/test.sh)
#    it starts now in the background at the lowest CPU priority: it takes
#    what torch's download, the main build's pauses and the tests leave idle;
#    its status lands in $FUZZ_BUILD/build.rc for scripts/test.sh.
if [ "$FUZZ_BUILD" != none ]; then
  if [ ! -f "$FUZZ_BUILD/build.ninja" ]; then
    cmake -S . -B "$FUZZ_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only" \
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only" \
      -DBENCHD_BUILD_WORKER=OFF -DBENCHD_FUZZ=ON -DBENCHD_CLIENT_PYTEST=/nonexistent/pytest \
      > /dev/null
  fi
  if [ "${BENCHD_FUZZ_BUILD_LATER:-0}" = 1 ]; then
    rm -f "$FUZZ_BUILD/build.rc"
    (
      rc=0
      nice -n 19 cmake --build "$FUZZ_BUILD" > "$FUZZ_BUILD/build.log" 2>&1 || rc=$?
      echo "$rc" > "$FUZZ_BUILD/build.rc"
    ) &
  fi
fi

# 2. The project venv: LibTorch comes from the PyPI torch wheel (pinned to the
#    GPU machines' version). With --test: grpcio and pytest drive the
#    integration tests, matplotlib draws dashboards/render.py's pictures.
if [ ! -x .venv/bin/python ]; then
  "${BENCHD_PYTHON:-python3}" -m venv .venv
fi
if ! .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  echo "setup: installing torch==$TORCH_VERSION into .venv (large download, once)"
  .venv/bin/pip install -q --disable-pip-version-check "torch==$TORCH_VERSION"
fi
# The test-only packages (about 75 s of downloads and unpacking on a fresh
# machine) install beside the build, which needs none of them: the venvs are
# made first, since the build's configure step registers the tests by them.
install_test_packages() {
  .venv/bin/python -c "import numpy, grpc, grpc_tools, grpc_health, grpc_reflection, pytest, pytest_timeout, matplotlib" 2>/dev/null ||
    .venv/bin/pip install -q --disable-pip-version-check numpy grpcio grpcio-tools \
      grpcio-health-checking grpcio-reflection pytest pytest-timeout matplotlib
  # ctest integration.http2_abuse's attacker speaks HTTP/2 frame by frame: h2, pinned.
  .venv/bin/python -c "import importlib.metadata as m, sys; sys.exit(m.version('h2') != '4.4.1')" 2>/dev/null ||
    .venv/bin/pip install -q --disable-pip-version-check h2==4.4.1
  # ctest deploy.manifests: yamllint and the Kubernetes API schemas (1.37), pinned.
  .venv/bin/python -c "import importlib.metadata as m, sys; sys.exit(m.version('yamllint') != '1.38.0' or m.version('kubernetes-validate') != '1.37.0')" 2>/dev/null ||
    .venv/bin/pip install -q --disable-pip-version-check yamllint==1.38.0 kubernetes-validate==1.37.0
  # Grafana's dashboards-as-code SDK for dashboards/generate.py, pinned: its
  # output is committed (dashboards/json) and the ctest compares them. Its
  # versions are "<build>!<Grafana schema version>".
  GRAFANA_SDK_VERSION='1769699379!11.6.0'
  .venv/bin/python -c "import importlib.metadata as m, sys; sys.exit(m.version('grafana-foundation-sdk') != sys.argv[1])" "$GRAFANA_SDK_VERSION" 2>/dev/null ||
    .venv/bin/pip install -q --disable-pip-version-check "grafana-foundation-sdk==$GRAFANA_SDK_VERSION"
  # The benchd Python package (client/python), installed with its test and
  # type-check extras in a venv of its own (tests/CMakeLists.txt says why).
  # On the grpcio and protobuf the GPU machines' Python has (seen 2026-11-25 on an H100,
  # docs/results/quickstart-h100.md), so ctest python_client runs the package's calls on them.
  .venv-pyclient/bin/pip install -q --disable-pip-version-check './client/python[dev]' \
    grpcio==1.84.0 protobuf==7.36.2
  # ... and on exactly the lowest grpcio/protobuf it declares (ctest python_client.lowest).
  "${BENCHD_PYTHON:-python3}" client/python/tests/lowest.py setup .venv-pyclient-lowest
}
packages_pid=""
if [ "$PROFILE" = test ]; then
  [ -x .venv-pyclient/bin/python ] || "${BENCHD_PYTHON:-python3}" -m venv .venv-pyclient
  [ -x .venv-pyclient-lowest/bin/python ] || "${BENCHD_PYTHON:-python3}" -m venv .venv-pyclient-lowest
  mkdir -p "$BUILD"
  install_test_packages > "$BUILD/test-packages.log" 2>&1 &
  packages_pid=$!
fi
echo "setup: packages and torch ready after $SECONDS s"

# 3. Build: the demo's three programs, or (--test) everything with the tests.
#    A build folder configured by the demo gets its tests switched on here.
TORCH_PREFIX=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')
TESTS=OFF
BUILD_TYPE=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ "$PROFILE" = test ]; then
  TESTS=ON
  # A build made for the tests is -O1 without debug info: 12% less compiler
  # time than RelWithDebInfo's -O2 -g1 (most of it in the LibTorch files),
  # and the tests time nothing of ours that -O2 would change. A folder the
  # demo configured keeps its RelWithDebInfo.
  BUILD_TYPE=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG"
    "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG")
fi
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja "${BUILD_TYPE[@]}" -DBENCHD_BUILD_TESTS=$TESTS \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DPython3_EXECUTABLE="$ROOT/.venv/bin/python"
elif [ "$TESTS" = ON ] && ! grep -q '^BENCHD_BUILD_TESTS:BOOL=ON$' "$BUILD/CMakeCache.txt"; then
  cmake -S . -B "$BUILD" -DBENCHD_BUILD_TESTS=ON
fi
if [ "$PROFILE" = test ]; then
  cmake --build "$BUILD"
else
  cmake --build "$BUILD" --target benchd benchd-worker benchctl
fi
echo "setup: built into $BUILD/bin after $SECONDS s: $(ls "$BUILD/bin" | tr '\n' ' ')"
if [ -n "$packages_pid" ]; then
  if ! wait "$packages_pid"; then
    cat "$BUILD/test-packages.log"
    echo "setup: installing the test packages failed (log: $BUILD/test-packages.log)" >&2
    exit 1
  fi
  echo "setup: test packages installed ($BUILD/test-packages.log), after $SECONDS s"
fi

# 4. The sanitizer build finishes here unless scripts/test.sh waits for it
#    (BENCHD_FUZZ_BUILD_LATER=1; it was started in the background at 1b).
if [ "$FUZZ_BUILD" != none ] && [ "${BENCHD_FUZZ_BUILD_LATER:-0}" != 1 ]; then
  cmake --build "$FUZZ_BUILD"
  echo "setup: sanitizer and fuzz build in $FUZZ_BUILD"
fi
