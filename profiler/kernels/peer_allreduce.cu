#include "profiler/kernels/peer_allreduce.hpp"

#include <stdexcept>
#include <string>

#include "profiler/gpu/cuda_check.hpp"

namespace peerplan::kernels {

namespace {

struct Outs {
  __nv_bfloat16* p[kPeerArMaxRanks];
};

// Flag store/load at system scope: a peer GPU (or another process's mapping) reads them.
__device__ __forceinline__ void store_release(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Block `b` of `rank` tells block b of every rank it reached `e`, then waits for all of them.
// The __syncthreads before makes the block's writes part of the release; the one after holds
// the block until every peer arrived.
__device__ __forceinline__ void barrier(const PeerArRanks& R, int rank, uint32_t (PeerArSignal::*slot)[kPeerArMaxBlocks][kPeerArMaxRanks],
                                        uint32_t e) {
  __syncthreads();
  const int b = blockIdx.x, t = threadIdx.x;
  if (t < R.n) {
    store_release(&(R.signal[t]->*slot)[b][rank], e);
    const uint32_t* mine = &(R.signal[rank]->*slot)[b][t];
    while (int32_t(load_acquire(mine) - e) < 0) {
    }
  }
  __syncthreads();
}

__device__ __forceinline__ uint32_t next_epoch(const PeerArRanks& R, int rank) {
  __shared__ uint32_t e;
  if (threadIdx.x == 0) {
    uint32_t* c = &R.signal[rank]->epoch[blockIdx.x];
    e = *c + 1;
    *c = e;
  }
  __syncthreads();
  return e;
}

// acc += 8 bf16 of v
__device__ __forceinline__ void add8(float (&acc)[8], const uint4& v) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __bfloat1622float2(h[i]);
    acc[2 * i] += f.x;
    acc[2 * i + 1] += f.y;
  }
}
__device__ __forceinline__ uint4 pack8(const float (&acc)[8]) {
  uint4 v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
  return v;
}

// Sum of vector v over all ranks' buffers `src` (read through L2: peers' memory, written before).
__device__ __forceinline__ uint4 sum_vector(const PeerArRanks& R, const __nv_bfloat16* const* src, int64_t v) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int r = 0; r < R.n; ++r) add8(acc, __ldcg(reinterpret_cast<const uint4*>(src[r]) + v));
  return pack8(acc);
}

// rank_arg < 0: emulated, the rank is blockIdx.y (all ranks on one device, one launch).
__global__ void __launch_bounds__(profiler::kPeerArThreads) one_shot_kernel(PeerArRanks R, int rank_arg, Outs outs,
                                                                            int64_t vecs) {
  const int rank = rank_arg >= 0 ? rank_arg : int(blockIdx.y);
  uint4* out = reinterpret_cast<uint4*>(outs.p[rank_arg >= 0 ? 0 : rank]);
  // In place (the executor's Y): peers still read this buffer, so the sums go to scratch first
  // and are copied back after the last barrier (every peer's block done reading this set).
  const bool in_place = reinterpret_cast<const void*>(out) == reinterpret_cast<const void*>(R.data[rank]);
  uint4* dst = in_place ? reinterpret_cast<uint4*>(R.scratch[rank]) : out;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  const uint32_t e = next_epoch(R, rank);
  barrier(R, rank, &PeerArSignal::start, e);
  for (int64_t v = first; v < vecs; v += stride) dst[v] = sum_vector(R, R.data, v);
  barrier(R, rank, &PeerArSignal::end, e);
  if (in_place)
    for (int64_t v = first; v < vecs; v += stride) out[v] = dst[v];
}

__global__ void __launch_bounds__(profiler::kPeerArThreads) two_shot_kernel(PeerArRanks R, int rank_arg, Outs outs,
                                                                            int64_t vecs) {
  const int rank = rank_arg >= 0 ? rank_arg : int(blockIdx.y);
  // In place is safe here: phase 1 writes only this rank's share, which no peer reads; phase 2
  // writes share k after the barrier that ends rank k's reading of it.
  uint4* out = reinterpret_cast<uint4*>(outs.p[rank_arg >= 0 ? 0 : rank]);
  const int64_t part = vecs / R.n;  // vecs is a multiple of n (checked on the host)
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  const uint32_t e = next_epoch(R, rank);
  barrier(R, rank, &PeerArSignal::start, e);
  // Reduce-scatter: this rank's share of every buffer, summed into its scratch (and its output).
  uint4* mine = reinterpret_cast<uint4*>(R.scratch[rank]);
  for (int64_t i = first; i < part; i += stride) {
    const int64_t v = int64_t(rank) * part + i;
    const uint4 s = sum_vector(R, R.data, v);
    mine[v] = s;
    out[v] = s;
  }
  barrier(R, rank, &PeerArSignal::mid, e);
  // All-gather: every other rank's reduced share from its scratch. Block b reads what block b
  // of that rank wrote (same grid, same indices), which the barrier above ordered.
  for (int r = 1; r < R.n; ++r) {
    const int src = (rank + r) % R.n;  // staggered so ranks do not all read one peer at once
    const uint4* theirs = reinterpret_cast<const uint4*>(R.scratch[src]);
    for (int64_t i = first; i < part; i += stride) {
      const int64_t v = int64_t(src) * part + i;
      out[v] = __ldcg(theirs + v);
    }
  }
  barrier(R, rank, &PeerArSignal::end, e);
}

int64_t checked_vectors(const PeerArRanks& R, int64_t bytes) {
  if (R.n < 2 || R.n > kPeerArMaxRanks)
    throw std::invalid_argument("peer all-reduce: 2 to " + std::to_string(kPeerArMaxRanks) + " ranks, got " +
                                std::to_string(R.n));
  if (bytes <= 0 || bytes % (16 * int64_t(R.n)) != 0)
    throw std::invalid_argument("peer all-reduce: bytes a positive multiple of 16 x ranks, got " + std::to_string(bytes));
  return bytes / 16;
}

}  // namespace

void peer_allreduce(ArImpl impl, const PeerArRanks& R, int rank, __nv_bfloat16* out, int64_t bytes, cudaStream_t stream) {
  const int64_t vecs = checked_vectors(R, bytes);
  if (rank < 0 || rank >= R.n) throw std::invalid_argument("peer all-reduce: rank out of range");
  Outs o{};
  o.p[0] = out;
  const int blocks = profiler::peer_allreduce_blocks(bytes);
  if (impl == ArImpl::OneShot)
    one_shot_kernel<<<blocks, profiler::kPeerArThreads, 0, stream>>>(R, rank, o, vecs);
  else if (impl == ArImpl::TwoShot)
    two_shot_kernel<<<blocks, profiler::kPeerArThreads, 0, stream>>>(R, rank, o, vecs);
  else
    throw std::invalid_argument("peer all-reduce: one_shot or two_shot");
  CUDA_CHECK_LAUNCH("peer all-reduce kernel");
}

void peer_allreduce_emulated(ArImpl impl, const PeerArRanks& R, __nv_bfloat16* const* outs, int64_t bytes,
                             cudaStream_t stream) {
  int64_t vecs = checked_vectors(R, bytes);
  Outs o{};
  for (int r = 0; r < R.n; ++r) o.p[r] = outs[r];
  int rank = -1;
  const dim3 grid(unsigned(profiler::peer_allreduce_blocks(bytes)), unsigned(R.n));
  // Cooperative: every block resident at once, or the launch fails (a block spinning at a barrier
  // would otherwise wait for one that never starts).
  void* args[] = {const_cast<PeerArRanks*>(&R), &rank, &o, &vecs};
  const void* fn = impl == ArImpl::OneShot ? reinterpret_cast<const void*>(one_shot_kernel)
                                           : reinterpret_cast<const void*>(two_shot_kernel);
  if (impl != ArImpl::OneShot && impl != ArImpl::TwoShot) throw std::invalid_argument("peer all-reduce: one_shot or two_shot");
  CUDA_CHECK(cudaLaunchCooperativeKernel(fn, grid, dim3(profiler::kPeerArThreads), args, 0, stream));
}

}  // namespace peerplan::kernels
