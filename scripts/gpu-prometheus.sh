#!/usr/bin/env bash
# The Prometheus proof on a GPU machine: tests/integration/test_prometheus.py
# against a daemon on every GPU plus cpu:0 and cpu:1 (a bf16 benchmark and a
# memory request on cuda:0, an NCCL all-reduce with 2 GPUs; GPU_SERIES must
# fill), and dashboards/render.py's picture of each dashboard.
#
#   here:    GPU_DEBS_EXTRA="libgloo-dev libssl-dev libjemalloc-dev libjemalloc2 prometheus" \
#              ../shared/gpu/pack-debs.sh        # .gpu-debs; unpack.sh puts prometheus on PATH
#            .venv/bin/pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#              --platform manylinux_2_17_x86_64 -d .whl grpcio-tools==1.84.0
#                                                # the harness (bench/benchd_harness.py) generates
#                                                # the stubs with grpc_tools,
#                                                # which the GPU machines' Python lacks
#   there:   source .gpu-debs/unpack.sh && scripts/gpu-prometheus.sh   (carry .gpu-debs and .whl)
#
# Writes to $OUT (default gpu-out): pytest.log, versions.txt, gpu.txt, the build
# logs, and dashboards/<uid>.png.
#   GPU_PROMETHEUS_BIN      use the binaries in this folder, no build (e.g. build-gpu/bin
#                           from scripts/gpu-check.sh, or build/bin for a CPU dry run)
#   GPU_PROMETHEUS_DEVICES  the daemon's devices (default: cuda:N for every GPU
#                           nvidia-smi lists, then cpu:0,cpu:1; no GPU: cpu:0,cpu:1)
#   BENCHD_TEST_PYTHON      the Python that runs pytest (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
PY=${BENCHD_TEST_PYTHON:-python3}

source scripts/gpu-lib.sh
devices=""
if command -v nvidia-smi > /dev/null; then
  gpu_setup
  for i in $(nvidia-smi --query-gpu=index --format=csv,noheader); do devices+="cuda:$i,"; done
fi
devices=${GPU_PROMETHEUS_DEVICES:-${devices}cpu:0,cpu:1}

if [ -n "${GPU_PROMETHEUS_BIN:-}" ]; then
  BIN=$(cd "$GPU_PROMETHEUS_BIN" && pwd)
else
  # The three programs the test runs; no unit tests (gpu-check.sh runs them).
  gpu_build gpu-prometheus -DBENCHD_BUILD_TESTS=OFF --target benchd benchd-worker benchctl
  BIN=$(cd "$BUILD/bin" && pwd)
fi

PROMETHEUS=${BENCHD_PROMETHEUS:-$(command -v prometheus || true)}
if [ -z "$PROMETHEUS" ]; then
  echo "gpu-prometheus: no prometheus on PATH; pack .gpu-debs with" \
    "GPU_DEBS_EXTRA=\"... prometheus\" and source .gpu-debs/unpack.sh, or set BENCHD_PROMETHEUS" >&2
  exit 1
fi

# The harness (bench/benchd_harness.py) generates the gRPC stubs from proto/ with
# grpc_tools: bring the carried wheel where this Python has none (installed aside,
# nothing replaced).
site=""
if ! "$PY" -c "import grpc_tools" 2>/dev/null; then
  wheel=$(ls .whl/grpcio_tools-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$wheel" ]; then
    echo "gpu-prometheus: $PY has no grpc_tools and .whl holds no grpcio_tools wheel (see the top" \
      "of this script)" >&2
    exit 1
  fi
  site=$(mktemp -d /tmp/gpu-prometheus-site-XXXXXX)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$wheel"
fi

{
  "$PROMETHEUS" --version 2>&1 | head -1
  "$PY" --version
  "$PY" -m pip show grpcio protobuf matplotlib pytest 2>/dev/null | grep -E "^(Name|Version)" \
    | paste - -
  [ -z "$site" ] || echo "grpc_tools from $(basename "$wheel") (in $site)"
  echo "devices: $devices"
} | tee "$OUT/versions.txt"

rm -rf "$OUT/dashboards"
echo "=== tests/integration/test_prometheus.py, devices $devices"
rc=0
PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" BENCHD_BIN_DIR="$BIN" BENCHD_SOURCE_DIR="$PWD" \
  BENCHD_PROM_DEVICES="$devices" BENCHD_PROMETHEUS="$PROMETHEUS" \
  BENCHD_DASHBOARD_RENDER_DIR="$OUT/dashboards" \
  "$PY" -m pytest -v -p no:cacheprovider -o addopts="" tests/integration/test_prometheus.py \
  > "$OUT/pytest.log" 2>&1 || rc=$?
grep -E "PASSED|FAILED|ERROR|passed|failed" "$OUT/pytest.log" | tail -12
[ $rc -eq 0 ] || tail -60 "$OUT/pytest.log"
ls -l "$OUT/dashboards" 2>/dev/null || true
[ -z "$site" ] || rm -rf "$site"
exit $rc
