// MLA cache write + rope (profiler/kernels/mla.hpp): one warp per (token, unit), unit 0 the
// token's latent row (RMSNorm of the 512 compressed-KV values, rope of k_pe, both written to the
// cache row of (slot, position)), units 1..heads the token's q heads (rope of q_pe in place).
// Lane i owns rope pair i (dims 2i, 2i+1 of the 64), DeepSeek's interleaved layout (vLLM
// is_neox_style=False), and in unit 0 the latent dims [8i, 8i+8) and [256+8i, 256+8i+8).
// Also the host side of DeepSeek's YaRN: the inverse-frequency table and the scales.
#include <algorithm>
#include <cmath>
#include <string>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/mla.hpp"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 4;
static_assert(kMlaLatent == 2 * 32 * 8 && kMlaRope == 2 * 32, "one warp: 16 latent dims and one rope pair per lane");

__device__ __forceinline__ void unpack8(uint4 v, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = __bfloat1622float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

// Rotates the pair at p (two bf16) by (c, s); returns nothing, writes to dst.
__device__ __forceinline__ void rope_pair(const bf16* src, bf16* dst, float c, float s) {
  const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(src));
  *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(x.x * c - x.y * s, x.y * c + x.x * s);
}

__global__ void __launch_bounds__(kWarps * 32) mla_rope_cache_kernel(MlaRopeCache a) {
  const int units = a.heads + 1;
  const int64_t gw = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (gw >= a.tokens * units) return;
  const int64_t tk = gw / units;
  const int u = int(gw % units);
  const int lane = threadIdx.x % 32;
  const int pos = a.positions[tk];
  // angle = pos * inv_freq[lane] in fp32, as the engines build their cos/sin cache; sincosf with
  // full range reduction (positions reach 163840).
  const float f = a.inv_freq ? a.inv_freq[lane] : exp2f(-float(2 * lane) / float(kMlaRope) * log2f(a.theta));
  float sn, cs;
  sincosf(float(pos) * f, &sn, &cs);
  sn *= a.rope_mscale;
  cs *= a.rope_mscale;
  if (u > 0) {
    const bf16* qp = a.q + tk * a.q_row_stride + int64_t(u - 1) * a.q_head_stride + a.q_pe_offset + 2 * lane;
    bf16* qo = a.q_out + tk * a.q_out_row_stride + int64_t(u - 1) * a.q_out_head_stride + a.q_out_pe_offset + 2 * lane;
    rope_pair(qp, qo, cs, sn);
    return;
  }
  const bf16* src = a.kv + tk * a.kv_row_stride;
  bf16* dst = a.cache + (int64_t(a.token_slot[tk]) * a.max_ctx + pos) * kMlaRow;
  float x[2][8], w[2][8];
  float ss = 0.f;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    unpack8(*reinterpret_cast<const uint4*>(src + 256 * h + 8 * lane), x[h]);
    unpack8(*reinterpret_cast<const uint4*>(a.norm_weight + 256 * h + 8 * lane), w[h]);
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += x[h][i] * x[h][i];
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const float inv = rsqrtf(ss / float(kMlaLatent) + a.eps);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    uint4 o;
    uint32_t* ow = reinterpret_cast<uint32_t*>(&o);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __nv_bfloat162 v =
          __floats2bfloat162_rn(x[h][2 * i] * inv * w[h][2 * i], x[h][2 * i + 1] * inv * w[h][2 * i + 1]);
      ow[i] = *reinterpret_cast<const uint32_t*>(&v);
    }
    *reinterpret_cast<uint4*>(dst + 256 * h + 8 * lane) = o;
  }
  rope_pair(src + kMlaLatent + 2 * lane, dst + kMlaLatent + 2 * lane, cs, sn);
}

// DeepSeek's YaRN helpers (modeling_deepseek.py; vLLM rotary_embedding.py), in double.
double yarn_correction_dim(double rotations, int dim, double base, int max_pos) {
  return (dim * std::log(max_pos / (rotations * 2 * M_PI))) / (2 * std::log(base));
}
double yarn_get_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

}  // namespace

void mla_rope_and_cache(const MlaRopeCache& a, cudaStream_t stream) {
  if (a.tokens < 0 || a.heads < 0) throw RuntimeError("mla_rope_and_cache: tokens and heads must be >= 0");
  if (a.tokens == 0) return;
  if (!a.kv || !a.norm_weight || !a.positions || !a.token_slot || !a.cache)
    throw RuntimeError("mla_rope_and_cache: kv, norm_weight, positions, token_slot and cache are required");
  if (a.kv_row_stride % 8 != 0 || a.kv_row_stride < kMlaRow)
    throw RuntimeError("mla_rope_and_cache: kv_row_stride must be a multiple of 8 and at least 576");
  const int heads = a.q ? a.heads : 0;
  if (heads > 0 && (a.q_row_stride % 2 != 0 || a.q_head_stride % 2 != 0 || a.q_pe_offset % 2 != 0 ||
                    a.q_pe_offset + kMlaRope > a.q_head_stride ||
                    a.q_row_stride < int64_t(heads - 1) * a.q_head_stride + a.q_pe_offset + kMlaRope))
    throw RuntimeError("mla_rope_and_cache: q_row_stride, q_head_stride and q_pe_offset must be even, q_pe inside its "
                       "head (q_pe_offset + 64 <= q_head_stride) and every head inside the row");
  if (a.max_ctx <= 0) throw RuntimeError("mla_rope_and_cache: max_ctx must be > 0");
  MlaRopeCache p = a;
  p.heads = heads;
  if (!p.q_out) {  // in place
    p.q_out = a.q;
    p.q_out_row_stride = a.q_row_stride;
    p.q_out_head_stride = a.q_head_stride;
    p.q_out_pe_offset = a.q_pe_offset;
  }
  if (heads > 0 && (p.q_out_row_stride % 2 != 0 || p.q_out_head_stride % 2 != 0 || p.q_out_pe_offset % 2 != 0 ||
                    p.q_out_pe_offset + kMlaRope > p.q_out_head_stride ||
                    p.q_out_row_stride < int64_t(heads - 1) * p.q_out_head_stride + p.q_out_pe_offset + kMlaRope))
    throw RuntimeError("mla_rope_and_cache: q_out's strides and offset must be even, q_pe inside its head and every "
                       "head inside the row");
  const int64_t blocks = (a.tokens * (heads + 1) + kWarps - 1) / kWarps;
  if (blocks > 0x7fffffff) throw RuntimeError("mla_rope_and_cache: " + std::to_string(a.tokens) + " tokens exceed the grid");
  mla_rope_cache_kernel<<<unsigned(blocks), kWarps * 32, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH("mla_rope_and_cache");
}

MlaRope mla_yarn_rope(double theta, double factor, int original_max_position, double beta_fast, double beta_slow,
                      double mscale, double mscale_all_dim) {
  constexpr int dim = kMlaRope, half = kMlaRope / 2;
  MlaRope r;
  r.inv_freq.resize(half);
  if (factor <= 1) {
    for (int i = 0; i < half; ++i) r.inv_freq[size_t(i)] = float(std::pow(theta, -2.0 * i / dim));
    return r;
  }
  // yarn_find_correction_range(beta_fast, beta_slow, dim, base, original_max_position)
  double low = std::floor(yarn_correction_dim(beta_fast, dim, theta, original_max_position));
  double high = std::ceil(yarn_correction_dim(beta_slow, dim, theta, original_max_position));
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // yarn_linear_ramp_mask
  for (int i = 0; i < half; ++i) {
    const double pos_freq = std::pow(theta, 2.0 * i / dim);
    const double extrapolation = 1.0 / pos_freq, interpolation = 1.0 / (factor * pos_freq);
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double mask = 1.0 - ramp;  // extrapolation_factor 1
    // The engines compute this in fp32; rounding the double result once is within an ulp of it.
    r.inv_freq[size_t(i)] = float(interpolation * (1 - mask) + extrapolation * mask);
  }
  r.mscale = float(yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim));
  return r;
}

float mla_softmax_scale(int qk_nope_head_dim, int qk_rope_head_dim, double yarn_factor, double mscale_all_dim) {
  const double base = 1.0 / std::sqrt(double(qk_nope_head_dim + qk_rope_head_dim));
  const double m = yarn_factor > 1 ? yarn_get_mscale(yarn_factor, mscale_all_dim) : 1.0;
  return float(base * m * m);
}

}  // namespace peerplan::kernels
