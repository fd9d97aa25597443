#!/usr/bin/env bash
# The routed-MoE kernels alone (bench/moe/kernel_bench.cu): correctness against CPU references and
# grouped-GEMM timings at Qwen1.5-MoE / Mixtral shapes, on a GPU host with nvcc, without the rest of
# peerplan. Uses STAGED_DIR/bin/moe_kernel_bench if present (built on the build machine by
#   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I. -o STAGED_DIR/bin/moe_kernel_bench \
#        bench/moe/kernel_bench.cu profiler/kernels/moe_route.cu profiler/kernels/moe_gemm.cu profiler/kernels/moe_gemm_fp8.cu -lcublas
# ), else builds it there the same way. usage: bench/moe/kernel_bench.sh [STAGED_DIR (default .gpu)]
set -u
D=${1:-.gpu}
B=$D/bin/moe_kernel_bench
if ! [ -x "$B" ] || ldd "$B" | grep -q 'not found'; then
  B=/tmp/moe_kernel_bench
  inc=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'include'))" 2>/dev/null)
  nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I. ${inc:+-I$inc} -I"$D/inc" -o $B bench/moe/kernel_bench.cu \
    profiler/kernels/moe_route.cu profiler/kernels/moe_gemm.cu profiler/kernels/moe_gemm_fp8.cu -lcublas || exit 1
fi
"$B"
