#!/usr/bin/env bash
# Sets up (packages, venv, build) and runs every test: unit tests and the
# end-to-end tests against the real daemon and workers; then, in the
# sanitizer build (build-fuzz, clang), the torch-free unit tests under
# ASan+UBSan and each fuzzer for its bounded time (fuzz.*). Fails if either
# run fails. Extra arguments go to both ctest runs (-R server: that suite in both).
set -euo pipefail
cd "$(dirname "$0")/.."
# Tests run side by side, one per core (BENCHD_TEST_JOBS): every test makes its
# own data dirs, ports and namespaces; the few that share something say so
# with a ctest RESOURCE_LOCK.
JOBS=${BENCHD_TEST_JOBS:-$(nproc)}
FUZZ_BUILD=${BENCHD_FUZZ_BUILD_DIR:-build-fuzz}  # none: skip it
BENCHD_FUZZ_BUILD_DIR=$FUZZ_BUILD scripts/setup.sh --test
rc=0
ctest --test-dir "${BENCHD_BUILD_DIR:-build}" --output-on-failure --timeout 1800 -j "$JOBS" "$@" || rc=$?
if [ "$FUZZ_BUILD" != none ]; then
  # The unit tests under ASan+UBSan (style.clang_format already ran above),
  # then the fuzzers side by side (each is one single-threaded process).
  ctest --test-dir "$FUZZ_BUILD" --output-on-failure --timeout 1800 -j "$JOBS" -E '^style\.' -LE fuzz "$@" ||
    rc=$?
  ctest --test-dir "$FUZZ_BUILD" --output-on-failure -L fuzz -j "$JOBS" "$@" || rc=$?
fi
exit "$rc"
