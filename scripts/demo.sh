#!/usr/bin/env bash
# The main job: set up, start benchd with its embedded defaults (SQLite store
# under data/, CPU worker when there is no GPU), run a real train-step
# benchmark through benchctl, print the result, stop the daemon.
#   BENCHD_PRESET / BENCHD_PRECISION override the model and precision
#   (default: small in bf16 on a GPU, mini in fp32 on a CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/daemon-lib.sh
BUILD=${BENCHD_BUILD_DIR:-build}
BIN=$BUILD/bin
DATA=${BENCHD_DATA_DIR:-data/demo}

# The data dir (and its log) outlive the demo: the log is appended to.
benchd_start --append-log "$BIN" "$DATA" "$DATA/benchd.log" --metrics 127.0.0.1:0
echo "demo: benchd is serving gRPC on $BENCHD_ADDRESS and /metrics on http://$BENCHD_METRICS_ADDRESS/metrics"

if [ -e /dev/nvidia0 ]; then PRESET=${BENCHD_PRESET:-small}; PRECISION=${BENCHD_PRECISION:-bf16}
else PRESET=${BENCHD_PRESET:-mini}; PRECISION=${BENCHD_PRECISION:-fp32}; fi

"$BIN/benchctl" node
echo "demo: benchctl submit benchmark --preset $PRESET --mode train_step --precision $PRECISION --batch-size 4 --context-length 128 --warmup-steps 5 --steps 10 --watch"
"$BIN/benchctl" --timeout 30 submit benchmark --preset "$PRESET" --mode train_step \
  --precision "$PRECISION" --batch-size 4 --context-length 128 --warmup-steps 5 --steps 10 --watch
cat <<EOF

demo: done (benchd stops now; its store and logs stay in $DATA). Next:
  $BIN/benchd --data-dir $DATA &          # serve again: gRPC 127.0.0.1:7531, /metrics 127.0.0.1:9531
  export PATH=\$PWD/$BIN:\$PATH           # benchctl, benchd, benchd-worker
  benchctl list; benchctl get 1 --csv    # this demo's job, every step
  benchctl submit benchmark --preset small --mode forward --precision bf16 --watch
  cmake --install $BUILD --prefix ~/.local     # an install that outlives this checkout
  README.md "Quick start" and "Using it"; docs/architecture.md; docs/results/
EOF
