#!/usr/bin/env bash
# Every C++/CUDA source git tracks is formatted as .clang-format says (Google
# style, 100 columns). Fix with: git ls-files '*.cc' '*.h' '*.cu' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/../.."
git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | xargs clang-format --dry-run -Werror
echo "clang-format: $(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | wc -l) files formatted"
