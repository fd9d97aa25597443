#pragma once
// SiLU(gate) * up of one element: the activation kernel (elementwise.cu silu_mul) and the GEMV epilogues
// that fuse it into the gate_up GEMM (dense_gemv_act, the MoE gemv, W4A16 v7) compute it with this one
// expression, so a fused and an unfused step give the same bits.
#include <cuda_bf16.h>

namespace peerplan::kernels {

__device__ __forceinline__ float silu_mul_of(float g, float u) { return g / (1.f + __expf(-g)) * u; }

// From the GEMM's fp32 sums: each rounded to bf16 first, as the unfused gate_up GEMM writes them.
__device__ __forceinline__ __nv_bfloat16 silu_mul_rounded(float gate_sum, float up_sum) {
  return __float2bfloat16(silu_mul_of(__bfloat162float(__float2bfloat16(gate_sum)),
                                      __bfloat162float(__float2bfloat16(up_sum))));
}

}  // namespace peerplan::kernels
