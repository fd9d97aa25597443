// Activation quantization, the int8 GEMM's epilogue and synthetic quantized weights (quant.hpp).
// All memory-bound: 16-byte loads of 8 bf16, grid-stride loops.
#include <algorithm>
#include <string>

#include <cuda_fp8.h>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/quant.hpp"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kBlock = 256;

int grid_for(int64_t n, int block) {
  const int64_t g = (n + block - 1) / block;
  return int(std::min<int64_t>(std::max<int64_t>(g, 1), 132 * 16));
}

__device__ __forceinline__ void unpack8(const uint4& u, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __bfloat1622float2(h[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

__device__ __forceinline__ uint2 to_fp8x8(const float (&f)[8], float inv) {
  uint32_t w[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(f[4 * i] * inv, f[4 * i + 1] * inv), __NV_SATFINITE, __NV_E4M3);
    const uint32_t hi =
        __nv_cvt_float2_to_fp8x2(make_float2(f[4 * i + 2] * inv, f[4 * i + 3] * inv), __NV_SATFINITE, __NV_E4M3);
    w[i] = lo | (hi << 16);
  }
  return make_uint2(w[0], w[1]);
}

__global__ void fp8_tensor_kernel(const bf16* x, uint8_t* xq, int64_t n8, const float* scale) {
  const float inv = 1.f / *scale;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    float f[8];
    unpack8(reinterpret_cast<const uint4*>(x)[i], f);
    reinterpret_cast<uint2*>(xq)[i] = to_fp8x8(f, inv);
  }
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One block per (row, column group); the group's absmax by a block reduction, then the codes.
template <bool kInt8>
__global__ void rows_kernel(const bf16* x, void* xq, float* scales, int64_t cols, int64_t group, int64_t scale_ld,
                            bool kmajor) {
  __shared__ float red[kBlock / 32];
  const int64_t r = blockIdx.x, gi = blockIdx.y;
  const bf16* xr = x + r * cols + gi * group;
  const int64_t n8 = group / 8;
  float amax = 0.f;
  for (int64_t i = threadIdx.x; i < n8; i += blockDim.x) {
    float f[8];
    unpack8(reinterpret_cast<const uint4*>(xr)[i], f);
#pragma unroll
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(f[j]));
  }
  amax = warp_max(amax);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = 0.f;
#pragma unroll
  for (int w = 0; w < kBlock / 32; ++w) amax = fmaxf(amax, red[w]);
  const float qmax = kInt8 ? kInt8Max : kFp8Max;
  const float s = amax > 0.f ? amax / qmax : 1.f;
  if (threadIdx.x == 0) scales[kmajor ? r * gridDim.y + gi : gi * scale_ld + r] = s;
  const float inv = 1.f / s;
  for (int64_t i = threadIdx.x; i < n8; i += blockDim.x) {
    float f[8];
    unpack8(reinterpret_cast<const uint4*>(xr)[i], f);
    if constexpr (kInt8) {
      uint32_t w[2] = {0, 0};
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int q = __float2int_rn(fminf(fmaxf(f[j] * inv, -kInt8Max), kInt8Max));
        w[j / 4] |= uint32_t(q & 0xff) << (8 * (j % 4));
      }
      reinterpret_cast<uint2*>(static_cast<int8_t*>(xq) + r * cols + gi * group)[i] = make_uint2(w[0], w[1]);
    } else {
      reinterpret_cast<uint2*>(static_cast<uint8_t*>(xq) + r * cols + gi * group)[i] = to_fp8x8(f, inv);
    }
  }
}

__global__ void dequant_int32_kernel(const int32_t* acc, const float* rs, const float* cs, bf16* y, int64_t rows,
                                     int64_t cols) {
  const int64_t n2 = rows * cols / 2;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n2; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = 2 * i, r = e / cols, c = e % cols;
    const int2 a = reinterpret_cast<const int2*>(acc)[i];
    const float s = rs[r];
    reinterpret_cast<__nv_bfloat162*>(y)[i] = __floats2bfloat162_rn(float(a.x) * s * cs[c], float(a.y) * s * cs[c + 1]);
  }
}

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// kind 0: e4m3 codes with exponent field 1..15 (normal, finite: never 0x7f/0xff, the NaNs);
// 1: int8 in [-127, 127]; 2: any 32-bit word (packed nibbles); 3: e8m0 scale bytes 118..121 (2^-9 .. 2^-6:
// MXFP4 weights up to 6 x 2^-6, near a checkpoint's).
__global__ void fill_codes_kernel(void* p, int64_t n, uint64_t seed, int kind) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t r = mix64(seed * 0x100000001B3ull + uint64_t(i));
    if (kind == 0) {
      uint32_t e = 1 + uint32_t(r % 15), m = uint32_t(r >> 8) & 7;
      if (e == 15 && m == 7) m = 6;
      static_cast<uint8_t*>(p)[i] = uint8_t(((r >> 16) & 1) << 7 | e << 3 | m);
    } else if (kind == 1) {
      static_cast<int8_t*>(p)[i] = int8_t(int(r % 255) - 127);
    } else if (kind == 3) {
      static_cast<uint8_t*>(p)[i] = uint8_t(118 + r % 4);
    } else {
      static_cast<uint32_t*>(p)[i] = uint32_t(r >> 17);
    }
  }
}

__global__ void fill_f32_kernel(float* p, int64_t n, uint64_t seed, float lo, float hi, bool random) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (!random) {
      p[i] = lo;
      continue;
    }
    const float u = float(mix64(seed * 0x100000001B3ull + uint64_t(i)) >> 40) * (1.0f / 16777216.0f);
    p[i] = lo + (hi - lo) * u;
  }
}

void require(bool ok, const std::string& what) {
  if (!ok) throw RuntimeError(what);
}

}  // namespace

void quantize_fp8_per_tensor(const bf16* x, uint8_t* xq, int64_t n, const float* scale, cudaStream_t stream) {
  require(n % 8 == 0, "quantize_fp8_per_tensor: n = " + std::to_string(n) + " must be a multiple of 8");
  if (n == 0) return;
  fp8_tensor_kernel<<<grid_for(n / 8, kBlock), kBlock, 0, stream>>>(x, xq, n / 8, scale);
  CUDA_CHECK_LAUNCH("quantize_fp8_per_tensor");
}

void quantize_fp8_rows(const bf16* x, uint8_t* xq, float* scales, int64_t rows, int64_t cols, int64_t group,
                       int64_t scale_ld, cudaStream_t stream, bool kmajor) {
  require(group > 0 && group % 8 == 0 && cols % group == 0 && scale_ld >= rows,
          "quantize_fp8_rows: cols (" + std::to_string(cols) + ") must be a multiple of group (" +
              std::to_string(group) + "), itself a multiple of 8, and scale_ld >= rows");
  if (rows == 0) return;
  rows_kernel<false><<<dim3(unsigned(rows), unsigned(cols / group)), kBlock, 0, stream>>>(x, xq, scales, cols, group,
                                                                                          scale_ld, kmajor);
  CUDA_CHECK_LAUNCH("quantize_fp8_rows");
}

namespace {
__global__ void pad_group_scales_kernel(const float* s, const int* offsets, int groups, float* out) {
  extern __shared__ int sh[];  // offsets[0..groups], then each group's padded start
  int* o = sh;
  int* st = sh + groups + 1;
  for (int g = threadIdx.x; g <= groups; g += blockDim.x) o[g] = offsets[g];
  __syncthreads();
  if (threadIdx.x == 0) {  // a few hundred groups at most: one thread's prefix sum
    int64_t p = 0;
    for (int g = 0; g < groups; ++g) st[g] = int(p), p += padded_group_rows(o[g + 1] - o[g]);
  }
  __syncthreads();
  for (int r = threadIdx.x; r < o[groups]; r += blockDim.x) {
    int lo = 0, hi = groups - 1;  // the last group starting at or before r: the non-empty one holding it
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (o[mid] <= r) lo = mid;
      else hi = mid - 1;
    }
    out[st[lo] + r - o[lo]] = s[r];
  }
}
}  // namespace

void pad_group_scales(const float* s, const int* offsets, int groups, float* out, cudaStream_t stream) {
  require(groups > 0 && groups <= 4096, "pad_group_scales: groups = " + std::to_string(groups) + " (1..4096)");
  pad_group_scales_kernel<<<1, 1024, size_t(2 * groups + 1) * sizeof(int), stream>>>(s, offsets, groups, out);
  CUDA_CHECK_LAUNCH("pad_group_scales");
}

void quantize_int8_rows(const bf16* x, int8_t* xq, float* scales, int64_t rows, int64_t cols, cudaStream_t stream) {
  require(cols % 8 == 0, "quantize_int8_rows: cols = " + std::to_string(cols) + " must be a multiple of 8");
  if (rows == 0) return;
  rows_kernel<true><<<dim3(unsigned(rows), 1), kBlock, 0, stream>>>(x, xq, scales, cols, cols, rows, false);
  CUDA_CHECK_LAUNCH("quantize_int8_rows");
}

void dequant_int32(const int32_t* acc, const float* rs, const float* cs, bf16* y, int64_t rows, int64_t cols,
                   cudaStream_t stream) {
  require(cols % 2 == 0, "dequant_int32: cols must be even");
  if (rows * cols == 0) return;
  dequant_int32_kernel<<<grid_for(rows * cols / 2, kBlock), kBlock, 0, stream>>>(acc, rs, cs, y, rows, cols);
  CUDA_CHECK_LAUNCH("dequant_int32");
}

void fill_random_fp8(uint8_t* p, int64_t n, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  fill_codes_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(p, n, seed, 0);
  CUDA_CHECK_LAUNCH("fill_random_fp8");
}
void fill_random_int8(int8_t* p, int64_t n, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  fill_codes_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(p, n, seed, 1);
  CUDA_CHECK_LAUNCH("fill_random_int8");
}
void fill_random_u32(uint32_t* p, int64_t n, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  fill_codes_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(p, n, seed, 2);
  CUDA_CHECK_LAUNCH("fill_random_u32");
}
void fill_random_e8m0(uint8_t* p, int64_t n, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  fill_codes_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(p, n, seed, 3);
  CUDA_CHECK_LAUNCH("fill_random_e8m0");
}
void fill_random_f32(float* p, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  if (n == 0) return;
  fill_f32_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(p, n, seed, lo, hi, true);
  CUDA_CHECK_LAUNCH("fill_random_f32");
}
void fill_f32(float* p, int64_t n, float v, cudaStream_t stream) {
  if (n == 0) return;
  fill_f32_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(p, n, 0, v, v, false);
  CUDA_CHECK_LAUNCH("fill_f32");
}

}  // namespace peerplan::kernels
