// Decode GEMV with programmatic dependent launch (see dense_gemv.hpp).
#include <stdexcept>
#include <string>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/dense_gemv.hpp"
#include "profiler/kernels/mma_ptx.cuh"
#include "profiler/kernels/pdl.cuh"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kRows = 4;    // weight rows per block
constexpr int kSplit = 4;   // warps per block, each a contiguous share of k
constexpr int kU = 2;       // 256-element steps per load batch (two batches in flight)

template <int MT>
__global__ void __launch_bounds__(kSplit * 32) dense_gemv_kernel(const bf16* x, const bf16* w, bf16* y, int M,
                                                                 int64_t n, int64_t k) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n0 = int64_t(blockIdx.x) * kRows;
  const int64_t steps = (k + 255) / 256, per = (steps + kSplit - 1) / kSplit;
  const int64_t s_begin = warp * per, s_end = min(steps, s_begin + per);
  const bf16* wr[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wr[r] = w + min(n0 + r, n - 1) * k;  // past n: a valid row, never stored
  const uint4 zero = make_uint4(0, 0, 0, 0);
  auto load = [&](uint4 (&wv)[kU][kRows], int64_t s0) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t kc = (s0 + u) * 256 + lane * 8;
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
    uint4 xv[kU][MT];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t kc = (s0 + u) * 256 + lane * 8;
#pragma unroll
      for (int m = 0; m < MT; ++m)
        xv[u][m] = s0 + u < s_end && kc < k && m < M ? __ldg(reinterpret_cast<const uint4*>(x + m * k + kc)) : zero;
    }
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int m = 0; m < MT; ++m) ptx::dot8_bf16(acc[r][m], cur[u][r], xv[u][m]);
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
  if (threadIdx.x < kRows * MT) {
    const int r = threadIdx.x / MT, m = threadIdx.x % MT;
    if (n0 + r < n && m < M) {
      float s = 0.f;
#pragma unroll
      for (int q = 0; q < kSplit; ++q) s += part[q][r][m];
      y[m * n + n0 + r] = __float2bfloat16(s);
    }
  }
}

}  // namespace

void dense_gemv(const bf16* x, const bf16* w, bf16* y, int64_t M, int64_t n, int64_t k, cudaStream_t stream) {
  if (!dense_gemv_supports(M, n, k) || !x || !w || !y)
    throw std::invalid_argument("dense_gemv: M " + std::to_string(M) + " (1.." + std::to_string(kDenseGemvMaxM) +
                                "), n " + std::to_string(n) + " (positive), k " + std::to_string(k) +
                                " (a positive multiple of 8) and every operand set");
  const dim3 grid(unsigned((n + kRows - 1) / kRows));
  if (M == 1) pdl::launch(dense_gemv_kernel<1>, grid, dim3(kSplit * 32), 0, stream, x, w, y, int(M), n, k);
  else pdl::launch(dense_gemv_kernel<2>, grid, dim3(kSplit * 32), 0, stream, x, w, y, int(M), n, k);
  CUDA_CHECK_LAUNCH("dense_gemv");
}

}  // namespace peerplan::kernels
