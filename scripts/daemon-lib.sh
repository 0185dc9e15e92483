# shellcheck shell=bash
# Sourced by scripts/demo.sh and scripts/gpu-*.sh: starts benchd for the
# script and stops it when the script exits. Needs bash and python3 only (no
# GPU set-up: demo.sh runs on CPU machines too).

# benchd_start [--append-log] [--copy-logs DIR] BIN DATA LOG [BENCHD_FLAGS...]
#   Starts BIN/benchd --data-dir DATA --listen 127.0.0.1:0 BENCHD_FLAGS... in
#   the background (pass --metrics, --device, ... in BENCHD_FLAGS), its stderr
#   in LOG (truncated first; appended to with --append-log), and waits until it
#   has written DATA/endpoints.json. Then:
#     BENCHD_ADDRESS          its gRPC address, exported (benchctl's default)
#     BENCHD_METRICS_ADDRESS  its /metrics host:port ("" with --metrics off)
#     BENCHD_PID              its process id
#   and an EXIT trap stops it (SIGTERM, then waits for it) and, with
#   --copy-logs, copies the workers' logs (DATA/logs/*.log) into DIR. If benchd
#   exits, or has not written endpoints.json within 30 s: LOG's tail on stderr
#   and exit 1. Call it in the script's own shell, not in $(...): the trap and
#   the variables must be the script's.
benchd_start() {
  local append="" copy_logs="" me
  me=$(basename "$0" .sh)
  while [ $# -gt 0 ]; do
    case $1 in
      --append-log) append=1; shift ;;
      --copy-logs) copy_logs=$2; shift 2 ;;
      *) break ;;
    esac
  done
  local bin=$1 data=$2 log=$3
  shift 3
  mkdir -p "$data"
  rm -f "$data/endpoints.json"
  [ -n "$append" ] || : > "$log"
  "$bin/benchd" --data-dir "$data" --listen 127.0.0.1:0 "$@" 2>>"$log" &
  BENCHD_PID=$!
  _BENCHD_DATA=$data
  _BENCHD_COPY_LOGS=$copy_logs
  trap benchd_stop EXIT
  local _
  for _ in $(seq 1 600); do
    [ -s "$data/endpoints.json" ] && break
    if ! kill -0 "$BENCHD_PID" 2>/dev/null; then
      echo "$me: benchd exited; see $log" >&2
      tail "$log" >&2
      exit 1
    fi
    sleep 0.05
  done
  if [ ! -s "$data/endpoints.json" ]; then
    echo "$me: benchd wrote no $data/endpoints.json in 30 s; see $log" >&2
    tail "$log" >&2
    exit 1
  fi
  # endpoints.json is written whole (a rename): {"grpc": ..., "metrics": ..., "pid": ...}.
  # shellcheck disable=SC2034  # BENCHD_METRICS_ADDRESS: for the caller
  read -r BENCHD_ADDRESS BENCHD_METRICS_ADDRESS < <(python3 -c \
    'import json,sys; e=json.load(open(sys.argv[1])); print(e["grpc"], e.get("metrics") or "")' \
    "$data/endpoints.json")
  export BENCHD_ADDRESS
}

# The EXIT trap of benchd_start: stops benchd and copies the workers' logs.
# Never fails, so the script keeps its own exit status.
benchd_stop() {
  if [ -n "${BENCHD_PID:-}" ]; then
    kill -TERM "$BENCHD_PID" 2>/dev/null || true
    wait "$BENCHD_PID" 2>/dev/null || true
    BENCHD_PID=""
  fi
  if [ -n "${_BENCHD_COPY_LOGS:-}" ]; then
    cp "$_BENCHD_DATA"/logs/*.log "$_BENCHD_COPY_LOGS/" 2>/dev/null || true
  fi
  return 0
}
