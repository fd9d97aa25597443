# Source ON the GPU host, from the repository root, before running .gpu/bin/peerplan (staged by
# scripts/gpu/build.sh and sent with the device tool's carry [".gpu"]):
#   source scripts/gpu/env.sh && peerplan validate ...
export PEERPLAN_HOME=$PWD                       # shipped models/, plugins/ found from the repo root
export NCCL_NVLS_ENABLE=0                       # never NVLink multicast (shared hosts)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}   # cuBLAS(Lt) of CUDA 13
if ldd "$PWD/.gpu/bin/peerplan" | grep -q 'not found'; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/.gpu/lib; fi
export PATH=$PWD/.gpu/bin:$PATH
