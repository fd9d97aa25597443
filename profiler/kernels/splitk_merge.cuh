#pragma once
// The split-K merge's weights, shared by the decode attention kernels (decode_attention.cu,
// mla_decode.cu): each split s of a (sequence, head) left its log2-sum-exp lse[s]; the block writes
// w[s] = 2^(lse[s] - max) into shared memory and returns sum_s w[s], so every thread can then sum
// its output elements as sum_s w[s] * o[s] / den with several loads in flight. kThreads threads
// (a multiple of 32) call it together; `red` is kThreads / 32 floats of shared scratch.
namespace peerplan::kernels {

template <int kThreads>
__device__ __forceinline__ float splitk_merge_weights(const float* lse, int active, float* w_s, float* red) {
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  float m = -INFINITY;
  for (int s = tid; s < active; s += kThreads) m = fmaxf(m, lse[s]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if (lane == 0) red[warp] = m;
  __syncthreads();
  m = red[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, red[w]);
  __syncthreads();  // red is reused below
  float den = 0.f;
  for (int s = tid; s < active; s += kThreads) {
    const float w = exp2f(lse[s] - m);
    w_s[s] = w;
    den += w;
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) den += __shfl_xor_sync(0xffffffffu, den, off);
  if (lane == 0) red[warp] = den;
  __syncthreads();  // also publishes w_s
  den = 0.f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) den += red[w];
  return den;
}

}  // namespace peerplan::kernels
