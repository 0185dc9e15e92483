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
BIN=${BENCHD_BUILD_DIR:-build}/bin
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
