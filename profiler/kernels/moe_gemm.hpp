#pragma once
// Grouped expert GEMM over the non-empty experts of a routing (moe_route.hpp), on tensor cores
// (mma.sync m16n8k16 bf16, fp32 accumulate), issue 14:
//   y[row][:] = x[src(row)][:] . W[e(row)]^T   for every routed row (rows sorted by expert),
// W[e] stored [n][k] row-major (PyTorch Linear), src(row) = gather[row] (the token of the row:
// the gate_up GEMM gathers the routed tokens) or row itself (gather == nullptr: the down GEMM
// reads the activation rows in sorted order). Only experts that received rows are read.
// The grid is sized on the host for the worst case of the routing's entries; each CTA takes its
// (expert, row tile) from the device-side tile list and exits when there is none, so the call
// is capturable in a CUDA graph and needs no host synchronisation.
// Two kernels, both weights-as-M ("swap AB": expert rows are the MMA's M, routed tokens its N):
//   stream: few rows per expert (decode). Each warp streams 16 weight rows straight from HBM into
//           MMA fragments (16-byte loads; k is permuted identically for weights and tokens, which
//           a dot product allows), so the weights pass once at near HBM bandwidth.
//   tiled:  many rows per expert (prefill). 128 weight rows x 64 tokens per CTA through a 3-stage
//           cp.async shared-memory pipeline and ldmatrix.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "profiler/kernels/moe_route.hpp"

namespace peerplan::kernels {

struct MoeGemmArgs {
  const __nv_bfloat16* x = nullptr;  // input rows, row stride k
  const int* gather = nullptr;       // row -> input row (routing.token_of_row), nullptr: identity
  const __nv_bfloat16* w = nullptr;  // [local experts][n][k]; null when the experts are quantized
  // FP8 experts (issue 15): e4m3 codes [local experts][n][k] and one fp32 scale per output channel
  // of each expert, w_scale[expert * n + row] (per-channel weights, as FP8-dynamic checkpoints).
  // The gemv and stream kernels convert the codes to bf16 in registers (W8A16 at decode: the bytes
  // read are the FP8 ones); the tiled kernel converts them on their way into shared memory.
  const uint8_t* w_fp8 = nullptr;
  const float* w_scale = nullptr;
  // int8 experts (issue 15): symmetric int8 codes [local experts][n][k], weight = q * w_scale[expert * n +
  // row] (per-channel, as compressed-tensors W8A8 int8 checkpoints and vLLM's int8_w8a16 store them);
  // the FP8 experts' kernels with an int8 -> bf16 conversion (moe_gemm_fp8.cu).
  const int8_t* w_int8 = nullptr;
  // int4 experts (W4A16, issue 15): GPTQ's symmetric codes, weight = (q - 8) * scale, one bf16 scale per
  // expert row and 128 k, packed as profiler/common/w4_expert_layout.hpp says (w4e_words / w4e_scales).
  // n % 16 == 0 and k % 128 == 0. Converted to bf16 in registers (moe_gemm_int4.cu).
  const uint32_t* w_int4 = nullptr;
  const __nv_bfloat16* w_int4_scale = nullptr;
  // MXFP4 experts (gpt-oss, issue 15): e2m1 codes with one e8m0 scale byte per expert row and 32 k, packed
  // as profiler/common/mxfp4_expert_layout.hpp says (mxe_words / mxe_scales). n % 16 == 0 and k % 64 == 0.
  // Decoded to bf16 in registers (moe_gemm_mxfp4.cu).
  const uint32_t* w_mxfp4 = nullptr;
  const uint8_t* w_mxfp4_scale = nullptr;
  __nv_bfloat16* y = nullptr;        // [routed rows][n]
  // gate_up only ([gate; up] experts, n = 2 x inter): SiLU(gate) * up goes here, [routed rows][n / 2], in
  // the gemv's epilogue, and y is not written (the activation kernel is not run). Only where
  // moe_gemm_act_takes; bit-equal to the GEMM then silu_mul (kernels/silu_mul.cuh).
  __nv_bfloat16* act = nullptr;
  int64_t n = 0, k = 0;
  int64_t entries = 0;   // tokens x top-k of the routing: bounds the grid
  int64_t max_rows = 0;  // rows of the busiest expert (host figure; moe_gemm_tile_kind), 0: unknown
  int64_t touched = 0;   // experts with rows (host figure; moe_stream_split), 0: unknown
  // The gemv's weight rows per warp x unroll at 2 rows per pass: 0..4 = 4x2, 4x4, 2x4, 8x2, 2x8;
  // -1: PEERPLAN_MOE_GEMV_SHAPE, else 4x4 for one row per expert, 8x2 for two (the self-test sets
  // it to check every shape).
  int gemv_shape = -1;
};

// Throws std::invalid_argument for k not a multiple of 32 or a null operand (exactly one of w, w_fp8,
// w_int8, w_int4, w_mxfp4; w_scale with w_fp8 or w_int8, w_int4_scale with w_int4, w_mxfp4_scale with
// w_mxfp4), and for int4 experts off their n % 16, k % 128, MXFP4 ones off n % 16, k % 64.
void moe_grouped_gemm(const MoeGemmArgs& a, const MoeRouting& r, cudaStream_t stream);
// Rows [row0, row0 + rows) of int4 expert `expert` of a.w_int4 / a.w_int4_scale dequantized into out
// [rows][k] bf16, (q - 8) * scale rounded once (as the tiled int4 kernel rounds them): the eager cuBLAS
// path's slabs (gpu::QuantGemmRunner::run_4bit_expert_groups).
void moe_int4_dequant(const MoeGemmArgs& a, int expert, int64_t row0, int64_t rows, __nv_bfloat16* out,
                      cudaStream_t stream);
// The same for MXFP4 experts (a.w_mxfp4 / a.w_mxfp4_scale): code * scale, exact in bf16.
void moe_mxfp4_dequant(const MoeGemmArgs& a, int expert, int64_t row0, int64_t rows, __nv_bfloat16* out,
                       cudaStream_t stream);
// Whether a call of tile kind `kind` may set `act`: bf16 experts on the gemv kernel (moe_gemv_rows, kind 0 or
// 1, PEERPLAN_MOE_GEMV not 0), n even. Otherwise moe_grouped_gemm throws on `act`, and the caller runs the
// GEMM into y and silu_mul after it.
bool moe_gemm_act_takes(const MoeGemmArgs& a, int kind);
// PEERPLAN_MOE_GEMV: 0 turns the gemv kernel off (the stream kernel at decode sizes; A/B runs), else on.
bool moe_gemv_on();
// The same with the kernel forced (tile kind as moe_gemm_tile_kind): self-test and profiler.
void moe_grouped_gemm_kind(const MoeGemmArgs& a, const MoeRouting& r, int kind, cudaStream_t stream);
// Whether a call of tile kind `kind` runs the 8-bit tensor-core kernel (moe_gemm_w8mma.cu: FP8 / int8
// experts, tiled kind, k % 64 == 0, PEERPLAN_MOE_W8_MMA=1): the tokens are then quantized per (row, 64 k),
// which the self-test's reference must do too.
bool moe_w8mma_takes(const MoeGemmArgs& a, int kind);
// PEERPLAN_MOE_W8_MMA: 1 this kernel, 0 the bf16 tensor-core tiled one (the default while it is not measured
// faster; every profile before session 27 timed it).
bool moe_w8mma_on();
// Whether that kernel can take the call: int8 experts, or FP8 ones on compute capability 8.9+, k % 64 == 0.
bool moe_w8mma_supported(const MoeGemmArgs& a);
// The tiled kind of 8-bit experts on 8-bit tensor cores (moe_gemm_w8mma.cu) whatever the switch: the
// dispatch where moe_w8mma_takes, and the self-test, which checks it either way. Throws where unsupported.
void moe_grouped_gemm_w8mma(const MoeGemmArgs& a, const MoeRouting& r, cudaStream_t stream);

}  // namespace peerplan::kernels
