#pragma once
// Quantization kernels around the executor's quantized GEMMs (issue 15): activations to FP8 e4m3
// or int8 before a W8A8 GEMM, the int8 GEMM's int32 -> bf16 epilogue, and synthetic quantized
// weights (random codes, never zeros). Host-callable; every launch is checked.
//
// Number formats: FP8 is OCP e4m3 (max 448, saturating conversion); int8 is symmetric (max 127).
// A scale s means value = code * s (what checkpoints store as weight_scale / weight_scale_inv).
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace peerplan::kernels {

inline constexpr float kFp8Max = 448.f;
inline constexpr float kInt8Max = 127.f;

// xq[i] = e4m3(x[i] / *scale) over n elements (a multiple of 8); scale: device float (static
// per-tensor activation scale, as FP8 checkpoints with activation_scheme "static" ship it).
void quantize_fp8_per_tensor(const __nv_bfloat16* x, uint8_t* xq, int64_t n, const float* scale, cudaStream_t stream);
// Dynamic scales: each row's groups of `group` columns (group = cols: one scale per row; 128:
// DeepSeek-style 1x128 blocks) get scale = absmax / 448 (1 when the group is all zeros).
// scales[(c / group) * scale_ld + r]: row-contiguous per column group (cuBLASLt's outer-vector
// layout); scale_ld >= rows. kmajor: scales[r * (cols / group) + c / group] instead. cols a
// multiple of 8 and of group.
void quantize_fp8_rows(const __nv_bfloat16* x, uint8_t* xq, float* scales, int64_t rows, int64_t cols, int64_t group,
                       int64_t scale_ld, cudaStream_t stream, bool kmajor = false);
// Row scales of consecutive row groups (rows [offsets[g], offsets[g+1]), offsets on the device, offsets[0]
// = 0) copied so each group starts at a multiple of 4 floats: out[start(g) + r - offsets[g]] = s[r], start(g)
// the sum of the earlier groups' rows rounded up to 4 (padded_group_start). cuBLASLt refuses an
// outer-vector scale pointer that is not 16-byte aligned (CUBLAS_STATUS_NOT_SUPPORTED, H100 2026-12-06),
// and a grouped GEMM's experts start at any row. out holds rows + 3 * groups floats. One block.
void pad_group_scales(const float* s, const int* offsets, int groups, float* out, cudaStream_t stream);
__host__ __device__ constexpr int64_t padded_group_rows(int64_t rows) { return (rows + 3) / 4 * 4; }
// Per-row dynamic int8: scales[r] = absmax / 127.
void quantize_int8_rows(const __nv_bfloat16* x, int8_t* xq, float* scales, int64_t rows, int64_t cols,
                        cudaStream_t stream);
// y[r][c] = bf16(acc[r][c] * row_scale[r] * col_scale[c])   (acc int32 [rows][cols], cols even)
void dequant_int32(const int32_t* acc, const float* row_scale, const float* col_scale, __nv_bfloat16* y, int64_t rows,
                   int64_t cols, cudaStream_t stream);

// Synthetic quantized weights: random codes from a hash of (seed, index).
void fill_random_fp8(uint8_t* p, int64_t n, uint64_t seed, cudaStream_t stream);   // |v| in [2^-6, 448), both signs
void fill_random_int8(int8_t* p, int64_t n, uint64_t seed, cudaStream_t stream);   // [-127, 127]
void fill_random_u32(uint32_t* p, int64_t n, uint64_t seed, cudaStream_t stream);  // packed int4: any nibbles
void fill_random_e8m0(uint8_t* p, int64_t n, uint64_t seed, cudaStream_t stream); // MXFP4 scales 2^-9 .. 2^-6
void fill_random_f32(float* p, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);
void fill_f32(float* p, int64_t n, float v, cudaStream_t stream);

}  // namespace peerplan::kernels
