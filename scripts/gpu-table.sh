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
source scripts/daemon-lib.sh
gpu_setup
gpu_build gpu-table -DBENCHD_BUILD_TESTS=OFF
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed -E 's/NVIDIA //; s/ .*//' | tr 'A-Z' 'a-z')
DATA=$(mktemp -d /tmp/benchd-table-XXXXXX)
benchd_start "$BUILD/bin" "$DATA" "$OUT/benchd.log" --metrics off
# The table names the command that made it: this script, with any table.py flags passed to it.
python3 bench/table.py --benchctl "$BUILD/bin/benchctl" --out "$OUT/$GPU.md" --json "$OUT/$GPU-jobs.json" \
  --regenerate "source .gpu-debs/unpack.sh && scripts/gpu-table.sh${*:+ $*}" "$@" | tail -60
