#!/usr/bin/env bash
# The data-parallel tables beyond the course's 2-GPU setup, on a machine with 4 GPUs
# (after `source .gpu-debs/unpack.sh`; build-gpu already built by scripts/gpu-ddp.sh, or
# built here): each case one scripts/gpu-ddp.sh run (fp32, fused AdamW, its own daemon),
# its outputs prefixed by the case's name in $OUT:
#   weak-       4 GPUs, global batch 16 (4 per rank, the 2-GPU table's per-rank work),
#               beside PyTorch DDP
#   threads4-   4 GPUs, global batch 8, the workers with 4 intra-op threads
#               (BENCHD_WORKER_THREADS=4): is the 2-per-rank step's spread the host's?
#   ctas-dflt-, ctas4-  2 GPUs, global batch 8, overlap and bucketed 100 MB with NCCL's
#               default CTAs and with NCCL_MAX_CTAS=4: fewer SMs for NCCL, less
#               contention with the backward, more exposed time per call
#   ctas8-, ctas16-, simple-, regbuf-  2 GPUs as ctas-dflt, with NCCL_MAX_CTAS=8, =16,
#               NCCL_PROTO=Simple, and NCCL user-buffer registration through PyTorch's
#               allocator hook (TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1 with
#               expandable segments): what of the 2-GPU exposure is NCCL's configuration
#   course-     4 GPUs, the course's setup (global batch 8): every variant, buckets 25, 100,
#               1000 MB, both optimizers, beside PyTorch DDP
#   GPU_DDP_X4_CASES  which cases (default "weak threads4 ctas-dflt ctas4")
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export OUT GPU_DDP_CTEST=none GPU_DDP_PRECISIONS=fp32 GPU_DDP_OPTIMIZER_IMPL=fused \
  GPU_DDP_OPTIMIZERS=adamw GPU_DDP_STEPS=${GPU_DDP_STEPS:-8}
[ -x "${BENCHD_BUILD_DIR:-build-gpu}/bin/benchd" ] && export GPU_DDP_SKIP_BUILD=1
for c in ${GPU_DDP_X4_CASES:-weak threads4 ctas-dflt ctas4}; do
  echo "=== case $c"
  case $c in
    weak) GPU_DDP_TAG=weak- GPU_DDP_WORLD=4 GPU_DDP_BATCH=16 GPU_DDP_PEERS=ddp \
      GPU_DDP_VARIANTS=overlap,bucketed GPU_DDP_BUCKET_MB=25,100 scripts/gpu-ddp.sh ;;
    threads4) BENCHD_WORKER_THREADS=4 GPU_DDP_TAG=threads4- GPU_DDP_WORLD=4 GPU_DDP_PEERS=none \
      GPU_DDP_VARIANTS=overlap scripts/gpu-ddp.sh ;;
    ctas-dflt) GPU_DDP_TAG=ctas-dflt- GPU_DDP_WORLD=2 GPU_DDP_PEERS=none \
      GPU_DDP_VARIANTS=overlap,bucketed GPU_DDP_BUCKET_MB=100 scripts/gpu-ddp.sh ;;
    ctas4) NCCL_MAX_CTAS=4 GPU_DDP_TAG=ctas4- GPU_DDP_WORLD=2 GPU_DDP_PEERS=none \
      GPU_DDP_VARIANTS=overlap,bucketed GPU_DDP_BUCKET_MB=100 scripts/gpu-ddp.sh ;;
    ctas8|ctas16) NCCL_MAX_CTAS=${c#ctas} GPU_DDP_TAG=$c- GPU_DDP_WORLD=2 GPU_DDP_PEERS=none \
      GPU_DDP_VARIANTS=overlap,bucketed GPU_DDP_BUCKET_MB=100 scripts/gpu-ddp.sh ;;
    simple) NCCL_PROTO=Simple GPU_DDP_TAG=simple- GPU_DDP_WORLD=2 GPU_DDP_PEERS=none \
      GPU_DDP_VARIANTS=overlap,bucketed GPU_DDP_BUCKET_MB=100 scripts/gpu-ddp.sh ;;
    regbuf) TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1 \
      PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True GPU_DDP_TAG=regbuf- GPU_DDP_WORLD=2 \
      GPU_DDP_PEERS=none GPU_DDP_VARIANTS=overlap,bucketed GPU_DDP_BUCKET_MB=100 scripts/gpu-ddp.sh ;;
    course) GPU_DDP_TAG=course- GPU_DDP_WORLD=4 GPU_DDP_PEERS=ddp \
      GPU_DDP_OPTIMIZERS=adamw,sharded_adamw GPU_DDP_BUCKET_MB=25,100,1000 scripts/gpu-ddp.sh ;;
    *) echo "gpu-ddp-x4: unknown case $c"; exit 2 ;;
  esac
  export GPU_DDP_SKIP_BUILD=1
done
