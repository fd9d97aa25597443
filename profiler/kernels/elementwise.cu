// Memory-bound decoder-layer kernels: 16-byte accesses (8 bf16 per thread), fp32 arithmetic.
#include <cmath>
#include <string>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/elementwise.hpp"
#include "profiler/kernels/kv_fp8.cuh"
#include "profiler/kernels/pdl.cuh"
#include "profiler/kernels/silu_mul.cuh"

namespace peerplan::kernels {
namespace {

constexpr int kBlock = 256;

__device__ inline void load8(const __nv_bfloat16* p, float* f) {
  uint4 u = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 v = __bfloat1622float2(h[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}
__device__ inline void store8(__nv_bfloat16* p, const float* f) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}

__device__ inline float block_sum(float v) {
  __shared__ float part[kBlock / 32];
  __shared__ float total;
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float s = threadIdx.x < kBlock / 32 ? part[threadIdx.x] : 0.f;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (threadIdx.x == 0) total = s;
  }
  __syncthreads();
  return total;
}

// Hidden sizes up to kBlock*8*kVec elements keep the row in registers (one read of x): kVec 4
// (8192 elements) for every hidden size up to 8192, as before; kVec 8 (16384) above it, chosen at
// launch (64 floats of the row per thread). Its launch bounds ask for 2 resident blocks (ptxas -v,
// sm_90: 108 registers rmsnorm, 86 add_rmsnorm, no spills; with kVec 4's bounds add_rmsnorm spilled
// 8 bytes); minimum 0 leaves kVec 4 as it was (58 and 48 registers).
constexpr int kMaxVec = 4;   // 8192 elements
constexpr int kWideVec = 8;  // 16384 elements

template <bool kAdd, int kVec = kMaxVec>
__global__ void __launch_bounds__(kBlock, kVec > 4 ? 2 : 0) norm_kernel(const __nv_bfloat16* x, __nv_bfloat16* residual,
                                                      const __nv_bfloat16* w, __nv_bfloat16* out, int64_t hidden,
                                                      float eps) {
  constexpr int kMaxVec = kVec;  // the row pieces this instantiation holds
  pdl::wait();
  pdl::launch_dependents();
  const int64_t t = blockIdx.x;
  const __nv_bfloat16* xr = x + t * hidden;
  __nv_bfloat16* rr = kAdd ? residual + t * hidden : nullptr;
  float v[kMaxVec][8];
  float ss = 0;
#pragma unroll
  for (int i = 0; i < kMaxVec; ++i) {
    const int64_t c = (int64_t(i) * kBlock + threadIdx.x) * 8;
    if (c < hidden) {
      load8(xr + c, v[i]);
      if (kAdd) {
        float r[8];
        load8(rr + c, r);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[i][j] += r[j];
        store8(rr + c, v[i]);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += v[i][j] * v[i][j];
    }
  }
  const float inv = rsqrtf(block_sum(ss) / float(hidden) + eps);
#pragma unroll
  for (int i = 0; i < kMaxVec; ++i) {
    const int64_t c = (int64_t(i) * kBlock + threadIdx.x) * 8;
    if (c < hidden) {
      float wv[8], o[8];
      load8(w + c, wv);
#pragma unroll
      for (int j = 0; j < 8; ++j) o[j] = v[i][j] * inv * wv[j];
      store8(out + t * hidden + c, o);
    }
  }
}

__global__ void add_kernel(__nv_bfloat16* a, const __nv_bfloat16* b, int64_t n8) {
  pdl::wait();
  pdl::launch_dependents();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    float x[8], y[8];
    load8(a + i * 8, x);
    load8(b + i * 8, y);
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] += y[j];
    store8(a + i * 8, x);
  }
}

__global__ void silu_mul_kernel(const __nv_bfloat16* in, __nv_bfloat16* out, int64_t tokens, int64_t inter) {
  pdl::wait();
  pdl::launch_dependents();
  const int64_t per_row = inter / 8;
  const int64_t n = tokens * per_row;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / per_row, c = (i % per_row) * 8;
    float g[8], u[8], o[8];
    load8(in + t * 2 * inter + c, g);
    load8(in + t * 2 * inter + inter + c, u);
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j] = silu_mul_of(g[j], u[j]);
    store8(out + t * inter + c, o);
  }
}

__global__ void embed_kernel(const int* ids, const __nv_bfloat16* table, __nv_bfloat16* out, __nv_bfloat16* zero,
                             int64_t vocab, int64_t hidden) {
  const int64_t t = blockIdx.x;
  const int id = ids[t];
  for (int64_t c = threadIdx.x * 8; c < hidden; c += blockDim.x * 8) {
    uint4 v = make_uint4(0, 0, 0, 0);
    if (zero) *reinterpret_cast<uint4*>(zero + t * hidden + c) = v;
    if (id >= 0 && id < vocab) v = *reinterpret_cast<const uint4*>(table + int64_t(id) * hidden + c);
    *reinterpret_cast<uint4*>(out + t * hidden + c) = v;
  }
}

// A warp per (token, head) of the fused row, kRotWarps heads per block, over a flat grid so a decode
// batch of one token still spreads its heads over SMs (one block per token ran 32+ heads through
// one SM: 10.8 us at Qwen1.5-MoE decode batch 1 and 3.5x the bytes' time at prefill, 2026-12-04).
// Lane l holds the bf16 pairs (2p, 2p+1) and (half+2p, half+2p+1) for p = l, l+32, ...: 4-byte
// accesses, 128 contiguous bytes per half-warp. q and k heads are rotated in place; k heads are
// then written into the cache from registers and v heads copied, so no block-wide barrier.
// KV: bf16 cache, or uint8_t for an FP8 e4m3 cache (codes = value / scale, saturating).
constexpr int kRotWarps = 4;

template <class KV>
__device__ __forceinline__ void store_kv2(KV* cache, int64_t at, float2 v, float inv_scale) {
  if constexpr (sizeof(KV) == 1) {
    const uint32_t w = __nv_cvt_float2_to_fp8x2(make_float2(v.x * inv_scale, v.y * inv_scale), __NV_SATFINITE, __NV_E4M3);
    *reinterpret_cast<uint16_t*>(cache + at) = uint16_t(w);
  } else {
    *reinterpret_cast<__nv_bfloat162*>(cache + at) = __floats2bfloat162_rn(v.x, v.y);
  }
}

template <class KV>
__global__ void __launch_bounds__(kRotWarps * 32) rotary_cache_kernel(RotaryCache a, KV* kc, KV* vc) {
  pdl::wait();
  pdl::launch_dependents();
  const int nh = a.heads + 2 * a.kv_heads;
  const int64_t g = int64_t(blockIdx.x) * kRotWarps + threadIdx.x / 32;
  if (g >= a.tokens * nh) return;
  const int64_t t = g / nh;
  const int h = int(g % nh);
  const int lane = threadIdx.x % 32;
  const int D = a.head_dim, half = D / 2;
  __nv_bfloat16* hp = a.qkv + t * int64_t(nh) * D + int64_t(h) * D;
  const int pos = a.positions[t];
  const bool is_v = h >= a.heads + a.kv_heads, is_k = !is_v && h >= a.heads;
  int64_t dst = 0;
  if (is_k || is_v) dst = ((int64_t(a.token_slot[t]) * a.kv_heads + (h - a.heads - (is_v ? a.kv_heads : 0))) * a.max_ctx + pos) * D;
  const float lt = log2f(a.theta);
  for (int p = lane; 2 * p < half; p += 32) {
    __nv_bfloat162* lo = reinterpret_cast<__nv_bfloat162*>(hp + 2 * p);
    __nv_bfloat162* hi = reinterpret_cast<__nv_bfloat162*>(hp + half + 2 * p);
    float2 x0 = __bfloat1622float2(*lo), x1 = __bfloat1622float2(*hi);
    if (!is_v) {
      // inv_freq = theta^(-2j/D); angle = pos * inv_freq, for j = 2p and 2p + 1
      float s0, c0, s1, c1;
      sincosf(float(pos) * exp2f(-2.f * float(2 * p) / float(D) * lt), &s0, &c0);
      sincosf(float(pos) * exp2f(-2.f * float(2 * p + 1) / float(D) * lt), &s1, &c1);
      const float2 r0 = make_float2(x0.x * c0 - x1.x * s0, x0.y * c1 - x1.y * s1);
      const float2 r1 = make_float2(x1.x * c0 + x0.x * s0, x1.y * c1 + x0.y * s1);
      const __nv_bfloat162 b0 = __floats2bfloat162_rn(r0.x, r0.y), b1 = __floats2bfloat162_rn(r1.x, r1.y);
      *lo = b0;
      *hi = b1;
      // the cache holds what attention reads from the row: the bf16-rounded rotated values
      x0 = __bfloat1622float2(b0);
      x1 = __bfloat1622float2(b1);
    }
    if (is_k) {
      store_kv2(kc, dst + 2 * p, x0, 1.f / a.k_scale);
      store_kv2(kc, dst + half + 2 * p, x1, 1.f / a.k_scale);
    } else if (is_v) {
      store_kv2(vc, dst + 2 * p, x0, 1.f / a.v_scale);
      store_kv2(vc, dst + half + 2 * p, x1, 1.f / a.v_scale);
    }
  }
}

__device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__global__ void fill_random_kernel(__nv_bfloat16* p, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t r = splitmix64(seed * 0x100000001B3ull + uint64_t(i));
    const float u = float(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    p[i] = __float2bfloat16((2.f * u - 1.f) * scale);
  }
}

__global__ void fill_value_kernel(__nv_bfloat16* p, int64_t n, float v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(v);
}

int grid_for(int64_t n, int block) {
  const int64_t g = (n + block - 1) / block;
  return int(std::min<int64_t>(std::max<int64_t>(g, 1), 132 * 16));
}

void require_multiple_of_8(int64_t v, const char* what, const char* kernel) {
  if (v % 8 != 0)
    throw RuntimeError(std::string(kernel) + ": " + what + " = " + std::to_string(v) +
                       " must be a multiple of 8 (16-byte vector accesses)");
}

static_assert(int64_t(kBlock) * 8 * kWideVec == kMaxNormHidden, "the widest norm instantiation");

}  // namespace

void rmsnorm(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, int64_t tokens, int64_t hidden,
             float eps, cudaStream_t stream) {
  require_multiple_of_8(hidden, "hidden", "rmsnorm");
  if (hidden > kMaxNormHidden)
    throw RuntimeError("rmsnorm: hidden " + std::to_string(hidden) + " > " + std::to_string(kMaxNormHidden) +
                       " not instantiated");
  if (tokens == 0) return;
  if (hidden > int64_t(kBlock) * 8 * kMaxVec)
    pdl::launch(norm_kernel<false, kWideVec>, dim3(unsigned(tokens)), dim3(kBlock), 0, stream, x, nullptr, w, out, hidden, eps);
  else
    pdl::launch(norm_kernel<false>, dim3(unsigned(tokens)), dim3(kBlock), 0, stream, x, nullptr, w, out, hidden, eps);
  CUDA_CHECK_LAUNCH("rmsnorm");
}

void add_rmsnorm(const __nv_bfloat16* x, __nv_bfloat16* residual, const __nv_bfloat16* w, __nv_bfloat16* out,
                 int64_t tokens, int64_t hidden, float eps, cudaStream_t stream) {
  require_multiple_of_8(hidden, "hidden", "add_rmsnorm");
  if (hidden > kMaxNormHidden)
    throw RuntimeError("add_rmsnorm: hidden " + std::to_string(hidden) + " > " + std::to_string(kMaxNormHidden) +
                       " not instantiated");
  if (tokens == 0) return;
  if (hidden > int64_t(kBlock) * 8 * kMaxVec)
    pdl::launch(norm_kernel<true, kWideVec>, dim3(unsigned(tokens)), dim3(kBlock), 0, stream, x, residual, w, out, hidden, eps);
  else
    pdl::launch(norm_kernel<true>, dim3(unsigned(tokens)), dim3(kBlock), 0, stream, x, residual, w, out, hidden, eps);
  CUDA_CHECK_LAUNCH("add_rmsnorm");
}

void residual_add(__nv_bfloat16* a, const __nv_bfloat16* b, int64_t n, cudaStream_t stream) {
  require_multiple_of_8(n, "n", "residual_add");
  if (n == 0) return;
  pdl::launch(add_kernel, dim3(grid_for(n / 8, kBlock)), dim3(kBlock), 0, stream, a, b, n / 8);
  CUDA_CHECK_LAUNCH("residual_add");
}

void silu_mul(const __nv_bfloat16* in, __nv_bfloat16* out, int64_t tokens, int64_t inter, cudaStream_t stream) {
  require_multiple_of_8(inter, "intermediate", "silu_mul");
  if (tokens == 0) return;
  pdl::launch(silu_mul_kernel, dim3(grid_for(tokens * inter / 8, kBlock)), dim3(kBlock), 0, stream, in, out, tokens, inter);
  CUDA_CHECK_LAUNCH("silu_mul");
}

void embedding_gather(const int* ids, const __nv_bfloat16* table, __nv_bfloat16* out, int64_t tokens, int64_t vocab,
                      int64_t hidden, cudaStream_t stream, __nv_bfloat16* zero) {
  require_multiple_of_8(hidden, "hidden", "embedding_gather");
  if (tokens == 0) return;
  embed_kernel<<<unsigned(tokens), 128, 0, stream>>>(ids, table, out, zero, vocab, hidden);
  CUDA_CHECK_LAUNCH("embedding_gather");
}

void rotary_and_cache(const RotaryCache& a, cudaStream_t stream) {
  require_multiple_of_8(a.head_dim, "head_dim", "rotary_and_cache");
  if (a.tokens == 0) return;
  const bool fp8 = a.k_cache_fp8 != nullptr;
  if (fp8 != (a.v_cache_fp8 != nullptr))
    throw RuntimeError("rotary_and_cache: an FP8 KV cache needs both k_cache_fp8 and v_cache_fp8");
  const int64_t blocks = (a.tokens * (a.heads + 2 * a.kv_heads) + kRotWarps - 1) / kRotWarps;
  if (blocks > 0x7fffffff) throw RuntimeError("rotary_and_cache: " + std::to_string(a.tokens) + " tokens exceed the grid");
  if (fp8) pdl::launch(rotary_cache_kernel<uint8_t>, dim3(unsigned(blocks)), dim3(kRotWarps * 32), 0, stream, a, a.k_cache_fp8, a.v_cache_fp8);
  else pdl::launch(rotary_cache_kernel<__nv_bfloat16>, dim3(unsigned(blocks)), dim3(kRotWarps * 32), 0, stream, a, a.k_cache, a.v_cache);
  CUDA_CHECK_LAUNCH("rotary_and_cache");
}

void fill_random(__nv_bfloat16* p, int64_t n, uint64_t seed, float scale, cudaStream_t stream) {
  if (n == 0) return;
  fill_random_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(p, n, seed, scale);
  CUDA_CHECK_LAUNCH("fill_random");
}

void fill_value(__nv_bfloat16* p, int64_t n, float v, cudaStream_t stream) {
  if (n == 0) return;
  fill_value_kernel<<<grid_for(n, kBlock), kBlock, 0, stream>>>(p, n, v);
  CUDA_CHECK_LAUNCH("fill_value");
}

}  // namespace peerplan::kernels
