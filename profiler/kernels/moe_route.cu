// MoE routing (softmax, route_token, counts, offsets, sort, tile lists) and the weighted combine.
// Decode-sized batches (<= kOneCtaMaxTokens) route in one CTA: one launch, shared-memory counters,
// nothing to clear. Prefill-sized ones take three grid-wide launches (tokens, then offsets and
// tiles, then the sort) after clearing the global counters: in one CTA a warp walked its tokens one
// after another, 0.2-0.5 ms per layer at a 2344-token prompt (H200 2026-12-03: Qwen1.5-MoE prefill
// "elementwise" 12.4 ms per iteration measured against 2.0 priced), where engines' top-k softmax and
// block alignment kernels spread the tokens over the GPU.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <cub/block/block_scan.cuh>

#include "planner/model/routing.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/moe_route.hpp"
#include "profiler/kernels/pdl.cuh"

namespace peerplan::kernels {
namespace {

constexpr int kRouteThreads = 1024;  // the offsets kernel, and the one-CTA kernel's largest size: a thread per local expert
constexpr int kTokenThreads = 256;   // grid kernels: a warp per token / a thread per entry

struct RouteParams {
  MoeRouteArgs a;
  MoeRouting r;
};

// One warp routes token t: softmax over the E logits, its k experts, renormalised weights; row_of
// gets the local expert (step "sort" turns it into a row) and count[] (shared or global) is bumped.
__device__ void route_one_token(const MoeRouteArgs& a, const MoeRouting& r, int64_t t, int lane, int* count) {
  const __nv_bfloat16* lg = a.logits + t * a.experts;
  float mx = -INFINITY;
  for (int e = lane; e < a.experts; e += 32) mx = fmaxf(mx, __bfloat162float(lg[e]));
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0;
  for (int e = lane; e < a.experts; e += 32) sum += __expf(__bfloat162float(lg[e]) - mx);
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  int ids[kMoeMaxTopK];
  // Every lane draws the same experts (route_token is a pure function): no broadcast needed.
  routing::route_token(a.seed, a.layer, t, a.experts, a.topk, a.cdf, ids);
  float p = 0, psum = 0;
  for (int j = 0; j < a.topk; ++j) {
    const float pj = __expf(__bfloat162float(lg[ids[j]]) - mx) / sum;
    psum += pj;
    if (j == lane) p = pj;
  }
  if (lane < a.topk) {
    const int64_t i = t * a.topk + lane;
    r.weights[i] = p / psum;
    const int le = ids[lane] - a.expert_first;
    const bool local = le >= 0 && le < a.expert_count;
    r.row_of[i] = local ? le : -1;  // the local expert until the sort turns it into a row
    if (local) atomicAdd(&count[le], 1);
  }
}

// Per local expert: its routed rows and its tiles of each height, prefix-summed in one block scan.
struct ExpertSums {
  int v[1 + kMoeTileKinds];  // rows, then tiles of each kind
};
struct AddSums {
  __device__ ExpertSums operator()(const ExpertSums& x, const ExpertSums& y) const {
    ExpertSums z;
#pragma unroll
    for (int i = 0; i <= kMoeTileKinds; ++i) z.v[i] = x.v[i] + y.v[i];
    return z;
  }
};
template <int kThreads>
using SumScan = cub::BlockScan<ExpertSums, kThreads>;

// Offsets and tile lists from the per-expert counts, by the whole block (kThreads >= local experts):
// thread e owns local expert e; one block-wide prefix sum gives its first row and its first tile of
// each height (same lists, in the same order, as a serial walk over the experts). cursor[e] = offsets[e].
// (One scan of four sums, not four scans: the one-CTA route at batch 1 is a chain of block barriers.)
template <int kThreads>
__device__ void offsets_and_tiles(const MoeRouteArgs& a, const MoeRouting& r, const int* count, int* cursor,
                                  typename SumScan<kThreads>::TempStorage& tmp) {
  const int e = threadIdx.x;
  const int c = e < a.expert_count ? count[e] : 0;
  ExpertSums in, first, total, zero;
  in.v[0] = c;
  zero.v[0] = 0;
#pragma unroll
  for (int s = 0; s < kMoeTileKinds; ++s) {
    const int h = moe_tile_rows(s);
    in.v[1 + s] = (c + h - 1) / h;
    zero.v[1 + s] = 0;
  }
  SumScan<kThreads>(tmp).ExclusiveScan(in, first, zero, AddSums{}, total);
  const int off = first.v[0];
  if (e < a.expert_count) {
    r.offsets[e] = off;
    cursor[e] = off;
  }
  if (e == 0) {
    r.offsets[a.expert_count] = total.v[0];
#pragma unroll
    for (int s = 0; s < kMoeTileKinds; ++s) r.num_tiles[s] = total.v[1 + s];
  }
#pragma unroll
  for (int s = 0; s < kMoeTileKinds; ++s) {
    const int h = moe_tile_rows(s);
    for (int j = 0; j < in.v[1 + s]; ++j) r.tiles[s][first.v[1 + s] + j] = (e << 20) | (off + j * h);
  }
}

// kThreads: moe_route_threads (a thread per local expert, a warp per token up to 32 warps).
template <int kThreads>
__global__ void __launch_bounds__(kThreads) route_kernel(RouteParams p) {
  const MoeRouteArgs& a = p.a;
  const MoeRouting& r = p.r;
  __shared__ int count[kThreads];
  __shared__ int cursor[kThreads];
  __shared__ typename SumScan<kThreads>::TempStorage tmp;
  pdl::wait();
  pdl::launch_dependents();
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  count[tid] = 0;
  __syncthreads();
  for (int64_t t = warp; t < a.tokens; t += kThreads / 32) route_one_token(a, r, t, lane, count);
  __syncthreads();
  offsets_and_tiles<kThreads>(a, r, count, cursor, tmp);
  __syncthreads();
  // Sorted rows: each (token, j) of a local expert takes the next row of its expert.
  const int64_t entries = a.tokens * a.topk;
  for (int64_t i = tid; i < entries; i += kThreads) {
    const int le = r.row_of[i];
    if (le < 0) continue;
    const int row = atomicAdd(&cursor[le], 1);
    r.row_of[i] = row;
    r.token_of_row[row] = int(i / a.topk);
  }
}

// Grid path, 1 of 3: a warp per token, counts in global memory (cleared before the launch).
__global__ void __launch_bounds__(kTokenThreads) route_tokens_kernel(RouteParams p) {
  const int64_t t = int64_t(blockIdx.x) * (kTokenThreads / 32) + threadIdx.x / 32;
  if (t < p.a.tokens) route_one_token(p.a, p.r, t, threadIdx.x % 32, p.r.counts);
}

// 2 of 3: offsets, tiles and the cursors, in one block.
__global__ void __launch_bounds__(kRouteThreads) route_offsets_kernel(RouteParams p) {
  __shared__ int count[kMoeMaxLocalExperts];
  __shared__ SumScan<kRouteThreads>::TempStorage tmp;
  for (int e = threadIdx.x; e < p.a.expert_count; e += kRouteThreads) count[e] = p.r.counts[e];
  __syncthreads();
  offsets_and_tiles<kRouteThreads>(p.a, p.r, count, p.r.cursor, tmp);
}

// 3 of 3: a thread per (token, j) takes the next row of its expert.
__global__ void __launch_bounds__(kTokenThreads) route_sort_kernel(RouteParams p) {
  const int64_t i = int64_t(blockIdx.x) * kTokenThreads + threadIdx.x;
  if (i >= p.a.tokens * p.a.topk) return;
  const int le = p.r.row_of[i];
  if (le < 0) return;
  const int row = atomicAdd(&p.r.cursor[le], 1);
  p.r.row_of[i] = row;
  p.r.token_of_row[row] = int(i / p.a.topk);
}

constexpr int kCombineThreads = 128;

// v1 (PEERPLAN_MOE_COMBINE=v1, the default until session 34): one block per token, 8 columns per thread and pass. At decode
// batch 1 that is one SM walking the hidden row in passes, each a dependent load round: 3.3 us for
// gpt-oss's 2880 columns on H100 where a trivial kernel takes 1.3 (session 33 M profile rows). Its body is
// the kernel every run before session 33 ran, kept as it was (so v2 repeats its accumulate and store).
__global__ void __launch_bounds__(kCombineThreads) combine_kernel_v1(const float* weights, const int* row_of,
                                                                     const __nv_bfloat16* rows, __nv_bfloat16* out,
                                                                     int topk, int64_t hidden) {
  pdl::wait();
  pdl::launch_dependents();
  const int64_t t = blockIdx.x;
  int row[kMoeMaxTopK];
  float w[kMoeMaxTopK];
  for (int j = 0; j < topk; ++j) {
    row[j] = row_of[t * topk + j];
    w[j] = weights[t * topk + j];
  }
  for (int64_t c = int64_t(threadIdx.x) * 8; c < hidden; c += kCombineThreads * 8) {
    float acc[8] = {};
    for (int j = 0; j < topk; ++j) {
      if (row[j] < 0) continue;
      uint4 u = *reinterpret_cast<const uint4*>(rows + int64_t(row[j]) * hidden + c);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float2 v = __bfloat1622float2(h[q]);
        acc[2 * q] += w[j] * v.x;
        acc[2 * q + 1] += w[j] * v.y;
      }
    }
    uint4 o;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
    for (int q = 0; q < 4; ++q) h[q] = __floats2bfloat162_rn(acc[2 * q], acc[2 * q + 1]);
    *reinterpret_cast<uint4*>(out + t * hidden + c) = o;
  }
}

// v2 (the default since session 34; PEERPLAN_MOE_COMBINE=v2): one thread per 8 columns of one token (grid: tokens x column blocks),
// its k rows' loads issued together four at a time: at batch 1 the whole row is one load round over a
// few SMs. Same sum, in the same order (j ascending, fp32), as v1: bit-identical output.
constexpr int kCombineLoads = 4;
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const float* weights, const int* row_of,
                                                                  const __nv_bfloat16* rows, __nv_bfloat16* out,
                                                                  int topk, int64_t hidden) {
  pdl::wait();
  pdl::launch_dependents();
  const int64_t t = blockIdx.x;
  const int64_t c = (int64_t(blockIdx.y) * kCombineThreads + threadIdx.x) * 8;
  if (c >= hidden) return;
  float acc[8] = {};
  for (int j0 = 0; j0 < topk; j0 += kCombineLoads) {
    uint4 u[kCombineLoads];
    float w[kCombineLoads];
    bool local[kCombineLoads];
#pragma unroll
    for (int q = 0; q < kCombineLoads; ++q) {
      const int j = j0 + q;
      const int row = j < topk ? row_of[t * topk + j] : -1;
      local[q] = row >= 0;
      w[q] = local[q] ? weights[t * topk + j] : 0.f;
      u[q] = local[q] ? *reinterpret_cast<const uint4*>(rows + int64_t(row) * hidden + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int q = 0; q < kCombineLoads; ++q) {
      if (!local[q]) continue;  // as v1: an expert of another GPU adds nothing, not even a zero
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u[q]);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 v = __bfloat1622float2(h[e]);
        acc[2 * e] += w[q] * v.x;
        acc[2 * e + 1] += w[q] * v.y;
      }
    }
  }
  uint4 o;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
  for (int e = 0; e < 4; ++e) h[e] = __floats2bfloat162_rn(acc[2 * e], acc[2 * e + 1]);
  *reinterpret_cast<uint4*>(out + t * hidden + c) = o;
}

// PEERPLAN_MOE_COMBINE (read once): v1, the kernel before session 33, or v2 (the grid-wide one); unset: kV2ByDefault.
// An A/B setting: a profile times the default. v2 since session 34: its self-test passed (one H100, 2026-12-07,
// docs/validation/runs/2026-12-07-session34 A) and decode steps in the same lease ran 1.0-2.4 % faster at 1-8
// sequences on Qwen1.5-MoE (shared stream on and off), DeepSeek-V2-Lite and gpt-oss-20b. (Session 33 M's ~1 % loss
// at 1-2 sequences came with a route change timed in the same setting, since reverted.)
constexpr bool kV2ByDefault = true;
bool combine_v1() {
  static const bool v1 = [] {
    const char* e = std::getenv("PEERPLAN_MOE_COMBINE");
    if (!e || !*e) return !kV2ByDefault;
    const std::string v = e;
    if (v != "v1" && v != "v2")
      throw std::invalid_argument("PEERPLAN_MOE_COMBINE=" + v + ": expected v1 (the kernel before session 33) or v2");
    return v == "v1";
  }();
  return v1;
}

int64_t round32(int64_t n) { return (n + 31) / 32 * 32; }

}  // namespace

int64_t moe_route_buffer_ints(int64_t cap_tokens, int topk, int local_experts) {
  const int64_t e = cap_tokens * topk;
  int64_t n = 3 * round32(e) + round32(local_experts + 1) + round32(kMoeTileKinds) + 2 * round32(local_experts);
  for (int s = 0; s < kMoeTileKinds; ++s) n += round32(moe_max_tiles(e, local_experts, moe_tile_rows(s)));
  return n;
}

MoeRouting moe_routing_view(int* base, int64_t cap_tokens, int topk, int local_experts) {
  MoeRouting r;
  const int64_t e = cap_tokens * topk;
  int64_t off = 0;
  auto take = [&](int64_t n) {
    int* p = base + off;
    off += round32(n);
    return p;
  };
  r.weights = reinterpret_cast<float*>(take(e));
  r.row_of = take(e);
  r.token_of_row = take(e);
  r.offsets = take(local_experts + 1);
  r.num_tiles = take(kMoeTileKinds);
  r.counts = take(local_experts);
  r.cursor = take(local_experts);
  for (int s = 0; s < kMoeTileKinds; ++s) r.tiles[s] = take(moe_max_tiles(e, local_experts, moe_tile_rows(s)));
  r.cap_entries = e;
  r.local_experts = local_experts;
  return r;
}

void moe_route(const MoeRouteArgs& a, const MoeRouting& r, cudaStream_t stream) {
  if (a.topk < 1 || a.topk > kMoeMaxTopK || a.topk > a.experts)
    throw std::invalid_argument("moe_route: top-k " + std::to_string(a.topk) + " outside 1.." +
                                std::to_string(kMoeMaxTopK) + " or above the " + std::to_string(a.experts) +
                                " experts");
  if (a.expert_count < 1 || a.expert_count > kMoeMaxLocalExperts || a.expert_count != r.local_experts ||
      a.expert_first < 0 || a.expert_first + a.expert_count > a.experts)
    throw std::invalid_argument("moe_route: local experts [" + std::to_string(a.expert_first) + ", +" +
                                std::to_string(a.expert_count) + ") do not fit the " + std::to_string(a.experts) +
                                " experts, the buffers' " + std::to_string(r.local_experts) + " or the kernel's " +
                                std::to_string(kMoeMaxLocalExperts));
  if (a.tokens * a.topk > r.cap_entries || a.tokens * a.topk >= (int64_t(1) << 20))
    throw std::invalid_argument("moe_route: " + std::to_string(a.tokens) + " tokens x top-" +
                                std::to_string(a.topk) + " exceed the routing buffers (" +
                                std::to_string(r.cap_entries) + " entries, at most 2^20)");
  if (a.tokens == 0) return;
  moe_route_path(a, r, a.tokens > kMoeOneCtaMaxTokens, stream);
}

void moe_route_path(const MoeRouteArgs& a, const MoeRouting& r, bool grid, cudaStream_t stream) {
  const RouteParams p{a, r};
  if (!grid) {
    const int threads = moe_route_threads(a.tokens, a.expert_count);
    switch (threads) {
      case 64: pdl::launch(route_kernel<64>, dim3(1), dim3(64), 0, stream, p); break;
      case 128: pdl::launch(route_kernel<128>, dim3(1), dim3(128), 0, stream, p); break;
      case 256: pdl::launch(route_kernel<256>, dim3(1), dim3(256), 0, stream, p); break;
      case 512: pdl::launch(route_kernel<512>, dim3(1), dim3(512), 0, stream, p); break;
      default: pdl::launch(route_kernel<kRouteThreads>, dim3(1), dim3(kRouteThreads), 0, stream, p); break;
    }
    CUDA_CHECK_LAUNCH("moe_route");
    return;
  }
  CUDA_CHECK(cudaMemsetAsync(r.counts, 0, size_t(a.expert_count) * sizeof(int), stream));
  const int64_t warps_per_block = kTokenThreads / 32;
  route_tokens_kernel<<<unsigned((a.tokens + warps_per_block - 1) / warps_per_block), kTokenThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH("moe_route(tokens)");
  route_offsets_kernel<<<1, kRouteThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH("moe_route(offsets)");
  const int64_t entries = a.tokens * a.topk;
  route_sort_kernel<<<unsigned((entries + kTokenThreads - 1) / kTokenThreads), kTokenThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH("moe_route(sort)");
}

void moe_combine(const MoeRouting& r, const __nv_bfloat16* rows, __nv_bfloat16* out, int64_t tokens, int topk,
                 int64_t hidden, cudaStream_t stream) {
  if (hidden % 8 != 0 || topk < 1 || topk > kMoeMaxTopK)
    throw std::invalid_argument("moe_combine: hidden " + std::to_string(hidden) + " (multiple of 8) / top-k " +
                                std::to_string(topk));
  if (tokens == 0) return;
  if (combine_v1()) {
    pdl::launch(combine_kernel_v1, dim3(unsigned(tokens)), dim3(kCombineThreads), 0, stream, r.weights, r.row_of,
                rows, out, topk, hidden);
  } else {
    const unsigned col_blocks = unsigned((hidden / 8 + kCombineThreads - 1) / kCombineThreads);
    pdl::launch(combine_kernel, dim3(unsigned(tokens), col_blocks), dim3(kCombineThreads), 0, stream, r.weights,
                r.row_of, rows, out, topk, hidden);
  }
  CUDA_CHECK_LAUNCH("moe_combine");
}

}  // namespace peerplan::kernels
