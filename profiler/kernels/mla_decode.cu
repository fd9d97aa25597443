// MLA decode attention in the absorbed form (profiler/kernels/mla.hpp): MQA where every head of
// the rank reads one 576-wide latent row per token, whose first 512 columns are also V.
//
// One CTA = one (head group, context chunk, row of q). A head group is MT m-tiles of 16 heads
// (MT = 1, 2, 4: 16, 32 or 64 heads); each m-tile is served by a quad of 4 warps, so a CTA has
// 128 x MT threads and every latent tile in shared memory is read by all of its heads.
// The context streams through shared memory in tiles of kBN = 32 rows (cp.async, kStages-deep
// pipeline; rows padded to kPitch = 584 elements, 1168 bytes, so the 8 rows of an ldmatrix fall on
// 8 different 16-byte bank groups). Per tile, in each quad:
//   S = Q K^T  warp w of the quad: the m-tile's 16 heads x tokens [8w, 8w+8) of the tile, over the
//              576 dims (36 mma.sync m16n8k16; Q's A fragments by ldmatrix from shared memory, K's
//              B fragments by ldmatrix from the tile's rows).
//   softmax    the row maxima of the 4 warps meet in shared memory (a named barrier of the quad);
//              every warp then holds the same running max, so each keeps its own partial row sum
//              and the merge at the end is a plain sum. P (bf16) goes to shared memory.
//   O += P V   warp w of the quad: the 16 heads x dims [128w, 128w+128) over the tile's 32 tokens
//              (P's A fragments by ldmatrix, V's B fragments by ldmatrix.trans from the same tile
//              rows that were K). 64 fp32 accumulators per thread.
// Split-K: the chunks of one (row, head group) are merged by a second kernel over a workspace of
// normalised partial outputs and their log2-sum-exp, as decode_attention.cu does. The split count
// is planned from (batch, heads, max_ctx, SMs) only, and each row's chunks are cut from its own
// length, so a graph captured for a batch stays valid while the contexts grow.
#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <string>

#include "planner/compile/mla_memory.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/mla.hpp"
#include "profiler/kernels/mma_ptx.cuh"
#include "profiler/kernels/splitk_merge.cuh"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kBN = 32;                       // context rows per tile
constexpr int kPitch = kMlaRow + 8;           // shared-memory row pitch (elements): 1168 bytes
constexpr int kPPitch = kBN + 8;              // P's pitch: 80 bytes, conflict-free ldmatrix rows
constexpr int kQuadWarps = 4;                 // warps per m-tile of 16 heads
constexpr int kDimsPerWarp = kMlaLatent / kQuadWarps;  // 128 output dims per warp
constexpr int kPieces = kMlaRow / 8;          // 16-byte pieces per row: 72
// Chunks are at least this many tokens (4 tiles): a chunk's partial output (16 heads x 512 fp32 =
// 32 KB, written and read again by the merge) stays under a quarter of its cache bytes.
#ifndef PEERPLAN_MLA_MIN_CHUNK
#define PEERPLAN_MLA_MIN_CHUNK 128
#endif
constexpr int kMinChunk = PEERPLAN_MLA_MIN_CHUNK;
static_assert(kMinChunk % kBN == 0, "chunks are whole tiles");

// MT = 1: 2 stages (95 KB), 2 CTAs per SM; MT = 2, 4: 3 stages (153 / 194 KB), 1 CTA per SM.
// Either way two 37 KB tiles per SM are in flight while the SM computes on a third.
template <int MT>
constexpr int stages() { return MT == 1 ? 2 : 3; }
template <int MT>
constexpr int resident() { return MT == 1 ? 2 : 1; }
template <int MT>
constexpr size_t smem_bytes() {
  return size_t(stages<MT>()) * kBN * kPitch * 2   // latent tiles
         + size_t(MT) * 16 * kPitch * 2            // Q
         + size_t(MT) * 16 * kPPitch * 2           // P
         + 2 * size_t(MT) * kQuadWarps * 16 * 4;   // row maxima, row sums
}
static_assert(smem_bytes<1>() * 2 + 2048 <= 233472, "MT=1: two CTAs per SM (228 KB)");
static_assert(smem_bytes<4>() <= 232448, "MT=4: one CTA (227 KB)");

struct MlaParams {
  const bf16* q;
  int64_t q_row_stride;
  const bf16* cache;
  const int* slots;
  const int* seq_lens;
  bf16* out;
  float* ws_o;    // [batch][heads][splits][512]
  float* ws_lse;  // [batch][heads][splits]
  int heads, max_ctx, splits;
  float scale_log2;  // scale * log2(e): softmax in base 2
};

// A row of len tokens is cut into `splits` chunks of this length (whole tiles).
__host__ __device__ inline int chunk_len(int len, int splits) {
  const int c = (len + splits - 1) / splits;
  return (c + kBN - 1) / kBN * kBN;
}

// Barrier of the 128 threads of m-tile quad mt (ids 1..4; 0 is __syncthreads).
__device__ __forceinline__ void quad_sync(int mt) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(1 + mt), "r"(kQuadWarps * 32) : "memory");
}

template <int MT>
__global__ void __launch_bounds__(MT * 128, resident<MT>()) mla_decode_kernel(MlaParams p) {
  constexpr int kThreads = MT * 128;
  constexpr int kStages = stages<MT>();
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* kv_s = reinterpret_cast<bf16*>(smem);           // [kStages][kBN][kPitch]
  bf16* q_s = kv_s + kStages * kBN * kPitch;            // [MT*16][kPitch]
  bf16* p_s = q_s + MT * 16 * kPitch;                   // [MT*16][kPPitch]
  float* red_max = reinterpret_cast<float*>(p_s + MT * 16 * kPPitch);  // [MT][4][16]
  float* red_l = red_max + MT * kQuadWarps * 16;                       // [MT][4][16]

  const int split = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int mt = warp / kQuadWarps, wq = warp % kQuadWarps;
  const int g = lane >> 2, t = lane & 3;
  const int h0 = blockIdx.x * MT * 16;  // first head of the CTA
  const int len = p.seq_lens[b];
  const int chunk = chunk_len(len, p.splits);
  const int t0 = split * chunk;
  if (t0 >= len) {  // a chunk past this row's context: weight 0 in the merge (splits > 1 here)
    if (p.splits > 1 && tid < MT * 16 && h0 + tid < p.heads) p.ws_lse[(int64_t(b) * p.heads + h0 + tid) * p.splits + split] = -INFINITY;
    return;
  }
  const int t1 = min(t0 + chunk, len);
  const int ntiles = (t1 - t0 + kBN - 1) / kBN;
  const int slot = p.slots ? p.slots[b] : b;
  const bf16* rows = p.cache + int64_t(slot) * p.max_ctx * kMlaRow;

  {  // Q of the CTA's heads (joins the first tile's cp.async group); rows past the last head: zeros
    const bf16* qb = p.q + int64_t(b) * p.q_row_stride + int64_t(h0) * kMlaRow;
    const int hrows = p.heads - h0;
    for (int i = tid; i < MT * 16 * kPieces; i += kThreads) {
      const int r = i / kPieces, c = i % kPieces;
      ptx::cp_async16(q_s + r * kPitch + 8 * c, qb + int64_t(r < hrows ? r : 0) * kMlaRow + 8 * c, r < hrows);
    }
  }
  // Rows past the chunk are zero-filled (never read from global memory): their scores are masked
  // and their zero V rows add nothing.
  auto load_tile = [&](int tile) {
    bf16* dst = kv_s + (tile % kStages) * kBN * kPitch;
    const int base = t0 + tile * kBN;
    for (int i = tid; i < kBN * kPieces; i += kThreads) {
      const int r = i / kPieces, c = i % kPieces;
      const int tok = base + r;
      const bool ok = tok < t1;
      ptx::cp_async16(dst + r * kPitch + 8 * c, rows + int64_t(ok ? tok : t0) * kMlaRow + 8 * c, ok);
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ntiles) load_tile(s);
    ptx::cp_async_commit();
  }

  // ldmatrix lane addresses. A fragments (Q, P): matrix i = lane/8 holds rows (i&1)*8 + lane%8,
  // columns (i>>1)*8 of the 16x16 tile. K's B fragments (non-transposed): rows = the warp's 8
  // tokens, matrix i = dims 8i of a 32-dim step. V's (transposed): matrix i = tokens (i&1)*8..,
  // dims (i>>1)*8.. of a 16-token x 16-dim block.
  const int a_row = ((lane >> 3) & 1) * 8 + (lane & 7), a_col = (lane >> 4) * 8;
  const uint32_t q_addr = ptx::smem_u32(q_s + (mt * 16 + a_row) * kPitch + a_col);
  const uint32_t p_addr = ptx::smem_u32(p_s + (mt * 16 + a_row) * kPPitch + a_col);
  const int k_off = (8 * wq + (lane & 7)) * kPitch + 8 * (lane >> 3);
  const int v_off = a_row * kPitch + kDimsPerWarp * wq + a_col;
  float* rm = red_max + mt * kQuadWarps * 16;
  float* rl = red_l + mt * kQuadWarps * 16;

  // O accumulators: o[n] = dims 128wq + 8n + 2t (+1) of heads g (o[n][0..1]) and g+8 (o[n][2..3]).
  float o[16][4];
#pragma unroll
  for (int n = 0; n < 16; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;  // heads g, g+8 (base-2 units)
  const float sl2 = p.scale_log2;

  for (int tile = 0; tile < ntiles; ++tile) {
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();  // the tile has landed for every thread; every thread is done with tile - 1
    if (tile + kStages - 1 < ntiles) load_tile(tile + kStages - 1);
    ptx::cp_async_commit();
    const bf16* kt = kv_s + (tile % kStages) * kBN * kPitch;

    // S: two accumulator chains (even / odd 16-dim steps) halve the dependent mma latency.
    float s[4] = {0.f, 0.f, 0.f, 0.f}, s2[4] = {0.f, 0.f, 0.f, 0.f};
    const uint32_t k_addr = ptx::smem_u32(kt + k_off);
#pragma unroll (MT == 4 ? 2 : 6)
    for (int c = 0; c < kMlaRow / 32; ++c) {
      uint32_t b0, b1, b2, b3, a0, a1, a2, a3;
      ptx::ldmatrix_x4(b0, b1, b2, b3, k_addr + c * 64);
      ptx::ldmatrix_x4(a0, a1, a2, a3, q_addr + c * 64);
      ptx::mma_bf16(s, a0, a1, a2, a3, b0, b1);
      ptx::ldmatrix_x4(a0, a1, a2, a3, q_addr + c * 64 + 32);
      ptx::mma_bf16(s2, a0, a1, a2, a3, b2, b3);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) s[e] += s2[e];
    // s[0], s[1]: head g, tokens 2t, 2t+1 of the warp's 8; s[2], s[3]: head g+8.
    const int tok = t0 + tile * kBN + 8 * wq + 2 * t;
    if (tok >= t1) s[0] = s[2] = -INFINITY;
    if (tok + 1 >= t1) s[1] = s[3] = -INFINITY;
    float mx_lo = fmaxf(s[0], s[1]), mx_hi = fmaxf(s[2], s[3]);
    mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 1));
    mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 2));
    mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 1));
    mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 2));
    if (t == 0) {
      rm[wq * 16 + g] = mx_lo;
      rm[wq * 16 + g + 8] = mx_hi;
    }
    quad_sync(mt);
    float tm_lo = rm[g], tm_hi = rm[g + 8];
#pragma unroll
    for (int w = 1; w < kQuadWarps; ++w) {
      tm_lo = fmaxf(tm_lo, rm[w * 16 + g]);
      tm_hi = fmaxf(tm_hi, rm[w * 16 + g + 8]);
    }
    // Finite: the tile's first token is real. Every warp of the quad gets the same new maxima.
    const float mn_lo = fmaxf(m_lo, tm_lo * sl2), mn_hi = fmaxf(m_hi, tm_hi * sl2);
    const float al_lo = ptx::ex2(m_lo - mn_lo), al_hi = ptx::ex2(m_hi - mn_hi);  // 0 on the first tile
    m_lo = mn_lo;
    m_hi = mn_hi;
    const float p0 = ptx::ex2(fmaf(s[0], sl2, -mn_lo)), p1 = ptx::ex2(fmaf(s[1], sl2, -mn_lo));
    const float p2 = ptx::ex2(fmaf(s[2], sl2, -mn_hi)), p3 = ptx::ex2(fmaf(s[3], sl2, -mn_hi));
    l_lo = l_lo * al_lo + (p0 + p1);
    l_hi = l_hi * al_hi + (p2 + p3);
    bf16* pr = p_s + (mt * 16 + g) * kPPitch + 8 * wq + 2 * t;
    *reinterpret_cast<uint32_t*>(pr) = ptx::pack_bf16(p0, p1);
    *reinterpret_cast<uint32_t*>(pr + 8 * kPPitch) = ptx::pack_bf16(p2, p3);
    quad_sync(mt);  // P of the quad's 16 heads x 32 tokens complete; rm free for the next tile

#pragma unroll
    for (int n = 0; n < 16; ++n) {
      o[n][0] *= al_lo;
      o[n][1] *= al_lo;
      o[n][2] *= al_hi;
      o[n][3] *= al_hi;
    }
    const uint32_t v_addr = ptx::smem_u32(kt + v_off);
#pragma unroll
    for (int ks = 0; ks < kBN / 16; ++ks) {
      uint32_t a0, a1, a2, a3;
      ptx::ldmatrix_x4(a0, a1, a2, a3, p_addr + ks * 32);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        uint32_t b0, b1, b2, b3;
        ptx::ldmatrix_x4_trans(b0, b1, b2, b3, v_addr + (ks * 16 * kPitch + 16 * j) * 2);
        ptx::mma_bf16(o[2 * j], a0, a1, a2, a3, b0, b1);
        ptx::mma_bf16(o[2 * j + 1], a0, a1, a2, a3, b2, b3);
      }
    }
  }
  ptx::cp_async_wait<0>();  // only empty groups can be pending; leave none behind

  // Row sums: the quad's lanes, then the quad's 4 warps (same maxima, so a plain sum).
  l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 1);
  l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 2);
  l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 1);
  l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 2);
  if (t == 0) {
    rl[wq * 16 + g] = l_lo;
    rl[wq * 16 + g + 8] = l_hi;
  }
  quad_sync(mt);
  float sum_lo = 0.f, sum_hi = 0.f;
#pragma unroll
  for (int w = 0; w < kQuadWarps; ++w) {
    sum_lo += rl[w * 16 + g];
    sum_hi += rl[w * 16 + g + 8];
  }
  const float inv_lo = 1.f / sum_lo, inv_hi = 1.f / sum_hi;  // >= 1 each: the maximum scores 2^0
  const int h_lo = h0 + mt * 16 + g, h_hi = h_lo + 8;
  const int d0 = kDimsPerWarp * wq + 2 * t;
  // Heads past p.heads (a group of fewer than 16, e.g. 8 heads per rank under TP 2) are not stored.
  const bool ok_lo = h_lo < p.heads, ok_hi = h_hi < p.heads;
  if (p.splits == 1) {
    bf16* out_lo = p.out + (int64_t(b) * p.heads + h_lo) * kMlaLatent + d0;
    bf16* out_hi = p.out + (int64_t(b) * p.heads + h_hi) * kMlaLatent + d0;
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      if (ok_lo)
        *reinterpret_cast<__nv_bfloat162*>(out_lo + 8 * n) = __floats2bfloat162_rn(o[n][0] * inv_lo, o[n][1] * inv_lo);
      if (ok_hi)
        *reinterpret_cast<__nv_bfloat162*>(out_hi + 8 * n) = __floats2bfloat162_rn(o[n][2] * inv_hi, o[n][3] * inv_hi);
    }
  } else {
    const int64_t ix_lo = (int64_t(b) * p.heads + h_lo) * p.splits + split;
    const int64_t ix_hi = (int64_t(b) * p.heads + h_hi) * p.splits + split;
    float* w_lo = p.ws_o + ix_lo * kMlaLatent + d0;
    float* w_hi = p.ws_o + ix_hi * kMlaLatent + d0;
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      if (ok_lo) *reinterpret_cast<float2*>(w_lo + 8 * n) = make_float2(o[n][0] * inv_lo, o[n][1] * inv_lo);
      if (ok_hi) *reinterpret_cast<float2*>(w_hi + 8 * n) = make_float2(o[n][2] * inv_hi, o[n][3] * inv_hi);
    }
    if (wq == 0 && t == 0) {
      if (ok_lo) p.ws_lse[ix_lo] = m_lo + log2f(sum_lo);
      if (ok_hi) p.ws_lse[ix_hi] = m_hi + log2f(sum_hi);
    }
  }
}

// Merges the chunks of one (row, head): weights 2^(lse_i - max) on the normalised partials, each
// of the 128 threads summing 4 dims. The chunk weights go to shared memory once (one float per split).
constexpr int kMergeThreads = kMlaLatent / 4;
__global__ void __launch_bounds__(kMergeThreads) mla_merge_kernel(MlaParams p) {
  extern __shared__ float w_s[];  // [splits]
  __shared__ float red[kMergeThreads / 32];
  const int h = blockIdx.x, b = blockIdx.y, tid = threadIdx.x;
  const int len = p.seq_lens[b];
  const int chunk = chunk_len(len, p.splits);
  const int active = min(p.splits, (len + chunk - 1) / chunk);
  const int64_t base = (int64_t(b) * p.heads + h) * p.splits;
  const float den = splitk_merge_weights<kMergeThreads>(p.ws_lse + base, active, w_s, red);
  float4 num = make_float4(0.f, 0.f, 0.f, 0.f);
  const float* o = p.ws_o + base * kMlaLatent + 4 * tid;
#pragma unroll 4
  for (int s = 0; s < active; ++s) {
    const float4 v = *reinterpret_cast<const float4*>(o + int64_t(s) * kMlaLatent);
    const float w = w_s[s];
    num.x += w * v.x;
    num.y += w * v.y;
    num.z += w * v.z;
    num.w += w * v.w;
  }
  const float inv = 1.f / den;
  __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(p.out + (int64_t(b) * p.heads + h) * kMlaLatent + 4 * tid);
  dst[0] = __floats2bfloat162_rn(num.x * inv, num.y * inv);
  dst[1] = __floats2bfloat162_rn(num.z * inv, num.w * inv);
}

// Heads per CTA: 64 (MT 4) where the heads divide into 64s, else 32, else 16 (the last group of a
// count that is not a multiple of 16 runs partly empty: 8 heads cost what 16 do). More heads per CTA
// means fewer re-reads of each latent tile (from L2) and more arithmetic per byte, which matters
// from 64 heads on, where the kernel is bound by the tensor cores rather than by HBM.
int head_tile_of(int heads, int requested) {
  if (requested != 0) return requested;
  if (heads % 64 == 0) return 64;
  if (heads % 32 == 0) return 32;
  return 16;
}

// Chunks per (row, head group): one wave of resident CTAs (at least 1), at most one chunk per
// kMinChunk tokens of the cache capacity.
int groups_of(int heads, int head_tile) { return (heads + head_tile - 1) / head_tile; }
// The formula lives in planner/compile/mla_memory.hpp: the planner's memory check sizes this
// kernel's workspace from it (one definition); its residency must be the kernel's.
static_assert(peerplan::mla_decode_head_tile_residency(16) == resident<1>() &&
                  peerplan::mla_decode_head_tile_residency(32) == resident<2>() &&
                  peerplan::mla_decode_head_tile_residency(64) == resident<4>(),
              "planner/compile/mla_memory.hpp's mla_decode residency differs from the kernel's __launch_bounds__");
// The planner sizes the workspace at its own minimum chunk: a smaller one here would need more.
static_assert(kMinChunk >= peerplan::kMlaDecodeMinChunk,
              "PEERPLAN_MLA_MIN_CHUNK below planner/compile/mla_memory.hpp's kMlaDecodeMinChunk: the planner's "
              "and the engine's workspace would be too small");
int splits_of(int batch, int heads, int max_ctx, int sm_count, int head_tile) {
  return peerplan::mla_decode_split_count(batch, heads, max_ctx, sm_count, head_tile, kMinChunk);
}

template <int MT>
void launch(const MlaParams& p, int batch, cudaStream_t stream) {
  // The opt-in to more than 48 KB of dynamic shared memory, once per device.
  static std::atomic<bool> set[64];
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64 || !set[dev].load(std::memory_order_relaxed)) {
    CUDA_CHECK(cudaFuncSetAttribute(mla_decode_kernel<MT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(smem_bytes<MT>())));
    if (dev >= 0 && dev < 64) set[dev].store(true, std::memory_order_relaxed);
  }
  const dim3 grid(unsigned(groups_of(p.heads, 16 * MT)), unsigned(p.splits), unsigned(batch));
  mla_decode_kernel<MT><<<grid, MT * 128, smem_bytes<MT>(), stream>>>(p);
  CUDA_CHECK_LAUNCH("mla_decode_kernel");
  if (p.splits > 1) {
    mla_merge_kernel<<<dim3(unsigned(p.heads), unsigned(batch)), kMergeThreads, size_t(p.splits) * sizeof(float),
                       stream>>>(p);
    CUDA_CHECK_LAUNCH("mla_merge_kernel");
  }
}

void check_heads(int heads, const char* who) {
  if (heads <= 0 || heads > kMlaMaxHeads)
    throw RuntimeError(std::string(who) + ": heads must be 1 to " + std::to_string(kMlaMaxHeads) + "; got " +
                       std::to_string(heads));
}

}  // namespace

int mla_decode_splits(int batch, int heads, int max_ctx, int sm_count, int head_tile) {
  check_heads(heads, "mla_decode_splits");
  return splits_of(batch, heads, max_ctx, sm_count, head_tile_of(heads, head_tile));
}

size_t mla_decode_workspace_bytes(int batch, int heads, int max_ctx, int sm_count) {
  check_heads(heads, "mla_decode_workspace_bytes");
  // The largest of the head tiles the heads allow, so a forced tile (MlaDecode::head_tile) fits too.
  return size_t(peerplan::mla_decode_workspace_bytes_for(batch, heads, max_ctx, sm_count, kMlaLatent, kMinChunk));
}

void mla_decode(const MlaDecode& a, int sm_count, cudaStream_t stream) {
  check_heads(a.heads, "mla_decode");
  const int ht = head_tile_of(a.heads, a.head_tile);
  if ((ht != 16 && ht != 32 && ht != 64) || (ht != 16 && a.heads % ht != 0))
    throw RuntimeError("mla_decode: head_tile " + std::to_string(a.head_tile) + " must be 16, or 32 / 64 dividing heads (" +
                       std::to_string(a.heads) + ")");
  if (a.q_row_stride % 8 != 0 || a.q_row_stride < int64_t(a.heads) * kMlaRow)
    throw RuntimeError("mla_decode: q_row_stride must be a multiple of 8 and at least heads x 576");
  if (!(a.scale > 0.f)) throw RuntimeError("mla_decode: scale must be > 0 (mla_softmax_scale)");
  if (a.max_ctx <= 0) throw RuntimeError("mla_decode: max_ctx must be > 0");
  if (a.batch < 0) throw RuntimeError("mla_decode: batch must be >= 0");
  if (a.batch == 0) return;
  if (!a.q || !a.cache || !a.seq_lens || !a.out) throw RuntimeError("mla_decode: q, cache, seq_lens and out are required");
  if (a.batch > 65535) throw RuntimeError("mla_decode: batch above 65535 exceeds the grid");
  MlaParams p{};
  p.q = a.q;
  p.q_row_stride = a.q_row_stride;
  p.cache = a.cache;
  p.slots = a.slots;
  p.seq_lens = a.seq_lens;
  p.out = a.out;
  p.heads = a.heads;
  p.max_ctx = a.max_ctx;
  p.splits = splits_of(a.batch, a.heads, a.max_ctx, sm_count, ht);
  p.scale_log2 = a.scale * 1.4426950408889634f;
  p.ws_o = a.workspace;
  p.ws_lse = a.workspace ? a.workspace + int64_t(a.batch) * a.heads * p.splits * kMlaLatent : nullptr;
  if (p.splits > 1 && !a.workspace) throw RuntimeError("mla_decode: workspace required for split-K");
  if (ht == 16) launch<1>(p, a.batch, stream);
  else if (ht == 32) launch<2>(p, a.batch, stream);
  else launch<4>(p, a.batch, stream);
}

}  // namespace peerplan::kernels
