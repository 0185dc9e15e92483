#!/usr/bin/env bash
# One bounded fuzzing run, as ctest's fuzz.<target> runs it:
#   run_fuzzer.sh FUZZER SEED_CORPUS WORK_DIR SECONDS [TIMEOUT]
# Every seed runs first (so a committed reproducer fails at once), then
# libFuzzer mutates for SECONDS, inputs up to 4 KiB (larger seeds are cut:
# small inputs run hundreds of times faster, and every defect found so far
# fits in 100 bytes). New inputs go to WORK_DIR/corpus (never into
# the committed seeds); a crash, leak or input slower than TIMEOUT seconds
# leaves WORK_DIR/crash-*, leak-* or timeout-* and fails the test.
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 seconds=$4 timeout=${5:-10}
mkdir -p "$work/corpus"
rm -f "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* "$work"/slow-unit-*
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
rc=0
"$fuzzer" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 -max_len=4096 \
  -artifact_prefix="$work/" -print_final_stats=1 "$work/corpus" "$seeds" 2>"$work/log" || rc=$?
grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|stat::new_units_added)|^#[0-9]+ *(INITED|DONE)' \
  "$work/log" || true
if [ "$rc" -ne 0 ]; then
  tail -n 80 "$work/log"
  ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null || true
  echo "$(basename "$fuzzer"): failed (exit $rc); reproduce with: $fuzzer <the file above>"
fi
exit "$rc"
