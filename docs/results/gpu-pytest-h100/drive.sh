#!/usr/bin/env bash
# Issue 35: every tests/gpu file one GPU allows, through its script where the
# script can skip its build, in one device call. Run from the repo root after
# `source .gpu-debs/unpack.sh`. Carried: .gpu-debs .whl-pytest .netdebs .gpu-pytest
#   DRIVE_BIN=DIR   programs already built (carried): no build
#   DRIVE_ONLY="estimate precision memory attention check profile cluster"  a subset
#   DRY=1           CPU dry run of the driver's logic (every step an echo)
set -uo pipefail
ROOT=$PWD
R=${DRIVE_WORK:-/tmp/gpr}
OUTDIR=${OUT:-$R/out}
rm -rf "$R"; mkdir -p "$R" "$OUTDIR"
export BENCHD_BUILD_DIR=build-gpu-pytest
ONLY=${DRIVE_ONLY:-estimate precision memory attention check profile cluster}
T0=$(date +%s)
DEADLINE=$(( T0 + ${DRIVE_BUDGET:-520} ))  # every step ends by then, packing after
log() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$R/driver.txt"; }
want() { [[ " $ONLY " == *" $1 "* ]]; }
run() {  # run NAME TIMEOUT ENV... -- CMD...: OUT=$R/NAME, output in $R/NAME.log
  local name=$1 t=$2 envs=()
  shift 2
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  mkdir -p "$R/$name"
  local left=$(( DEADLINE - $(date +%s) ))
  [ "$left" -lt "$t" ] && t=$left
  if [ "$t" -lt 20 ]; then log "skip $name: ${t} s left"; return; fi
  log "start $name (timeout $t s)"
  if [ -n "${DRY:-}" ]; then
    echo "DRY: OUT=$R/$name ${envs[*]} timeout $t $*" > "$R/$name.log"; sleep 1; local rc=0
  else
    env OUT="$R/$name" "${envs[@]}" timeout -k 10 "$t" "$@" > "$R/$name.log" 2>&1 < /dev/null
    local rc=$?
  fi
  log "end $name: rc=$rc"
}
pack() {  # everything but the bulky files, into $OUT
  for f in "$R"/*/; do
    n=$(basename "$f")
    for t in "$f"*.txt; do
      [ -e "$t" ] || continue
      s=$(grep -E "^=+ .*(passed|failed|skipped|error|no tests ran).* in [0-9.]+s.* =+$" "$t" | tail -1)
      [ -n "$s" ] && echo "$n/$(basename "$t"): $s"
    done
  done > "$R/summary.txt"
  tar -C "$R" -czf "$OUTDIR/results.tar.gz" --exclude='*.html' --exclude='*.pickle' \
    --exclude='*.svg' --exclude='trace*.json' --exclude='html' . 2>/dev/null
  cp "$R/driver.txt" "$R/summary.txt" "$OUTDIR/" 2>/dev/null
  if [ -z "${DRIVE_BIN:-}" ] && [ -d "$BENCHD_BUILD_DIR/bin" ] && [ -z "${DRY:-}" ]; then
    if command -v zstd > /dev/null; then z=(zstd -q -T0 -6); ext=zst; else z=(gzip -1); ext=gz; fi
    rm -rf "$R/strip" && mkdir -p "$R/strip" && cp -a "$BENCHD_BUILD_DIR/bin" "$R/strip/" &&
      strip --strip-unneeded "$R"/strip/bin/* 2> /dev/null
    tar -C "$R/strip" -cf - bin | "${z[@]}" > "$R/bin.tar.$ext" &&
      split -b 15M -d "$R/bin.tar.$ext" "$OUTDIR/bin.tar.$ext.part"
  fi
  log "packed: $(ls -s "$OUTDIR" | tr '\n' ' ')"
  cat "$R/summary.txt"
}
trap pack EXIT

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$R/gpu.txt" 2>&1
log "gpu: $(cat "$R/gpu.txt"); $(nproc) cores; torch $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>&1 | tail -1)"
# The notebook's wheels, aside (the runner's PYTHONPATH only), while building.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/nb-site .whl-pytest/*.whl > "$R/pip.txt" 2>&1 &
PIP=$!

if [ -n "${DRIVE_BIN:-}" ]; then
  BIN=$(cd "$DRIVE_BIN" && pwd)
  log "no build: $BIN"
elif [ -n "${DRY:-}" ]; then
  BIN=$ROOT/build/bin
else
  log "build"
  ( OUT=$R/build; mkdir -p "$OUT"; BUILD=$BENCHD_BUILD_DIR; source scripts/gpu-lib.sh; gpu_setup > /dev/null
    gpu_build gpu-pytest -DBENCHD_BUILD_TESTS=OFF --target benchd benchd-worker benchctl ) \
    > "$R/build.txt" 2>&1
  rc=$?
  log "build: rc=$rc $(tail -1 "$R/build.txt")"
  [ "$rc" = 0 ] || exit 1
  BIN=$ROOT/$BENCHD_BUILD_DIR/bin
fi
{ echo "BIN=$BIN"; readelf -d "$BIN/benchd-worker" | grep -iE "rpath|runpath"; ls -la "$BIN"; } >> "$R/driver.txt" 2>&1
wait "$PIP"; log "pip: rc=$? $(tail -2 "$R/pip.txt")"

# Lane 1: the estimate first and alone (its forced job fills the GPU until it
# runs out of memory), then the others in turn.
lane1() {
  want estimate && run estimate 200 GPU_ESTIMATE_SKIP_BUILD=1 -- scripts/gpu-estimate.sh
  touch "$R/estimate.done"
  want precision && run precision 150 GPU_PRECISION_SKIP_BUILD=1 -- scripts/gpu-precision.sh
  want memory && run memory 180 GPU_MEMORY_SKIP_BUILD=1 \
    "GPU_MEMORY_SWEEPS=small 4 128,256 forward,train_step bf16 cpp" -- scripts/gpu-memory.sh
  want attention && run attention 150 GPU_ATTENTION_SKIP_BUILD=1 \
    "GPU_ATTENTION_GRID=--dims 64 --seqs 1024 --impls faithful,flash --precisions bf16 --passes 20" \
    -- scripts/gpu-attention.sh
}
# Lane 2: gpu-check.sh's checks (stall, parity, notebook) against one daemon
# as gpu-check.sh starts it (its ctest build aside), GPU_CHECK_DEVICES="cpu:0 cpu:1".
check() {
  set -eo pipefail
  source scripts/daemon-lib.sh
  DATA=$(mktemp -d /tmp/benchd-gpu-check-XXXXXX)
  benchd_start --copy-logs "$OUT" "$BIN" "$DATA" "$OUT/benchd.log" --metrics 127.0.0.1:0 \
    --device cuda:0 --device cpu:0 --device cpu:1
  "$BIN/benchctl" --timeout 120 node > "$OUT/node.txt" 2>&1 || true
  for _ in $(seq 1 400); do [ -e "$R/estimate.done" ] && break; sleep 0.5; done
  set +e
  BENCHD_BIN_DIR=$BIN BENCHD_GPU_TEST_ADDRESS=$BENCHD_ADDRESS BENCHD_GPU_TEST_DATA=$DATA \
    BENCHD_GPU_OUT=$OUT BENCHD_GPU_SCRIPT=gpu-check \
    BENCHD_GPU_STALL_KINDS="benchmark profile memory" BENCHD_GPU_PARITY="small:fp32 small:bf16" \
    BENCHD_GPU_NOTEBOOK=docs/notebooks/quickstart.ipynb BENCHD_GPU_NOTEBOOK_SITE=/tmp/nb-site \
    python3 -m pytest -m gpu -v -rfEs --tb=short -p no:cacheprovider tests/gpu/test_notebook.py \
    tests/gpu/test_parity.py tests/gpu/test_stall.py tests/gpu/test_cross_node.py < /dev/null 2>&1 | tee "$OUT/check.txt"
}
lane2() {  # check() starts its daemon at once, and waits for the estimate to submit
  want check && { export BIN R; run check 300 -- bash -c "$(declare -f check); check"; }
}
# Lane 3: the profile script (profile_compare cut to small and xl fp32
# forward), then the cluster.
lane3() {
  for _ in $(seq 1 400); do [ -e "$R/estimate.done" ] && break; sleep 0.5; done
  want profile && run profile 200 GPU_PROFILE_SKIP_BUILD=1 \
    "GPU_PROFILE_COMPARE=--presets small xl --modes forward --precisions fp32" -- scripts/gpu-profile.sh
  want cluster && run cluster 150 "CLUSTER_BIN=$BIN" -- scripts/gpu-cluster.sh
}
export -f log want run
export R T0 DEADLINE ONLY DRY BIN 2> /dev/null
lane1 & L1=$!
lane2 & L2=$!
lane3 & L3=$!
wait $L1 $L2 $L3
log "lanes done"
nvidia-smi --query-gpu=memory.used --format=csv,noheader >> "$R/driver.txt" 2>&1
true
