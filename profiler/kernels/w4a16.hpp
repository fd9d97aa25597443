#pragma once
// W4A16: 4-bit weights, bf16 activations and output, fp32 accumulation (issue 15).
//
// Weight format (GPTQ-style, symmetric): W [n][k] packed as n * k / 8 uint32, nibble i (bits
// 4i..4i+3, low nibble first) of row r's word j holding k = 8j + i as a code q in 0..15; one bf16
// scale per row and group of 128 along k, scales [n][k / 128]; weight = (q - 8) * scale. This is
// GPTQ's symmetric layout with its implicit zero point 8, in PyTorch's Linear orientation. AWQ
// checkpoints (asymmetric, per-group zero points, interleaved nibbles) repack to it at load time
// with the zero point folded into a per-group bf16 bias; that bias adds one [k/128] x n GEMV of the
// activations' group sums, which this kernel does not run (it costs < 1 % of the weight bytes).
//
// Word order (W4Layout): GPTQ's row-major [n][k / 8], or tiled (the default), where the 16 bytes of
// 8 consecutive rows at one 32-k quarter of one 128-k group lie side by side: a warp's load of
// 8 rows x 4 quarters is one contiguous 512 bytes instead of 8 pieces of 64 bytes k / 2 bytes apart
// (Marlin / Machete repack the same way at load time; bench/quant/w4layout.cu measured GPTQ's
// order alone at 1.64x the packed-bytes floor on Llama-3.1-8B's GEMMs, tiled 1.35x). Every reader
// (the GEMV variants, the dequantiser, the self-test's reference) addresses words through
// w4_word_index, so the two orders differ only in two strides.
//
//   y[M, n] = x[M, k] . W^T        x, y row-major bf16; k a multiple of 128, n a multiple of 8.
//
// M <= 64: w4a16_gemm, a tensor-core GEMV: each warp streams 8-row strips of packed weights
// straight from HBM into registers (16 bytes per lane, 4 lanes per 64-byte row segment, no
// shared memory), dequantises them in registers (nibble | 0x4300 is the bf16 128 + q, minus 136
// is q - 8 exactly, times the group scale) and multiplies on mma.sync m16n8k16 against x, which
// stays in L1/L2. Split-K over k fills the GPU when n alone does not; the last warp of each
// column group to finish sums the splits (a counter per group in the workspace, no second kernel). Larger M: dequantise to bf16 in slabs of columns and run cuBLASLt
// (profiler/gpu/gemm_quant.*), what AWQ/GPTQ engines do for prefill.
#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "profiler/common/w4_layout.hpp"

namespace peerplan::kernels {

inline constexpr int kW4Group = 128;       // k elements per scale
inline constexpr int64_t kW4GemvMaxM = 64;  // w4a16_gemm handles M up to this

// The order this process packs and reads: PEERPLAN_W4_LAYOUT=tiled (default) | gptq, read once, or
// w4a16_set_layout (as the variant: before a weight's first use). The executor's weights are random
// codes, so only a weight quantized from real values (a checkpoint's, repacked) depends on it.
W4Layout w4a16_layout();
void w4a16_set_layout(W4Layout l);
const char* w4a16_layout_name(W4Layout l);

struct W4A16Gemm {
  const __nv_bfloat16* x = nullptr;  // [M][k]
  const uint32_t* w = nullptr;       // n * k / 8 words in w4a16_layout()'s order
  const __nv_bfloat16* scales = nullptr;  // [n][k/128]
  __nv_bfloat16* y = nullptr;        // [M][n]; with act [M][n / 2]
  // W is a gated MLP's gate_up ([gate; up], n = 2 x inter) and y receives SiLU(gate) * up in v7's epilogue
  // (only where w4a16_fuses_act): the activation kernel is not run. Equal to the plain call then silu_mul
  // (kernels/silu_mul.cuh) up to the order split-K's atomics add the partials in (which varies run to run).
  bool act = false;
  float* workspace = nullptr;        // w4a16_workspace_bytes(M, n, k, sms), zeroed before its first use; v7's
                                     // (w4a16_quantizes_x) is kept zero by v7 itself: share it with no other variant
  int64_t M = 0, n = 0, k = 0;
  // w4_row_stride / w4_chunk_stride of the layout, set by w4a16_gemm: the kernels take strides, not the layout,
  // so their code has no layout branch (deriving them in the kernel moved ptxas' register choices: not measured)
  int64_t w_row = 0, w_chunk = 0;
};
// Kernel variants (bench/quant compares them; the self-test checks each): 1 = v1, 2..6 the
// cp.async-ring block kernels, 7 = x quantized to int8 and dp4a at M <= kW4Dp4aMaxM (v5 above), the
// default (w4a16.cu, w4a16_variant_name). PEERPLAN_W4A16=v1..v7 (read once), or
// w4a16_set_variant; splits, workspace and the launch follow the variant in force, so set it before
// a shape's first (eager) call, not between capture and replay.
inline constexpr int kW4Variants = 7;
inline constexpr int64_t kW4Dp4aMaxM = 2;  // v7 quantizes x and runs dp4a up to this M, v5 above (faster from 4: qb, H200)
int w4a16_variant();
void w4a16_set_variant(int v);
const char* w4a16_variant_name(int v);
// Whether the kernel for M rows quantizes x to int8 (v7: per 128-k group, scale amax / 127, codes
// round-to-nearest-even) before multiplying: the self-test's reference then does the same.
bool w4a16_quantizes_x(int64_t M);
// Whether w4a16_gemm takes `act` for M rows and n: on v7 (w4a16_quantizes_x), n a multiple of 32.
bool w4a16_fuses_act(int64_t M, int64_t n);
// Split-K factor the kernel uses for this shape (1: no workspace needed).
int w4a16_splits(int64_t M, int64_t n, int64_t k, int sm_count);
size_t w4a16_workspace_bytes(int64_t M, int64_t n, int64_t k, int sm_count);
void w4a16_gemm(const W4A16Gemm& a, int sm_count, cudaStream_t stream);

// out[r][c] = (q(r, c) - 8) * scale[r][c / 128] for rows [row0, row0 + rows) of W (in w4a16_layout()'s
// order): a bf16 slab [rows][k] (row0 a multiple of 8).
void w4a16_dequant(const uint32_t* w, const __nv_bfloat16* scales, __nv_bfloat16* out, int64_t row0, int64_t rows,
                   int64_t k, cudaStream_t stream);

}  // namespace peerplan::kernels
