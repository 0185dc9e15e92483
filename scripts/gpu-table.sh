#!/usr/bin/env bash
# On a GPU machine (after `source .gpu-debs/unpack.sh`): build, start benchd,
# run bench/table.py over every preset, context, mode and precision, and write
# docs/results/<gpu>.md (and the raw jobs) to $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
gpu_setup
gpu_build gpu-table -DBENCHD_BUILD_TESTS=OFF
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed -E 's/NVIDIA //; s/ .*//' | tr 'A-Z' 'a-z')
DATA=$(mktemp -d /tmp/benchd-table-XXXXXX)
"$BUILD/bin/benchd" --data-dir "$DATA" --listen 127.0.0.1:0 --metrics off 2>"$OUT/benchd.log" &
DAEMON=$!
trap 'kill -TERM $DAEMON 2>/dev/null; wait $DAEMON 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do [ -s "$DATA/endpoints.json" ] && break; sleep 0.05; done
export BENCHD_ADDRESS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["grpc"])' "$DATA/endpoints.json")
# The table names the command that made it: this script, with any table.py flags passed to it.
python3 bench/table.py --benchctl "$BUILD/bin/benchctl" --out "$OUT/$GPU.md" --json "$OUT/$GPU-jobs.json" \
  --regenerate "source .gpu-debs/unpack.sh && scripts/gpu-table.sh${*:+ $*}" "$@" | tail -60
