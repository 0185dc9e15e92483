#!/usr/bin/env bash
# The profile request on a GPU machine (after `source .gpu-debs/unpack.sh`):
# builds into build-gpu (or reuses it), starts benchd on cuda:0, runs
# bench/profile_compare.py (benchd's profile against torch.profiler on the
# Python reference: small and xl, forward and train_step, fp32 and bf16, batch
# 4, context 256) and fetches one trace through benchctl to check it is a
# Chrome trace with the named ranges. Everything lands in $OUT (default gpu-out):
#   profile.md                  the tables (docs/results/<gpu>-profile.md)
#   profile/profile-*.json|txt  each job (benchctl get --json, and as printed)
#   trace-check.txt             the fetched trace's events and ranges
#   profile-checks.txt          the checks' report (tests/gpu/test_profile.py); the script
#                               fails if one fails
#   profile-small-cli.txt       what benchctl printed for that profile
#   GPU_PROFILE_SKIP_BUILD=1    use build-gpu as it is
#   GPU_PROFILE_COMPARE="..."   more flags for bench/profile_compare.py, e.g. "--presets
#                               small xl --modes forward --precisions fp32" (2 of its 8
#                               configs, xl fp32's check kept)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT/profile"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup

[ -n "${GPU_PROFILE_SKIP_BUILD:-}" ] || gpu_build gpu-profile -DBENCHD_TEST_PYTHON=/nonexistent \
  --target benchd benchd-worker benchctl

BIN=$BUILD/bin
DATA=$(mktemp -d /tmp/benchd-gpu-profile-XXXXXX)
benchd_start --copy-logs "$OUT" "$BIN" "$DATA" "$OUT/benchd.log" --metrics 127.0.0.1:0 --device cuda:0
"$BIN/benchctl" --timeout 120 node | tee "$OUT/node.txt"

# shellcheck disable=SC2086  # GPU_PROFILE_COMPARE: flags, word-split on purpose
python3 bench/profile_compare.py --benchctl "$BIN/benchctl" --out "$OUT/profile" ${GPU_PROFILE_COMPARE:-} \
  | tee "$OUT/profile.md"
# The checks (tests/gpu/test_profile.py): one trace through FetchArtifact is
# valid JSON with kernels and the named ranges; profile_compare's jobs have a
# GEMM on top of each forward, and xl fp32's forward kernels match its events.
BENCHD_GPU_TEST_PROFILES="$OUT/profile" gpu_pytest profile-checks tests/gpu/test_profile.py
