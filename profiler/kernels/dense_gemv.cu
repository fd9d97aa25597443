// Decode GEMV with programmatic dependent launch (see dense_gemv.hpp).
#include <stdexcept>
#include <string>
#include <type_traits>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/dense_gemv.hpp"
#include "profiler/kernels/int8_codes.cuh"
#include "profiler/kernels/mma_ptx.cuh"
#include "profiler/kernels/pdl.cuh"
#include "profiler/kernels/silu_mul.cuh"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kRows = 4;    // weight rows per block
constexpr int kSplit = 4;   // warps per block, each a contiguous share of k
constexpr int kU = 2;       // load steps per batch (two batches in flight)

// The weight formats: elements per 16-byte load (a lane's share of a 32-lane step) and their dot with x.
struct Bf16W {
  using T = bf16;
  static constexpr int kPerLoad = 8;  // a step is 256 k
  static constexpr bool kScaled = false;
  static __device__ __forceinline__ void dot(float& acc, const uint4& w, const uint4 (&xv)[1]) {
    ptx::dot8_bf16(acc, w, xv[0]);
  }
};
struct Int8W {  // codes converted exactly (int8_codes.cuh); the channel scale multiplies the sum once
  using T = int8_t;
  static constexpr int kPerLoad = 16;  // a step is 512 k
  static constexpr bool kScaled = true;
  static __device__ __forceinline__ void dot(float& acc, const uint4& w, const uint4 (&xv)[2]) {
    ptx::dot8_bf16(acc, int8x8_to_bf16x8(make_uint2(w.x, w.y)), xv[0]);
    ptx::dot8_bf16(acc, int8x8_to_bf16x8(make_uint2(w.z, w.w)), xv[1]);
  }
};

// ACT: W is a gated MLP's gate_up ([gate; up], n = 2 x inter) and y receives SiLU(gate) * up [M][inter]
// (dense_gemv_act): the block's rows are gate rows j0, j0 + 1 and the up rows inter + j0, inter + j0 + 1.
template <class W, int MT, bool ACT = false>
__global__ void __launch_bounds__(kSplit * 32) dense_gemv_kernel(const bf16* x, const typename W::T* w,
                                                                 const float* w_scale, bf16* y, int M, int64_t n,
                                                                 int64_t k) {
  constexpr int E = W::kPerLoad, XV = E / 8, kStep = 32 * E;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t half = n / 2;
  // Weight row of block row r: n0 + r, or under ACT gate row n0 + r (r < 2) and up row half + n0 + r - 2.
  const int64_t n0 = int64_t(blockIdx.x) * (ACT ? kRows / 2 : kRows);
  auto row_of = [&](int r) -> int64_t {
    if constexpr (ACT) return r < kRows / 2 ? n0 + r : half + n0 + r - kRows / 2;
    return n0 + r;
  };
  const int64_t steps = (k + kStep - 1) / kStep, per = (steps + kSplit - 1) / kSplit;
  const int64_t s_begin = warp * per, s_end = min(steps, s_begin + per);
  const typename W::T* wr[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {  // past n (or past its half): a valid row, never stored
    const int64_t row = ACT ? (r < kRows / 2 ? min(n0 + r, half - 1) : half + min(n0 + r - kRows / 2, half - 1))
                            : min(n0 + r, n - 1);
    wr[r] = w + row * k;
  }
  const uint4 zero = make_uint4(0, 0, 0, 0);
  auto load = [&](uint4 (&wv)[kU][kRows], int64_t s0) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t kc = (s0 + u) * kStep + lane * E;
      const bool ok = s0 + u < s_end && kc < k;
#pragma unroll
      for (int r = 0; r < kRows; ++r) wv[u][r] = ok ? ptx::ld_stream16(wr[r] + kc) : zero;
    }
  };
  uint4 cur[kU][kRows], nxt[kU][kRows];
  load(cur, s_begin);  // weights only: nothing an earlier kernel writes
  pdl::wait();
  pdl::launch_dependents();
  float acc[kRows][MT] = {};
  for (int64_t s0 = s_begin; s0 < s_end; s0 += kU) {
    const bool more = s0 + kU < s_end;
    if (more) load(nxt, s0 + kU);
    uint4 xv[kU][MT][XV];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t kc = (s0 + u) * kStep + lane * E;
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < XV; ++h)
          xv[u][m][h] = s0 + u < s_end && kc < k && m < M
                            ? __ldg(reinterpret_cast<const uint4*>(x + m * k + kc + 8 * h)) : zero;
    }
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int m = 0; m < MT; ++m) W::dot(acc[r][m], cur[u][r], xv[u][m]);
    if (more)
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r) cur[u][r] = nxt[u][r];
  }
  __shared__ float part[kSplit][kRows][MT];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      float v = acc[r][m];
#pragma unroll
      for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0) part[warp][r][m] = v;
    }
  __syncthreads();
  if constexpr (ACT) {
    // Thread (r, m), r < 2: gate row n0 + r and its up row, each rounded to bf16 first as the gate_up
    // GEMM's output would be, so the result equals gate_up then silu_mul exactly.
    if (threadIdx.x < kRows / 2 * MT) {
      const int r = threadIdx.x / MT, m = threadIdx.x % MT;
      if (n0 + r < half && m < M) {
        float gs = 0.f, us = 0.f;
#pragma unroll
        for (int q = 0; q < kSplit; ++q) gs += part[q][r][m], us += part[q][r + kRows / 2][m];
        if constexpr (W::kScaled) gs *= w_scale[row_of(r)], us *= w_scale[row_of(r + kRows / 2)];
        y[m * half + n0 + r] = silu_mul_rounded(gs, us);
      }
    }
    return;
  }
  if (threadIdx.x < kRows * MT) {
    const int r = threadIdx.x / MT, m = threadIdx.x % MT;
    if (n0 + r < n && m < M) {
      float s = 0.f;
#pragma unroll
      for (int q = 0; q < kSplit; ++q) s += part[q][r][m];
      if constexpr (W::kScaled) s *= w_scale[n0 + r];
      y[m * n + n0 + r] = __float2bfloat16(s);
    }
  }
}

}  // namespace

namespace {
template <class W>
void launch_gemv(const bf16* x, const typename W::T* w, const float* w_scale, bf16* y, int64_t M, int64_t n, int64_t k,
                 bool act, cudaStream_t stream) {
  const dim3 grid(unsigned(act ? (n / 2 + kRows / 2 - 1) / (kRows / 2) : (n + kRows - 1) / kRows)), block(kSplit * 32);
  if (act) {
    if (M == 1) pdl::launch(dense_gemv_kernel<W, 1, true>, grid, block, 0, stream, x, w, w_scale, y, int(M), n, k);
    else pdl::launch(dense_gemv_kernel<W, 2, true>, grid, block, 0, stream, x, w, w_scale, y, int(M), n, k);
  } else if (M == 1) {
    pdl::launch(dense_gemv_kernel<W, 1>, grid, block, 0, stream, x, w, w_scale, y, int(M), n, k);
  } else if (M == 2) {
    pdl::launch(dense_gemv_kernel<W, 2>, grid, block, 0, stream, x, w, w_scale, y, int(M), n, k);
  } else if constexpr (std::is_same_v<W, Bf16W>) {  // the small matrices' M 3..8 (dense_gemv_small_supports)
    if (M <= 4) pdl::launch(dense_gemv_kernel<W, 4>, grid, block, 0, stream, x, w, w_scale, y, int(M), n, k);
    else pdl::launch(dense_gemv_kernel<W, 8>, grid, block, 0, stream, x, w, w_scale, y, int(M), n, k);
  }
}
std::string act_note(bool act, int64_t n) {
  return act && n % 2 != 0 ? "; with the activation n = 2 x inter must be even, found " + std::to_string(n) : "";
}
}  // namespace

void dense_gemv(const bf16* x, const bf16* w, bf16* y, int64_t M, int64_t n, int64_t k, cudaStream_t stream, bool act) {
  const bool ok = act ? dense_gemv_supports(M, n, k) : dense_gemv_kernel_supports(M, n, k);
  if (!ok || !x || !w || !y || (act && n % 2 != 0))
    throw std::invalid_argument("dense_gemv: M " + std::to_string(M) + " (1.." + std::to_string(kSmallGemvMaxM) +
                                "; with the activation 1.." + std::to_string(kDenseGemvMaxM) + "), n " +
                                std::to_string(n) + " (positive), k " + std::to_string(k) +
                                " (a positive multiple of 8) and every operand set" + act_note(act, n));
  launch_gemv<Bf16W>(x, w, nullptr, y, M, n, k, act, stream);
  CUDA_CHECK_LAUNCH("dense_gemv");
}

void dense_gemv_int8(const bf16* x, const int8_t* w, const float* w_scale, bf16* y, int64_t M, int64_t n, int64_t k,
                     cudaStream_t stream, bool act) {
  if (!dense_gemv_int8_supports(M, n, k) || !x || !w || !w_scale || !y || (act && n % 2 != 0))
    throw std::invalid_argument("dense_gemv_int8: M " + std::to_string(M) + " (1.." + std::to_string(kDenseGemvMaxM) +
                                "), n " + std::to_string(n) + " (positive), k " + std::to_string(k) +
                                " (a positive multiple of 16) and every operand set" + act_note(act, n));
  launch_gemv<Int8W>(x, w, w_scale, y, M, n, k, act, stream);
  CUDA_CHECK_LAUNCH("dense_gemv_int8");
}

}  // namespace peerplan::kernels
