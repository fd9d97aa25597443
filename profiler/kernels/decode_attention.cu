// Decode attention (one query token per sequence) over a contiguous per-sequence KV cache, GQA,
// flash-decoding split-K. One block handles one (chunk of context, kv head, sequence) and all the
// query heads that share that kv head, so each K/V row is read from HBM once per group.
//
// The kernel is bandwidth-bound, so it is built around bytes in flight: each warp takes 16 tokens
// per step and issues all their K and V loads (16-byte, coalesced) before it uses any, and the
// arithmetic runs on the tensor cores (mma.sync m16n8k16), where with 8 query heads per kv head
// fp32 FMAs alone would cap the kernel well under HBM speed. The fragments are filled straight
// from the 16-byte loads, with no shared-memory staging:
//   S = Q K^T   : M = the query heads (padded to 16), N = 8 tokens, K = the head dim. The head dim
//                 is the reduction, so it may be visited in any order as long as Q and K agree.
//                 Lane (g, t) loads dims [32i + 8t, +8) of token g's K row; the fragments'
//                 logical dims 2t, 2t+1 | 8+2t, 9+2t are then its physical dims
//                 32i + 8t + 4h + (0,1 | 2,3), and Q is loaded with the same mapping.
//   O^T = V^T P^T: M = 16 head dims, N = 8 query heads, K = 16 tokens. The S accumulators of
//                 two token n-tiles are exactly the B fragment of P^T. An A fragment of V^T needs
//                 two tokens' values of one dim per register: lane (g, t) loads tokens 2t, 2t+1,
//                 8+2t, 9+2t at dims [64i + 8g, +8) and pairs them with byte permutes; m-tile
//                 (i, j)'s logical rows g | g+8 are then physical dims 64i + 8g + 2j | +1.
//                 Transposed, every accumulator register holds a real head (with 8 heads per kv
//                 head), which leaves the kernel at <= 128 registers: 4 blocks per SM.
// Each warp keeps a running softmax (max, sum, O) in registers; the block's 4 warps are merged
// through shared memory at the end. The splits of one (sequence, kv head) are merged either inside
// the same launch, as one thread-block cluster (Hopper: each block reads the others' partials
// from distributed shared memory, so no workspace round trip and no second kernel), or by a
// second small kernel over a workspace.
//
// The kernels are specialised for G = 1, 2, 4, 8, 16 query heads per kv head and head_dim 64 and
// 128 (the engine-speed path). Any other G up to 16 and head_dim up to 128 (a multiple of 8) runs
// the same code in its general form (kGeneral, chosen by decode_variant in
// profiler/common/attention_support.cpp): the block is sized for the next group tile GT and dim
// tile DT, and the real G and head_dim bound every access at run time. Query rows g >= G are
// zeros (their scores and outputs are never stored); dims >= head_dim are never loaded (zeros in
// Q and K add nothing to the scores; V's zeros land in accumulators that are never stored). The
// kernel is bound by HBM bytes, which the padding does not add to: 7 heads per kv head cost what
// 8 do, head_dim 96 reads 96 dims per token.
#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>

#include <cooperative_groups.h>

#include "planner/model/decode_split.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/kv_fp8.cuh"
#include "profiler/kernels/mma_ptx.cuh"
#include "profiler/kernels/pdl.cuh"
#include "profiler/kernels/splitk_merge.cuh"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kStepTokens = 16;                     // tokens per warp step
constexpr int kChunkQuantum = kWarps * kStepTokens;  // chunks are multiples of this
// Blocks per SM of the split kernel (its register budget: <= 128 per thread with up to 8 query
// heads per kv head, 168 with 16). Split-K aims at one wave of them: every block resident from
// the start, each as long as possible (per-block start-up and merge amortised over more tokens).
#ifndef PEERPLAN_DECODE_RESIDENT
#define PEERPLAN_DECODE_RESIDENT 4
#endif
constexpr int kResidentBlocks = PEERPLAN_DECODE_RESIDENT;
// Split-K target in blocks per SM, the dim tile 256's (2 blocks per SM: its launch bound, so one
// wave of resident blocks as 4 per SM is for the 64/128 tiles; with the 4-block target it ran two
// waves, and at batch 1-8 each block's chunk was half as long as it could be) and its chunk quantum
// (32, so at short contexts a sequence still splits into as many chunks as the 128 tile's 64-token
// quantum gives it at equal bytes): planner/model/decode_split.hpp, which the pricer reads too.
constexpr int kWideChunkQuantum = decode_split::kWideQuantum;
static_assert(kChunkQuantum == decode_split::kQuantum, "the shared split plan's quantum is the kernel's step");
static_assert(kWideChunkQuantum % kStepTokens == 0 && kWideChunkQuantum <= kChunkQuantum, "wide chunk quantum");
template <int DT>
constexpr int chunk_quantum() { return DT > 128 ? kWideChunkQuantum : kChunkQuantum; }
constexpr int kMaxClusterSplits = decode_split::kMaxClusterSplits;

struct DecodeParams {
  const bf16* q;
  int64_t q_row_stride;
  const void* k_cache;  // bf16 or e4m3 codes (the kernel's KV type)
  const void* v_cache;
  const int* slots;
  const int* seq_lens;
  bf16* out;
  float v_scale;  // FP8 KV: V's per-tensor scale, applied to the (linear) output; 1 for bf16
  float* ws_o;    // [batch][heads][splits][D]
  float* ws_lse;  // [batch][heads][splits]
  int heads, kv_heads, max_ctx, splits;  // splits: fixed grid dimension
  int window;                            // sliding window (0: whole context): the last `window` tokens
  int group, head_dim;                   // real shape; read by the general kernels only
  float scale_log2;                      // scale * log2(e): softmax in base 2
  int group_split;                       // dim tile 256: blocks per kv head (y = kv head x split + part)
};

// A sequence of len tokens is cut into chunks of this length (a multiple of the quantum:
// kChunkQuantum, kWideChunkQuantum at dim tile 256), so the work per block follows the real
// context, not the cache's capacity, and the grid stays fixed.
using decode_split::chunk_len;

// The tokens a sequence of len tokens attends to: [first, len). Sliding window (issue 18): the new
// token at position len - 1 sees keys (len - 1 - window, len - 1], i.e. the last `window` tokens
// (Mistral's convention: transformers' sliding_window_overlay, vLLM's flash-attn window_size =
// (window - 1, 0)). The chunks are cut from this span, so the blocks read only the window's bytes.
__device__ __forceinline__ int span_first(int len, int window) { return window > 0 && len > window ? len - window : 0; }

__device__ __forceinline__ uint4 ld16(const bf16* p) { return *reinterpret_cast<const uint4*>(p); }

// A step's K/V load: 8 elements as 8 bf16 (ld_kv8), or with kLazy (FP8 at dim tile 256) the 8
// raw e4m3 codes, 2 registers instead of 4, converted by as_bf16x8 where they are used: the
// converted step would not fit 255 registers (ptxas -v: 188 bytes of spills).
template <bool kLazy, class KV>
__device__ __forceinline__ auto ld_step(const KV* p) {
  if constexpr (kLazy) return *reinterpret_cast<const uint2*>(p);
  else return ld_kv8(p);
}
__device__ __forceinline__ uint4 as_bf16x8(uint4 v) { return v; }
__device__ __forceinline__ uint4 as_bf16x8(uint2 c) { return e4m3x8_to_bf16x8(c); }

// DT, GT: the head-dim and group tiles the block is built for; kGeneral: the real head_dim (<= DT,
// a multiple of 8) and group (<= GT) come from p, else they are exactly DT and GT.
// KV: bf16, or uint8_t for an FP8 e4m3 cache (kv_fp8.cuh: 8 codes load as 8 bf16; K's scale is in
// scale_log2, V's in v_scale).
// DT = 256 (kWide: head_dim 136..256): the same step with twice the loads and accumulators, so a
// thread needs up to 255 registers and 2 blocks fit an SM (the bytes in flight per SM stay those
// of 4 blocks at DT = 128). GT <= 8 only: 16 query heads per kv head would need 128 accumulator
// registers beside the 128 of loads, so a group of 9..16 runs as p.group_split = 2 blocks of up to
// 8 heads each on one kv head (blockIdx.y = kv head x 2 + part; the second block's K/V reads come
// mostly from L2, as the two run side by side).
template <int DT, int GT, bool kCluster, bool kGeneral, class KV>
__global__ void __launch_bounds__(kThreads, DT > 128 ? 2 : GT > 8 ? 3 : kResidentBlocks)
    decode_split_kernel(DecodeParams p) {
  static_assert(GT >= 1 && GT <= 16, "query heads per kv head");
  static_assert(DT <= 128 || GT <= 8, "dim tile 256 splits groups over 8 into blocks of 8");
  constexpr bool kWide = DT > 128;
  constexpr bool kLazy = kWide && sizeof(KV) == 1;
  using Raw = std::conditional_t<kLazy, uint2, uint4>;  // one load of 8 K or V elements
  constexpr int NB32 = DT / 32, NB64 = DT / 64;
  constexpr bool kUpper = GT > 8;   // S rows 8..15 / a second n-tile of O^T hold real heads
  constexpr int NH = kUpper ? 2 : 1;
  // kWide: this block's part of the kv head's group (heads part*GT ..), else the whole group.
  pdl::wait();
  pdl::launch_dependents();
  const int part = kWide ? int(blockIdx.y) % p.group_split : 0;
  const int G = kWide ? (kGeneral ? min(GT, p.group - part * GT) : GT)
                      : (kGeneral ? p.group : GT);  // query heads of this block
  const int D = kGeneral ? p.head_dim : DT;  // head dim: the row length of Q, K, V and out
  __shared__ __align__(16) float o_s[kWarps][GT][DT + 4];  // per-warp partial outputs for the block merge
  __shared__ float m_s[kWarps][GT], l_s[kWarps][GT];
  __shared__ float part_o[kCluster ? GT : 1][kCluster ? DT : 1];  // this block's normalised partial
  __shared__ float part_lse[kCluster ? GT : 1];                    // and its log2-sum-exp, per head

  const int split = blockIdx.x, kvh = kWide ? int(blockIdx.y) / p.group_split : blockIdx.y, b = blockIdx.z;
  const int len = p.seq_lens[b];
  const int first = span_first(len, p.window);  // 0 without a window
  const int chunk = chunk_len(len - first, p.splits, chunk_quantum<DT>());
  const int t0 = first + split * chunk;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int h0 = kWide ? kvh * p.group + part * GT : kvh * G;
  if (!kCluster && t0 >= len) {  // this chunk lies past the sequence: contribute nothing to the merge
    if (p.splits > 1 && tid < G) p.ws_lse[(int64_t(b) * p.heads + h0 + tid) * p.splits + split] = -INFINITY;
    return;
  }
  const int t1 = min(t0 + chunk, len);  // a cluster's block past the sequence runs no step (t1 <= t0)
  const int g = lane >> 2, t = lane & 3;
  const int slot = p.slots ? p.slots[b] : b;
  const int64_t kv_base = (int64_t(slot) * p.kv_heads + kvh) * p.max_ctx * D;
  const KV* kp = static_cast<const KV*>(p.k_cache) + kv_base;
  const KV* vp = static_cast<const KV*>(p.v_cache) + kv_base;

  // Q: rows g and g+8 of the S A fragment are heads h0+g and h0+g+8 (zeros past the group).
  uint4 qlo[NB32], qhi[NB32];
  {
    const bf16* qrow = p.q + int64_t(b) * p.q_row_stride + int64_t(h0) * D;
#pragma unroll
    for (int i = 0; i < NB32; ++i) {
      const bool dim_ok = !kGeneral || 32 * i + 8 * t < D;
      qlo[i] = (g < G && dim_ok) ? ld16(qrow + int64_t(g) * D + 32 * i + 8 * t) : make_uint4(0, 0, 0, 0);
      qhi[i] = (kUpper && g + 8 < G && dim_ok) ? ld16(qrow + int64_t(g + 8) * D + 32 * i + 8 * t)
                                               : make_uint4(0, 0, 0, 0);
    }
  }

  // O^T accumulators: o[i][j][n] is m-tile (i, j) x head n-tile n: c0 = (dim 64i+8g+2j, head
  // 8n+2t), c1 = (same dim, head 8n+2t+1), c2/c3 = the same for dim 64i+8g+2j+1.
  float o[NB64][4][NH][4];
#pragma unroll
  for (int i = 0; i < NB64; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int n = 0; n < NH; ++n) o[i][j][n][0] = o[i][j][n][1] = o[i][j][n][2] = o[i][j][n][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // heads g and g+8 (scaled base-2 units)
  const float sl2 = p.scale_log2;
  // The softmax state of head h sits in lanes 4h..4h+3; this lane's O^T columns are heads 2t, 2t+1.
  const int src_even = 8 * t, src_odd = 8 * t + 4;

  for (int tb = t0 + warp * kStepTokens; tb < t1; tb += kWarps * kStepTokens) {
    // All loads of the step first. Tokens past the chunk read the chunk's last row instead
    // (finite data, in bounds); their scores are masked, so their weight is exactly 0.
    Raw kx[2][NB32], vx[NB64][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const int tok = min(tb + 8 * n + g, t1 - 1);
#pragma unroll
      for (int i = 0; i < NB32; ++i)
        kx[n][i] = (!kGeneral || 32 * i + 8 * t < D) ? ld_step<kLazy>(kp + int64_t(tok) * D + 32 * i + 8 * t)
                                                     : Raw{};
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int tok = min(tb + (r >> 1) * 8 + 2 * t + (r & 1), t1 - 1);
#pragma unroll
      for (int i = 0; i < NB64; ++i)
        vx[i][r] = (!kGeneral || 64 * i + 8 * g < D) ? ld_step<kLazy>(vp + int64_t(tok) * D + 64 * i + 8 * g)
                                                     : Raw{};
    }

    // S (heads x 16 tokens) as two n-tiles of 8 tokens.
    float s[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int i = 0; i < NB32; ++i) {
        const uint4 k = as_bf16x8(kx[n][i]);
        ptx::mma_bf16(s[n], qlo[i].x, qhi[i].x, qlo[i].y, qhi[i].y, k.x, k.y);
        ptx::mma_bf16(s[n], qlo[i].z, qhi[i].z, qlo[i].w, qhi[i].w, k.z, k.w);
      }
    }
    if (tb + kStepTokens > t1) {  // the chunk's last step: mask tokens past its end
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (tb + 8 * n + 2 * t + (e & 1) >= t1) s[n][e] = -INFINITY;
    }
    // Online softmax: a head's 16 scores sit in the 4 lanes of one quad.
    float mx0 = fmaxf(fmaxf(s[0][0], s[0][1]), fmaxf(s[1][0], s[1][1]));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    const float mn0 = fmaxf(m0, mx0 * sl2);  // finite: every step has at least one real token
    const float a0 = ptx::ex2(m0 - mn0);
    m0 = mn0;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      s[n][0] = ptx::ex2(fmaf(s[n][0], sl2, -mn0));
      s[n][1] = ptx::ex2(fmaf(s[n][1], sl2, -mn0));
    }
    l0 = l0 * a0 + (s[0][0] + s[0][1] + s[1][0] + s[1][1]);
    float a1 = 1.f;
    if (kUpper) {
      float mx1 = fmaxf(fmaxf(s[0][2], s[0][3]), fmaxf(s[1][2], s[1][3]));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
      const float mn1 = fmaxf(m1, mx1 * sl2);
      a1 = ptx::ex2(m1 - mn1);
      m1 = mn1;
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        s[n][2] = ptx::ex2(fmaf(s[n][2], sl2, -mn1));
        s[n][3] = ptx::ex2(fmaf(s[n][3], sl2, -mn1));
      }
      l1 = l1 * a1 + (s[0][2] + s[0][3] + s[1][2] + s[1][3]);
    }
    // P^T B fragments: (tokens 2t, 2t+1 | 8+2t, 9+2t; head g) for heads 0..7 and 8..15.
    uint32_t pb[NH][2];
    pb[0][0] = ptx::pack_bf16(s[0][0], s[0][1]);
    pb[0][1] = ptx::pack_bf16(s[1][0], s[1][1]);
    if constexpr (kUpper) {
      pb[NH - 1][0] = ptx::pack_bf16(s[0][2], s[0][3]);
      pb[NH - 1][1] = ptx::pack_bf16(s[1][2], s[1][3]);
    }
    // Rescale factors of this lane's O^T columns (heads 2t, 2t+1 of each head n-tile).
    float ra[NH][2];
    ra[0][0] = __shfl_sync(0xffffffffu, a0, src_even);
    ra[0][1] = __shfl_sync(0xffffffffu, a0, src_odd);
    if constexpr (kUpper) {
      ra[NH - 1][0] = __shfl_sync(0xffffffffu, a1, src_even);
      ra[NH - 1][1] = __shfl_sync(0xffffffffu, a1, src_odd);
    }

    // O^T = O^T * alpha + V^T P^T.
#pragma unroll
    for (int i = 0; i < NB64; ++i) {
      const uint4 v0 = as_bf16x8(vx[i][0]), v1 = as_bf16x8(vx[i][1]);  // tokens 2t, 2t+1
      const uint4 v2 = as_bf16x8(vx[i][2]), v3 = as_bf16x8(vx[i][3]);  // tokens 8+2t, 9+2t
      const uint32_t* r0 = reinterpret_cast<const uint32_t*>(&v0);
      const uint32_t* r1 = reinterpret_cast<const uint32_t*>(&v1);
      const uint32_t* r2 = reinterpret_cast<const uint32_t*>(&v2);
      const uint32_t* r3 = reinterpret_cast<const uint32_t*>(&v3);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        // Row g: dim 64i+8g+2j (the low bf16 of word j), row g+8: dim +1 (the high bf16).
        const uint32_t a_0 = __byte_perm(r0[j], r1[j], 0x5410u), a_1 = __byte_perm(r0[j], r1[j], 0x7632u);
        const uint32_t a_2 = __byte_perm(r2[j], r3[j], 0x5410u), a_3 = __byte_perm(r2[j], r3[j], 0x7632u);
#pragma unroll
        for (int n = 0; n < NH; ++n) {
          o[i][j][n][0] *= ra[n][0];
          o[i][j][n][1] *= ra[n][1];
          o[i][j][n][2] *= ra[n][0];
          o[i][j][n][3] *= ra[n][1];
          ptx::mma_bf16(o[i][j][n], a_0, a_1, a_2, a_3, pb[n][0], pb[n][1]);
        }
      }
    }
  }

  // Merge the 4 warps. A warp that got no tokens has m = -inf, l = 0, O = 0: weight 0.
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
#pragma unroll
  for (int n = 0; n < NH; ++n) {
    const int he = 8 * n + 2 * t, ho = he + 1;  // this lane's heads
#pragma unroll
    for (int i = 0; i < NB64; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int d = 64 * i + 8 * g + 2 * j;
        if (he < G) *reinterpret_cast<float2*>(&o_s[warp][he][d]) = make_float2(o[i][j][n][0], o[i][j][n][2]);
        if (ho < G) *reinterpret_cast<float2*>(&o_s[warp][ho][d]) = make_float2(o[i][j][n][1], o[i][j][n][3]);
      }
  }
  if (t == 0) {
    if (g < G) m_s[warp][g] = m0, l_s[warp][g] = l0;
    if (kUpper && g + 8 < G) m_s[warp][g + 8] = m1, l_s[warp][g + 8] = l1;
  }
  __syncthreads();
  for (int idx = tid; idx < G * D; idx += kThreads) {
    const int hg = idx / D, d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_s[w][hg]);
    float num = 0.f, den = 0.f;
    if (mx != -INFINITY) {  // -inf: a cluster block past the sequence (no token at all)
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float wt = ptx::ex2(m_s[w][hg] - mx);
        num += wt * o_s[w][hg][d];
        den += wt * l_s[w][hg];
      }
    }
    const int h = h0 + hg;
    if (kCluster) {
      part_o[hg][d] = den > 0.f ? num / den * p.v_scale : 0.f;
      if (d == 0) part_lse[hg] = den > 0.f ? mx + log2f(den) : -INFINITY;
    } else if (p.splits == 1) {
      p.out[(int64_t(b) * p.heads + h) * D + d] = __float2bfloat16(num / den * p.v_scale);
    } else {
      const int64_t ix = (int64_t(b) * p.heads + h) * p.splits + split;
      p.ws_o[ix * D + d] = num / den * p.v_scale;
      if (d == 0) p.ws_lse[ix] = mx + log2f(den);
    }
  }
  if constexpr (kCluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // The cluster is the `splits` blocks of this (sequence, kv head), rank = split. Block r
    // finalises every splits-th slice of the group's heads x dims from all blocks' partials.
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every partial is in shared memory
    const int nr = int(cluster.num_blocks()), rank = int(cluster.block_rank());
    for (int idx = rank * kThreads + tid; idx < G * D; idx += nr * kThreads) {
      const int hg = idx / D, d = idx % D;
      float lse[kMaxClusterSplits];
      float mx = -INFINITY;
#pragma unroll
      for (int r = 0; r < kMaxClusterSplits; ++r) {
        lse[r] = r < nr ? *cluster.map_shared_rank(&part_lse[hg], r) : -INFINITY;
        mx = fmaxf(mx, lse[r]);  // finite: rank 0 always holds tokens
      }
      float num = 0.f, den = 0.f;
#pragma unroll
      for (int r = 0; r < kMaxClusterSplits; ++r) {
        if (r < nr) {
          const float w = ptx::ex2(lse[r] - mx);
          den += w;
          num += w * *cluster.map_shared_rank(&part_o[hg][d], r);
        }
      }
      p.out[(int64_t(b) * p.heads + h0 + hg) * D + d] = __float2bfloat16(num / den);
    }
    cluster.sync();  // no block leaves while another may still read its shared memory
#endif
  }
}

// Merges the chunks of one (sequence, head): weights 2^(lse_i - max) on the normalised partials.
// Batch 1 at long contexts has ~100 chunks, so the block shares the work: the chunk weights are
// computed once into shared memory (dynamic, one float per split), then each thread sums its dim
// with several loads in flight.
// DT threads (the dim tile); kGeneral: the real head_dim (<= DT) from p, threads past it only help
// reduce the weights.
template <int DT, bool kGeneral>
__global__ void __launch_bounds__(DT) decode_merge_kernel(DecodeParams p) {
  constexpr int D = DT;  // threads per block
  const int HD = kGeneral ? p.head_dim : DT;
  extern __shared__ float w_s[];  // [splits]
  __shared__ float red[D / 32];
  pdl::wait();
  pdl::launch_dependents();
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
  const int span = p.seq_lens[b] - span_first(p.seq_lens[b], p.window);  // tokens attended (the window's)
  const int chunk = chunk_len(span, p.splits, chunk_quantum<DT>());
  const int active = min(p.splits, (span + chunk - 1) / chunk);
  const int64_t base = (int64_t(b) * p.heads + h) * p.splits;
  const float den = splitk_merge_weights<D>(p.ws_lse + base, active, w_s, red);
  if (kGeneral && d >= HD) return;  // no dim of its own (after the last barrier)
  float num = 0.f;
  const float* o = p.ws_o + base * HD + d;
#pragma unroll 8
  for (int s = 0; s < active; ++s) num += w_s[s] * o[int64_t(s) * HD];
  p.out[(int64_t(b) * p.heads + h) * HD + d] = __float2bfloat16(num / den);
}

template <int DT, int GT, bool kGeneral, class KV>
void launch_decode(const DecodeParams& p, int batch, bool cluster, cudaStream_t stream) {
  const dim3 grid(p.splits, p.kv_heads * (DT > 128 ? p.group_split : 1), batch);
  auto kernel =
      cluster ? decode_split_kernel<DT, GT, true, kGeneral, KV> : decode_split_kernel<DT, GT, false, kGeneral, KV>;
  if (cluster) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = stream;
    cudaLaunchAttribute attr[2]{};
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = unsigned(p.splits);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl::append_attr(attr, 1);
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, p));
    CUDA_CHECK_LAUNCH("decode_split_kernel (cluster)");
    return;
  }
  pdl::launch(kernel, grid, dim3(kThreads), 0, stream, p);
  CUDA_CHECK_LAUNCH("decode_split_kernel");
  if (p.splits > 1) {
    pdl::launch(decode_merge_kernel<DT, kGeneral>, dim3(p.heads, batch), dim3(DT), size_t(p.splits) * sizeof(float),
                stream, p);
    CUDA_CHECK_LAUNCH("decode_merge_kernel");
  }
}

template <int DT, bool kGeneral, class KV>
void dispatch_group(const DecodeParams& p, int batch, int group_tile, bool cluster, cudaStream_t stream) {
  switch (group_tile) {
    case 1: return launch_decode<DT, 1, kGeneral, KV>(p, batch, cluster, stream);
    case 2: return launch_decode<DT, 2, kGeneral, KV>(p, batch, cluster, stream);
    case 4: return launch_decode<DT, 4, kGeneral, KV>(p, batch, cluster, stream);
    case 8: return launch_decode<DT, 8, kGeneral, KV>(p, batch, cluster, stream);
    case 16:
      if constexpr (DT <= 128) return launch_decode<DT, 16, kGeneral, KV>(p, batch, cluster, stream);
      [[fallthrough]];
    default:
      throw RuntimeError("decode_attention: internal: group tile " + std::to_string(group_tile));
  }
}

// Chunks per sequence: as many as fit one wave of resident blocks (batch x kv_heads x chunks <=
// decode_split::kBlocksPerSm x SMs; at least 1), at most one chunk per kChunkQuantum tokens of the cache.
// One wave, because a block's start-up (sequence length, slot, first loads) and its merge cost
// about as much as one or two of its steps: fewer, longer blocks amortise them (H200, 2026-12-01:
// batch 64 x 8 kv heads x ctx 1024 was 3.2 TB/s in ~4 waves of 6-step warps). The cache capacity
// only caps the count: each sequence's chunks are cut from its own length (chunk_len), so a large
// capacity costs no work.
// Dim tile 256 (issue 23): the target is decode_split::kWideBlocksPerSm blocks per SM, the blocks of a
// split are batch x kv_heads x group_split (a group of 9..16 runs as two blocks per kv head), and
// the quantum is kWideChunkQuantum: one wave of the 2 resident blocks per SM, as many chunks per
// sequence as the 128 tile at equal bytes.
// (decode_split::shape / splits / plan: planner/model/decode_split.hpp.)
using SplitShape = decode_split::Shape;

// Thread-block clusters (distributed shared memory) exist from compute capability 9.0 on.
bool clusters_supported() {
  static std::atomic<int> major[64];  // per device, 0: not asked yet
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64) return false;
  int m = major[dev].load(std::memory_order_relaxed);
  if (m == 0) {
    CUDA_CHECK(cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, dev));
    major[dev].store(m, std::memory_order_relaxed);
  }
  return m >= 9;
}

using DecodePlan = decode_split::Plan;
// Dim tile 256: a (sequence, kv head) pair of a split group counts as its two blocks, and the
// residency limit below scales with the blocks per SM (3 of 4 there, so 1.5 of 2). Nor a cluster
// smaller than the split-K target beyond 1024 tokens: at 2 blocks per SM, 8 of a target of 9..16
// splits leave half the wave empty where the cache is long enough for the bytes in flight to
// matter more than the merge kernel's launch (batch 4 x 2 kv heads x G 16 at 4k: 128 blocks
// against the 128 tile's 528).
// A plan whose split blocks fill the wave exactly streamed a long cache ~9 % slower per byte than one a
// few blocks short of it: 8 kv heads at 65k context, batch 11 (6 splits, 528 blocks of 528) 3.90 TB/s and
// batch 22 (3 splits, 528) 3.87, against 4.27-4.32 at 480 blocks and fewer (H200, 2026-12-04, session 8 E
// profile; docs/attention.md). So such a plan takes one split fewer when it has at least 3 and its chunks
// are long (>= 8192 tokens). Measured over the whole grid, trimmed vs not (H200, 2026-12-04, session 10 B,
// 1638 decode points of Llama-3.1-8B and Qwen1.5-MoE): 3-6 splits over chunks >= 8192 ran 0.90-0.96x;
// 2 splits (trimmed to none: half a wave) 0.95-1.06x and chunks < 4096 0.97-1.04x. Chunks of 4096-8192
// gained 1-3 % in the grid but Llama-3.1-8B's decode steps at 32k context (session 10 E, graphs) ran
// 1-4 % slower with them trimmed (batch 11, 13) and 0-3 % faster with chunks >= 8192 (batch 16, 22), so
// those keep the full wave. PEERPLAN_DECODE_FULL_WAVE=keep / trim (every full wave of chunks >= 1024,
// the session-9 experiment) for A/B runs. Never more splits than decode_split::splits: the workspace holds it.
// PEERPLAN_DECODE_FULL_WAVE (read once): the trim rule in force.
decode_split::FullWave full_wave_mode() {
  static const decode_split::FullWave mode = [] {
    const char* e = std::getenv("PEERPLAN_DECODE_FULL_WAVE");
    const std::string v = e ? e : "";
    return v == "keep" ? decode_split::FullWave::Keep : v == "trim" ? decode_split::FullWave::Trim : decode_split::FullWave::Auto;
  }();
  return mode;
}

DecodePlan decode_plan(int batch, int kv_heads, int max_ctx, int sm_count, bool clusters, const SplitShape& sh) {
  // (The clusters' residency limit: clusters of 8 must fit a GPC each; near a full wave of them, batch
  // 8 x 8 kv heads: 512 blocks, they did not, and batch 8 streamed a long cache 25 % slower per sequence
  // than 7 or 9 (H200, 2026-12-03 study grid: 131k, 1260 us vs 878 at 7, 1190 at 9). Up to 3 blocks per
  // SM they are kept: at short contexts they save the merge launch (256 tokens: batch 8 8.6 us, 9 11.3 us).)
  return decode_split::plan(batch, kv_heads, max_ctx, sm_count, clusters, sh, full_wave_mode());
}

template <class KV>
void dispatch_dims(const DecodeParams& p, const DecodeVariant& v, int batch, bool cluster, cudaStream_t stream) {
  if (v.dim_tile == 256) {
    if (v.group_tile > 8) throw RuntimeError("decode_attention: internal: dim tile 256 with group tile > 8");
    if (v.general) dispatch_group<256, true, KV>(p, batch, v.group_tile, cluster, stream);
    else dispatch_group<256, false, KV>(p, batch, v.group_tile, cluster, stream);
  } else if (v.dim_tile == 128) {
    if (v.general) dispatch_group<128, true, KV>(p, batch, v.group_tile, cluster, stream);
    else dispatch_group<128, false, KV>(p, batch, v.group_tile, cluster, stream);
  } else {
    if (v.general) dispatch_group<64, true, KV>(p, batch, v.group_tile, cluster, stream);
    else dispatch_group<64, false, KV>(p, batch, v.group_tile, cluster, stream);
  }
}

}  // namespace

int decode_attention_chunk(int batch, int kv_heads, int max_ctx, int sm_count, int window, int head_dim, int group) {
  const int span = window > 0 ? std::min(max_ctx, window) : max_ctx;
  const SplitShape sh = decode_split::shape(group, head_dim);
  const DecodePlan plan = decode_plan(batch, kv_heads, span, sm_count, clusters_supported(), sh);
  return chunk_len(span, plan.splits, sh.quantum);  // the longest chunk
}

size_t decode_attention_workspace_bytes(int batch, int heads, int head_dim, int max_ctx, int kv_heads,
                                        int sm_count) {
  // Sized for the workspace path (the cluster path needs none), so any GPU can run the shape.
  const int group = kv_heads > 0 && heads % kv_heads == 0 ? heads / kv_heads : 1;
  const int64_t splits = decode_split::splits(batch, kv_heads, max_ctx, sm_count, decode_split::shape(group, head_dim));
  return size_t(int64_t(batch) * heads * splits * (head_dim + 1)) * sizeof(float);
}

DecodeLaunch decode_attention_launch(int batch, int heads, int head_dim, int max_ctx, int kv_heads, int sm_count) {
  const int group = kv_heads > 0 && heads % kv_heads == 0 ? heads / kv_heads : 1;
  const SplitShape sh = decode_split::shape(group, head_dim);
  const DecodePlan plan = decode_plan(batch, kv_heads, max_ctx, sm_count, clusters_supported(), sh);
  DecodeLaunch l;
  l.splits = plan.splits;
  l.cluster = plan.cluster;
  l.chunk = chunk_len(max_ctx, plan.splits, sh.quantum);
  const int64_t blocks = int64_t(batch) * kv_heads * sh.blocks_per_kv_head * plan.splits;
  const int64_t per_wave = int64_t(std::max(sm_count, 1)) * sh.blocks_per_sm;
  l.waves = int((blocks + per_wave - 1) / per_wave);
  return l;
}

void decode_attention(const DecodeAttention& a, int sm_count, cudaStream_t stream) {
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw RuntimeError("decode_attention: heads (" + std::to_string(a.heads) + ") must be a multiple of kv_heads (" +
                       std::to_string(a.kv_heads) + ")");
  const DecodeVariant v = decode_variant(a.heads / a.kv_heads, a.head_dim);
  if (v.group_tile == 0)
    throw RuntimeError("decode_attention: " + std::to_string(a.heads / a.kv_heads) +
                       " query heads per kv head with head_dim " + std::to_string(a.head_dim) +
                       " do not run (1 to 16 query heads per kv head, head_dim a multiple of 8 up to 256)");
  if (a.q_row_stride % 8 != 0)
    throw RuntimeError("decode_attention: q_row_stride must be a multiple of 8 (Q is read in 16-byte pieces)");
  if (a.batch == 0) return;
  DecodeParams p{};
  p.q = a.q;
  p.q_row_stride = a.q_row_stride;
  const bool fp8 = a.k_cache_fp8 != nullptr;
  if (fp8 != (a.v_cache_fp8 != nullptr))
    throw RuntimeError("decode_attention: an FP8 KV cache needs both k_cache_fp8 and v_cache_fp8");
  p.k_cache = fp8 ? static_cast<const void*>(a.k_cache_fp8) : a.k_cache;
  p.v_cache = fp8 ? static_cast<const void*>(a.v_cache_fp8) : a.v_cache;
  p.v_scale = fp8 ? a.v_scale : 1.f;
  p.slots = a.slots;
  p.seq_lens = a.seq_lens;
  p.out = a.out;
  p.heads = a.heads;
  p.kv_heads = a.kv_heads;
  p.max_ctx = a.max_ctx;
  if (a.window < 0) throw RuntimeError("decode_attention: window must be >= 0 (0: the whole context)");
  p.window = a.window;
  // The split-K plan is made for the longest span a sequence attends to, min(max_ctx, window), as it
  // is for max_ctx without a window (one wave of blocks, at most one split per 64 tokens of the
  // span). Never more splits than for max_ctx, so decode_attention_workspace_bytes (without the
  // window) always holds the workspace.
  const int span = a.window > 0 ? std::min(a.max_ctx, a.window) : a.max_ctx;
  const DecodePlan plan =
      decode_plan(a.batch, a.kv_heads, span, sm_count, clusters_supported(), decode_split::shape(a.heads / a.kv_heads, a.head_dim));
  p.splits = plan.splits;
  const float scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt(float(a.head_dim));
  p.scale_log2 = scale * 1.4426950408889634f * (fp8 ? a.k_scale : 1.f);
  const int64_t n = int64_t(a.batch) * a.heads * p.splits;
  p.ws_o = a.workspace;
  p.ws_lse = a.workspace + n * a.head_dim;
  if (p.splits > 1 && !plan.cluster && !a.workspace)
    throw RuntimeError("decode_attention: workspace required for split-K");
  p.group = a.heads / a.kv_heads;
  p.head_dim = a.head_dim;
  p.group_split = v.group_split;
  if (fp8) dispatch_dims<uint8_t>(p, v, a.batch, plan.cluster, stream);
  else dispatch_dims<bf16>(p, v, a.batch, plan.cluster, stream);
}

}  // namespace peerplan::kernels
