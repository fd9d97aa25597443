#pragma once
// The bf16 GEMV of a decode step at batch 1-2, launched with programmatic dependent launch
// (kernels/pdl.cuh): y[M][n] = x[M][k] . W[n][k]^T, fp32 accumulation, bf16 out. Each block of 4
// warps owns 4 weight rows and splits k over its warps (lanes along k, 16-byte loads, 512
// contiguous bytes per row and load instruction); every warp issues its first weight loads before
// griddepcontrol.wait, so they overlap the previous kernel's tail. GemmRunner::run takes it for
// M <= 2 with programmatic dependent launch on (the default; PEERPLAN_PDL=0 off), since cuBLASLt's
// kernels do not take part in the launch chain, and for small matrices at M 3..8 (profiler/common/
// gemv_rule.hpp: 4- and 8-token tiles); the profiler times it through the same call.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "profiler/common/gemv_rule.hpp"

namespace peerplan::kernels {

// act: W is a gated MLP's gate_up, [gate; up] with n = 2 x inter (even), and y receives SiLU(gate) * up,
// [M][inter], in the epilogue (TensorRT-LLM's fused gated activation): no gate_up output and no separate
// activation kernel; each block owns 2 gate rows and their 2 up rows. Bit-equal to the GEMV then
// silu_mul (the sums are rounded to bf16 before the activation, silu_mul.cuh).
// Takes M <= kDenseGemvMaxM (act too), or M up to kSmallGemvMaxM where dense_gemv_small_supports (act not).
void dense_gemv(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int64_t M, int64_t n, int64_t k,
                cudaStream_t stream, bool act = false);

// The same GEMV over int8 weights with one fp32 scale per output channel (y = scale[n] * x . W[n]^T), the
// codes converted to bf16 exactly in registers (int8_codes.cuh): W8A16 at decode, one kernel where the W8A8
// path runs three (quantize x, IMMA, dequantize; gpu::QuantGemmRunner takes it at M <= kDenseGemvMaxM).
// Reads a byte a weight, 512 contiguous bytes per row and load instruction. k a multiple of 16.
// M <= 2: Llama-3.1-8B int8 decode at batch 2 ran 4.470 ms with it and 4.823 on W8A8 (two H100 leases, fp8 3.931 /
// 4.018 in each: fp8's W8A8 stays ahead at batch 2); batch 1 3.789 / 3.813 against fp8's 3.866 / 3.955 (session 26 G).
inline bool dense_gemv_int8_supports(int64_t M, int64_t n, int64_t k) {
  return dense_gemv_supports(M, n, k) && k % 16 == 0;
}

void dense_gemv_int8(const __nv_bfloat16* x, const int8_t* w, const float* w_scale, __nv_bfloat16* y, int64_t M,
                     int64_t n, int64_t k, cudaStream_t stream, bool act = false);

}  // namespace peerplan::kernels
