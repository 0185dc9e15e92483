#!/usr/bin/env bash
# Sets up (packages, venvs, the build with its tests) and runs every test:
# unit tests and the end-to-end tests against the real daemon and workers;
# then, in the sanitizer build (build-fuzz, clang), the torch-free unit tests
# under ASan+UBSan and each fuzzer for its bounded time (fuzz.*). Fails if any
# run fails. Extra arguments go to every ctest run (-R server: that suite in
# each).
#   BENCHD_TEST_JOBS       tests run side by side (default: one more than the
#                          cores: the end-to-end tests spend most of their time
#                          waiting on daemons and workers, e.g. integration.memory
#                          15 CPU-s in 59 s)
#   BENCHD_FUZZ_BUILD_DIR  the sanitizer build (default build-fuzz; none: skip it)
set -euo pipefail
cd "$(dirname "$0")/.."
# Every test makes its own data dirs, ports and namespaces; the few that
# share something say so with a ctest RESOURCE_LOCK.
JOBS=${BENCHD_TEST_JOBS:-$(($(nproc) + 1))}
FUZZ_BUILD=${BENCHD_FUZZ_BUILD_DIR:-build-fuzz}
BENCHD_FUZZ_BUILD_DIR=$FUZZ_BUILD BENCHD_FUZZ_BUILD_LATER=1 scripts/setup.sh --test

# setup.sh started the sanitizer build in the background, at the lowest CPU
# priority: the suite leaves ~40% of the CPU idle (its tests wait on daemons,
# workers and timeouts), and the tests keep the CPU they ask for.
rc=0
ctest --test-dir "${BENCHD_BUILD_DIR:-build}" --output-on-failure --timeout 1800 -j "$JOBS" "$@" || rc=$?
echo "test: main suite done after $SECONDS s"
if [ "$FUZZ_BUILD" != none ]; then
  while [ ! -f "$FUZZ_BUILD/build.rc" ]; do sleep 2; done
  if [ "$(cat "$FUZZ_BUILD/build.rc")" != 0 ]; then
    tail -50 "$FUZZ_BUILD/build.log"
    echo "test: the sanitizer build failed (log: $FUZZ_BUILD/build.log)" >&2
    exit 1
  fi
  echo "test: sanitizer and fuzz build in $FUZZ_BUILD, done after $SECONDS s"
  # The unit tests under ASan+UBSan (style.clang_format already ran above),
  # then the fuzzers side by side (each is one single-threaded process).
  ctest --test-dir "$FUZZ_BUILD" --output-on-failure --timeout 1800 -j "$JOBS" -E '^style\.' -LE fuzz "$@" ||
    rc=$?
  ctest --test-dir "$FUZZ_BUILD" --output-on-failure -L fuzz -j "$JOBS" "$@" || rc=$?
fi
echo "test: all done after $SECONDS s"
exit "$rc"
