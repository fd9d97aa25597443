#!/usr/bin/env bash
# Session 32's prepared calls, one GPU. Binary: scripts/gpu/build.sh, packed as .gpu-pack (docs/DEVELOPING.md), the
# PyTorch references copied to .gpu-ref (cp ../shared/reference/*.py .gpu-ref/). One call <= 600 s.
#   session32.sh T   (~5 min; an H200 prices from the shipped profile's own SKU) the default activation rule's decode
#     steps beside torch_ref.py and torch_moe_fp8_ref.py in one lease (owed since session 31): Llama-3.1-8B bf16 and
#     Qwen1.5-MoE bf16 and 8B fp8 at 1 / 8 / 32 / 64, 8B W4A16 at 1 / 2 (its ratio to packed bytes on this GPU), and on
#     an H200 Mixtral-8x7B bf16 and 70B fp8 at 1 / 8 / 32 / 64 (issues 14's and 15's tables); then torch_w4a16_ref.py, 8B W4A16 through PyTorch's int4 GEMM.
set -u
PART=${1:?usage: session32.sh T}
OUT_DEFAULT=/tmp/peerplan-s32
source "$(dirname "$0")/call_lib.sh"
if [ "$PART" = T ]; then
  export MACHINE=models/hardware/h200x2-nvlink.json
  big=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{print ($1 > 120000)}')
  bench 8b llama-3.1-8b llama8b-1gpu.json bf16 1,8,32,64 1024
  bench qwen qwen1.5-moe-a2.7b qwen-moe-1gpu.json bf16 1,8,32,64 1024
  bench 8b-fp8 llama-3.1-8b llama8b-1gpu.json fp8 1,8,32,64 1024
  bench 8b-int4 llama-3.1-8b llama8b-1gpu.json int4 1,2 1024
  # Mixtral bf16 (93 GB) and 70B fp8 (70 GB) fit one H200 only.
  [ "$big" = 1 ] && bench mixtral mixtral-8x7b mixtral-1gpu.json bf16 1,8,32,64 1024
  [ "$big" = 1 ] && bench 70b-fp8 llama-3.1-70b llama70b-1gpu.json fp8 1,8,32,64 1024
  left 400 && TAIL=8 step 130 torch-ref python3 .gpu-ref/torch_ref.py "$W"
  left 480 && TAIL=12 step 110 torch-moe-ref python3 .gpu-ref/torch_moe_fp8_ref.py "$W"
  # PyTorch's int4 weight-only GEMM (tinygemm) in the same decoder: a public kernel's ratio to packed bytes.
  left 530 && TAIL=6 step 60 torch-w4a16-ref python3 scripts/gpu/torch_w4a16_ref.py "$W"
  finish
fi
echo "unknown part $PART" >&2; exit 2
