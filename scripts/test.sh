#!/usr/bin/env bash
# Sets up (packages, venv, build) and runs every test: unit tests and the
# end-to-end tests against the real daemon and workers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir "${BENCHD_BUILD_DIR:-build}" --output-on-failure --timeout 1800 "$@"
