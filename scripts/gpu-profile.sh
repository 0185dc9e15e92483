#!/usr/bin/env bash
# The profile request on a GPU machine (after `source .gpu-debs/unpack.sh`):
# builds into build-gpu (or reuses it), starts benchd on cuda:0, runs
# bench/profile_compare.py (benchd's profile against torch.profiler on the
# Python reference: small and xl, forward and train_step, fp32 and bf16, batch
# 4, context 256) and fetches one trace through benchctl to check it is a
# Chrome trace with the named ranges. Everything lands in $OUT (default gpu-out):
#   profile.md                  the tables and checks (docs/results/<gpu>-profile.md)
#   profile/profile-*.json|txt  each job (benchctl get --json, and as printed)
#   trace-check.txt             the fetched trace's size, events and ranges
#   GPU_PROFILE_SKIP_BUILD=1    use build-gpu as it is
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT/profile"
BUILD=${BENCHD_BUILD_DIR:-build-gpu}
source scripts/gpu-lib.sh
source scripts/daemon-lib.sh
gpu_setup

[ -n "${GPU_PROFILE_SKIP_BUILD:-}" ] || gpu_build gpu-profile -DBENCHD_TEST_PYTHON=/nonexistent \
  --target benchd benchd-worker benchctl

BIN=$BUILD/bin
DATA=$(mktemp -d /tmp/benchd-gpu-profile-XXXXXX)
benchd_start --copy-logs "$OUT" "$BIN" "$DATA" "$OUT/benchd.log" --metrics 127.0.0.1:0 --device cuda:0
"$BIN/benchctl" --timeout 120 node | tee "$OUT/node.txt"

# One trace through FetchArtifact: valid JSON, kernels and the named ranges in it.
"$BIN/benchctl" submit profile --preset small --context-length 256 --profile-steps 2 --watch \
  --trace "$OUT/trace-small.json" < /dev/null > "$OUT/profile-small-cli.txt" 2>&1 || { tail -30 "$OUT/profile-small-cli.txt"; exit 1; }
python3 - "$OUT/trace-small.json" <<'PY' | tee "$OUT/trace-check.txt"
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"]
cats = {}
for e in ev:
    cats[e.get("cat")] = cats.get(e.get("cat"), 0) + 1
ann = {e["name"] for e in ev if e.get("cat") == "gpu_user_annotation" or e.get("cat") == "user_annotation"}
need = {"step", "forward", "attention.softmax"}
print(f"trace {sys.argv[1]}: {len(ev)} events, by category {dict(sorted(cats.items(), key=lambda x: str(x[0])))}")
print(("PASS" if need <= ann and cats.get("kernel", 0) > 0 else "FAIL") +
      f" trace has kernels ({cats.get('kernel', 0)}) and the ranges {sorted(need & ann)}")
PY
rm -f "$OUT/trace-small.json"  # large; the check above is what comes back

python3 bench/profile_compare.py --benchctl "$BIN/benchctl" --out "$OUT/profile" | tee "$OUT/profile.md"
