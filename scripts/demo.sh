#!/usr/bin/env bash
# The main job: set up, start benchd with its embedded defaults (SQLite store
# under data/, CPU worker when there is no GPU), run a real train-step
# benchmark through benchctl, print the result, stop the daemon.
#   BENCHD_PRESET / BENCHD_PRECISION override the model and precision
#   (default: small in bf16 on a GPU, mini in fp32 on a CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BIN=${BENCHD_BUILD_DIR:-build}/bin
DATA=${BENCHD_DATA_DIR:-data/demo}
mkdir -p "$DATA"
rm -f "$DATA/endpoints.json"

"$BIN/benchd" --data-dir "$DATA" --listen 127.0.0.1:0 --metrics 127.0.0.1:0 2>>"$DATA/benchd.log" &
DAEMON=$!
trap 'kill -TERM $DAEMON 2>/dev/null; wait $DAEMON 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do
  [ -s "$DATA/endpoints.json" ] && break
  kill -0 $DAEMON 2>/dev/null || { echo "demo: benchd exited; see $DATA/benchd.log" >&2; tail "$DATA/benchd.log" >&2; exit 1; }
  sleep 0.05
done
read -r ADDRESS METRICS < <(python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); print(e["grpc"], e["metrics"])' "$DATA/endpoints.json")
export BENCHD_ADDRESS=$ADDRESS
echo "demo: benchd is serving gRPC on $ADDRESS and /metrics on http://$METRICS/metrics"

if [ -e /dev/nvidia0 ]; then PRESET=${BENCHD_PRESET:-small}; PRECISION=${BENCHD_PRECISION:-bf16}
else PRESET=${BENCHD_PRESET:-mini}; PRECISION=${BENCHD_PRECISION:-fp32}; fi

"$BIN/benchctl" node
echo "demo: benchctl submit benchmark --preset $PRESET --mode train_step --precision $PRECISION --batch-size 4 --context-length 128 --warmup-steps 5 --steps 10 --watch"
"$BIN/benchctl" --timeout 30 submit benchmark --preset "$PRESET" --mode train_step \
  --precision "$PRECISION" --batch-size 4 --context-length 128 --warmup-steps 5 --steps 10 --watch
