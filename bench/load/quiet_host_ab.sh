#!/bin/bash
# A/B of benchd builds under bench/load on 2 cores of a GPU machine (taskset
# -c 2,3, nothing else running), where this VM's neighbours cannot add noise.
# Rounds alternate the variants; each run's full output goes to $OUT/rR-V.txt.
#
#   bench/load/quiet_host_ab.sh BUNDLE ROUNDS DURATION WATCHERS VARIANT...
#
# BUNDLE (a folder under an ignored path, carried to the device call with
# .gpu-debs) holds, made here:
#   bin-<VARIANT>/  benchd, benchd-worker, benchd_loadgen (stripped: `strip -o`)
#   stubs/benchd/v1/  bench_pb2*.py from grpc_tools, with __init__.py in benchd/
#                   and benchd/v1/, and GRPC_GENERATED_VERSION in bench_pb2_grpc.py
#                   set to the machine's grpcio (it has no grpc_tools)
#   lib/            libjemalloc.so.2 (the machine has none)
set -u
bundle=$(cd "$1" && pwd); rounds=$2; dur=$3; watchers=$4; shift 4
source .gpu-debs/unpack.sh >/dev/null 2>&1
py=/opt/torch/.venv/bin/python
torch_lib=$($py -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib
cuda_lib=$(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib | head -1)
export LD_LIBRARY_PATH="$bundle/lib:$LD_LIBRARY_PATH:$torch_lib:$cuda_lib"
# The stubs are imported once from a local copy first: on a fresh machine the
# first import straight from the carried folder failed (ModuleNotFoundError).
rm -rf /tmp/benchd-stubs && cp -r "$bundle/stubs" /tmp/benchd-stubs
$py -c "import sys; sys.path.insert(0, '/tmp/benchd-stubs'); from benchd.v1 import bench_pb2_grpc" ||
  exit 1
mkdir -p "$OUT"
for r in $(seq 1 "$rounds"); do
  for v in "$@"; do
    echo "=== round $r variant $v"
    taskset -c 2,3 $py bench/load/load.py --bin "$bundle/bin-$v" --stubs /tmp/benchd-stubs \
      --watchers "$watchers" --duration "$dur" >"$OUT/r$r-$v.txt" 2>&1
    echo "rc=$?"
    grep -E "^\| all \||CPU per unary call|RSS under load" "$OUT/r$r-$v.txt" | head -4
  done
done
