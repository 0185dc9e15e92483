#!/usr/bin/env bash
# Quick correctness screen of new backward variants before they are timed: each variant
# runs the harness test's 10-case subset and the d64 bf16/fp16 grid cases (TEST_GRID=0) in
# its own process under its own timeout, so that a variant that hangs (a barrier protocol
# error) costs only SCREEN_TIMEOUT seconds instead of the whole call.
#   LIB=/tmp/flash_build/libbenchd_flash.so screen_variants.sh name:var,name:var,...
# stdout: the passing entries (name:var,...), for BWD_VARIANTS; the tests' output on stderr.
set -uo pipefail
cd "$(dirname "$0")/../.."
LIB=${LIB:-/tmp/flash_build/libbenchd_flash.so}
pass=()
for kv in ${1//,/ }; do
  v=${kv##*:}
  if TEST_GRID=0 TEST_VARIANTS=$v BWD_GRID_VARIANTS=$v timeout "${SCREEN_TIMEOUT:-90}" \
      python3 bench/flash_attention/flash_harness.py test --lib "$LIB" >&2; then
    pass+=("$kv")
    echo "# screen: variant $v passed" >&2
  else
    echo "# screen: variant $v FAILED (or timed out)" >&2
  fi
done
(IFS=,; echo "${pass[*]}")
