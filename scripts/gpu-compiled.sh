#!/usr/bin/env bash
# Compiled against eager on a GPU machine (after `source .gpu-debs/unpack.sh`):
# builds into build-gpu (or reuses it), starts benchd on the GPU and runs
# bench/compiled_vs_eager.py: the course's attention and the whole model,
# eager and under torch.compile in the machine's Python, beside benchd's
# faithful and fused paths, one table each with every ratio.
# Writes $OUT/compiled-vs-eager.md (also printed), benchd.log, gpu.txt.
#   GPU_COMPILED_SKIP_BUILD=1  use build-gpu as it is
#   GPU_COMPILED_FLAGS         more flags for bench/compiled_vs_eager.py
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup

gpu_serve gpu-compiled "${GPU_COMPILED_SKIP_BUILD:-}"
"$BIN/benchctl" --timeout 120 node > "$OUT/node.txt"
t0=$(date +%s)
# shellcheck disable=SC2086  # GPU_COMPILED_FLAGS: flags, word-split on purpose
python3 bench/compiled_vs_eager.py --benchctl "$BIN/benchctl" --device cuda:0 \
  --out "$OUT/compiled-vs-eager.md" ${GPU_COMPILED_FLAGS:-} < /dev/null
echo "gpu-compiled: took $(( $(date +%s) - t0 )) s on $(cut -d, -f1 "$OUT/gpu.txt")"
