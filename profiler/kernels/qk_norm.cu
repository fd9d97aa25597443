// Qwen3's per-head QK-norm: a warp per kHeadsPerWarp (token, head) pairs, each head's values in
// registers (bf16 pairs, 4-byte accesses: a warp reads a head_dim-128 head as one 256-byte run),
// the sums of squares by warp shuffles, fp32 arithmetic, written back in place.
#include <string>

#include "planner/core/error.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/qk_norm.hpp"

namespace peerplan::kernels {
namespace {

constexpr int kWarps = 8;                           // warps per block
constexpr int kHeadsPerWarp = 4;                    // (token, head) pairs a warp normalises, loads first
constexpr int kPairs = kQkNormMaxHeadDim / 2 / 32;  // bf16 pairs per lane at the largest head_dim

// Warp w takes the (token, head) pairs w * kHeadsPerWarp + j, heads numbered q 0..heads-1 then k
// (contiguous at the row's start). All its loads are issued before the first reduction: one head a
// warp left too few bytes in flight (2.6 of the H200's ~4.3 TB/s at 8192 tokens).
__global__ void __launch_bounds__(kWarps * 32) qk_norm_kernel(QkNormArgs a) {
  const int nh = a.heads + a.kv_heads;
  const int64_t total = a.tokens * nh;
  const int64_t first = (int64_t(blockIdx.x) * kWarps + threadIdx.x / 32) * kHeadsPerWarp;
  if (first >= total) return;  // a whole warp leaves together: the shuffles below stay full
  const int lane = threadIdx.x % 32;
  const int pairs = a.head_dim / 2;
  float2 v[kHeadsPerWarp][kPairs];
  float ss[kHeadsPerWarp];
#pragma unroll
  for (int j = 0; j < kHeadsPerWarp; ++j) {
    const int64_t g = first + j;  // warp-uniform: a pair past the end is all zeros and never stored
    const __nv_bfloat162* x = reinterpret_cast<const __nv_bfloat162*>(
        a.qkv + (g / nh) * a.row_stride + int64_t(g % nh) * a.head_dim);
    ss[j] = 0.f;
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const int p = lane + 32 * i;
      v[j][i] = g < total && p < pairs ? __bfloat1622float2(x[p]) : make_float2(0.f, 0.f);
      ss[j] += v[j][i].x * v[j][i].x + v[j][i].y * v[j][i].y;
    }
  }
#pragma unroll
  for (int j = 0; j < kHeadsPerWarp; ++j) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) ss[j] += __shfl_xor_sync(0xffffffffu, ss[j], off);
  }
#pragma unroll
  for (int j = 0; j < kHeadsPerWarp; ++j) {
    const int64_t g = first + j;
    if (g >= total) break;
    const int h = int(g % nh);
    __nv_bfloat162* x = reinterpret_cast<__nv_bfloat162*>(a.qkv + (g / nh) * a.row_stride + int64_t(h) * a.head_dim);
    const __nv_bfloat162* wt = reinterpret_cast<const __nv_bfloat162*>(h < a.heads ? a.q_weight : a.k_weight);
    const float inv = rsqrtf(ss[j] / float(a.head_dim) + a.eps);
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const int p = lane + 32 * i;
      if (p < pairs) {
        const float2 w = __bfloat1622float2(wt[p]);
        x[p] = __floats2bfloat162_rn(v[j][i].x * inv * w.x, v[j][i].y * inv * w.y);
      }
    }
  }
}

}  // namespace

void qk_norm(const QkNormArgs& a, cudaStream_t stream) {
  auto fail = [](const std::string& why) { throw RuntimeError("qk_norm: " + why); };
  if (a.head_dim <= 0 || a.head_dim % 2 != 0 || a.head_dim > kQkNormMaxHeadDim)
    fail("head_dim = " + std::to_string(a.head_dim) + " must be even and at most " +
         std::to_string(kQkNormMaxHeadDim) + " (bf16 pairs, a warp per head)");
  if (a.heads <= 0 || a.kv_heads <= 0)
    fail("heads = " + std::to_string(a.heads) + ", kv_heads = " + std::to_string(a.kv_heads) + ": both must be positive");
  if (a.row_stride % 2 != 0 || a.row_stride < int64_t(a.heads + a.kv_heads) * a.head_dim)
    fail("row_stride = " + std::to_string(a.row_stride) + " must be even and hold the q and k heads (" +
         std::to_string(int64_t(a.heads + a.kv_heads) * a.head_dim) + ")");
  if (!a.qkv || !a.q_weight || !a.k_weight) fail("qkv, q_weight and k_weight must all be set");
  if (a.tokens <= 0) return;
  const int64_t per_block = int64_t(kWarps) * kHeadsPerWarp;
  const int64_t blocks = (a.tokens * (a.heads + a.kv_heads) + per_block - 1) / per_block;
  if (blocks > 0x7fffffff) fail(std::to_string(a.tokens) + " tokens exceed the grid");
  qk_norm_kernel<<<unsigned(blocks), kWarps * 32, 0, stream>>>(a);
  CUDA_CHECK_LAUNCH("qk_norm");
}

}  // namespace peerplan::kernels
