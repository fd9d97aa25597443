// Decode attention (one query token per sequence) over a contiguous per-sequence KV cache, GQA,
// flash-decoding split-K. One block handles one (chunk of context, kv head, sequence) and all the
// query heads that share that kv head, so each K/V row is read from HBM once per group.
//
// The kernel is bandwidth-bound, so it is built around bytes in flight: each warp takes 16 tokens
// per step and issues all their K and V loads (16-byte, coalesced) before it uses any, and the
// arithmetic runs on the tensor cores (mma.sync m16n8k16), where with 8 query heads per kv head
// fp32 FMAs alone would cap the kernel well under HBM speed. The query heads are the M rows of the
// mma (padded to 16), tokens and head dims the N/K sides. The fragments are filled straight from
// the 16-byte loads, with no shared-memory staging:
//   S = Q K^T : the head dim is the reduction, so it may be visited in any order as long as Q and
//               K agree. Lane (g, t) loads dims [32i + 8t, +8) of token g's K row; the
//               fragments' logical dims 2t, 2t+1 | 8+2t, 9+2t are then its physical dims
//               32i + 8t + 4h + (0,1 | 2,3), and Q is loaded with the same mapping.
//   O = P V   : P (the S accumulators, two 8-token n-tiles) is already an A fragment. A B fragment
//               needs two tokens' values of one dim per register: lane (g, t) loads tokens
//               2t, 2t+1, 8+2t, 9+2t at dims [64i + 8g, +8) and pairs them with byte permutes;
//               logical output column n of n-tile (i, j) is then physical dim 64i + 8n + j.
// Each warp keeps a running softmax (max, sum, O) in registers; the block's 4 warps are merged
// through shared memory at the end, the splits of a sequence by a second small kernel.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/mma_ptx.cuh"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kStepTokens = 16;                     // tokens per warp step
constexpr int kChunkQuantum = kWarps * kStepTokens;  // chunks are multiples of this
constexpr int kBlocksPerSmTarget = 8;               // split-K aims at ~8 blocks per SM
// Resident blocks per SM the register budget is cut for (3: <= 168 registers a thread). A macro
// only so that a benchmark build can try another value.
#ifndef PEERPLAN_DECODE_MIN_BLOCKS
#define PEERPLAN_DECODE_MIN_BLOCKS 3
#endif

struct DecodeParams {
  const bf16* q;
  int64_t q_row_stride;
  const bf16* k_cache;
  const bf16* v_cache;
  const int* slots;
  const int* seq_lens;
  bf16* out;
  float* ws_o;    // [batch][heads][splits][D]
  float* ws_lse;  // [batch][heads][splits]
  int heads, kv_heads, max_ctx, splits;  // splits: fixed grid dimension
  float scale_log2;                      // scale * log2(e): softmax in base 2
};

// A sequence of len tokens is cut into chunks of this length (a multiple of kChunkQuantum), so the
// work per block follows the real context, not the cache's capacity, and the grid stays fixed.
__host__ __device__ inline int chunk_len(int len, int splits) {
  const int c = (len + splits - 1) / splits;
  return (c + kChunkQuantum - 1) / kChunkQuantum * kChunkQuantum;
}

__device__ __forceinline__ uint4 ld16(const bf16* p) { return *reinterpret_cast<const uint4*>(p); }

template <int D, int G>
__global__ void __launch_bounds__(kThreads, PEERPLAN_DECODE_MIN_BLOCKS) decode_split_kernel(DecodeParams p) {
  static_assert(G >= 1 && G <= 16, "query heads per kv head");
  constexpr int NB32 = D / 32, NB64 = D / 64;
  constexpr bool kUpper = G > 8;  // mma rows 8..15 hold real heads
  __shared__ float o_s[kWarps][G][D + 4];  // +4: the quad-strided stores below hit 2 banks, not 16
  __shared__ float m_s[kWarps][G], l_s[kWarps][G];

  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int len = p.seq_lens[b];
  const int chunk = chunk_len(len, p.splits);
  const int t0 = split * chunk;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int h0 = kvh * G;
  if (t0 >= len) {  // this chunk lies past the sequence: contribute nothing to the merge
    if (p.splits > 1 && tid < G) p.ws_lse[(int64_t(b) * p.heads + h0 + tid) * p.splits + split] = -INFINITY;
    return;
  }
  const int t1 = min(t0 + chunk, len);
  const int g = lane >> 2, t = lane & 3;
  const int slot = p.slots ? p.slots[b] : b;
  const int64_t kv_base = (int64_t(slot) * p.kv_heads + kvh) * p.max_ctx * D;
  const bf16* kp = p.k_cache + kv_base;
  const bf16* vp = p.v_cache + kv_base;

  // Q: rows g and g+8 of the A fragment are heads h0+g and h0+g+8 (zeros past the group).
  uint4 qlo[NB32], qhi[NB32];
  {
    const bf16* qrow = p.q + int64_t(b) * p.q_row_stride + int64_t(h0) * D;
#pragma unroll
    for (int i = 0; i < NB32; ++i) {
      qlo[i] = g < G ? ld16(qrow + int64_t(g) * D + 32 * i + 8 * t) : make_uint4(0, 0, 0, 0);
      qhi[i] = (kUpper && g + 8 < G) ? ld16(qrow + int64_t(g + 8) * D + 32 * i + 8 * t) : make_uint4(0, 0, 0, 0);
    }
  }

  float o[NB64][8][4];
#pragma unroll
  for (int i = 0; i < NB64; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) o[i][j][0] = o[i][j][1] = o[i][j][2] = o[i][j][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // heads g and g+8 (scaled base-2 units)
  const float sl2 = p.scale_log2;

  for (int tb = t0 + warp * kStepTokens; tb < t1; tb += kWarps * kStepTokens) {
    // All loads of the step first. Tokens past the chunk read the chunk's last row instead
    // (finite data, in bounds); their scores are masked, so their weight is exactly 0.
    uint4 kx[2][NB32], vx[NB64][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const int tok = min(tb + 8 * n + g, t1 - 1);
#pragma unroll
      for (int i = 0; i < NB32; ++i) kx[n][i] = ld16(kp + int64_t(tok) * D + 32 * i + 8 * t);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int tok = min(tb + (r >> 1) * 8 + 2 * t + (r & 1), t1 - 1);
#pragma unroll
      for (int i = 0; i < NB64; ++i) vx[i][r] = ld16(vp + int64_t(tok) * D + 64 * i + 8 * g);
    }

    // S (heads x 16 tokens) as two n-tiles of 8 tokens.
    float s[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int i = 0; i < NB32; ++i) {
        ptx::mma_bf16(s[n], qlo[i].x, qhi[i].x, qlo[i].y, qhi[i].y, kx[n][i].x, kx[n][i].y);
        ptx::mma_bf16(s[n], qlo[i].z, qhi[i].z, qlo[i].w, qhi[i].w, kx[n][i].z, kx[n][i].w);
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
    const uint32_t pa0 = ptx::pack_bf16(s[0][0], s[0][1]);
    const uint32_t pa2 = ptx::pack_bf16(s[1][0], s[1][1]);
    const uint32_t pa1 = kUpper ? ptx::pack_bf16(s[0][2], s[0][3]) : 0u;
    const uint32_t pa3 = kUpper ? ptx::pack_bf16(s[1][2], s[1][3]) : 0u;

    // O = O * alpha + P V.
#pragma unroll
    for (int i = 0; i < NB64; ++i) {
      const uint32_t* r0 = reinterpret_cast<const uint32_t*>(&vx[i][0]);
      const uint32_t* r1 = reinterpret_cast<const uint32_t*>(&vx[i][1]);
      const uint32_t* r2 = reinterpret_cast<const uint32_t*>(&vx[i][2]);
      const uint32_t* r3 = reinterpret_cast<const uint32_t*>(&vx[i][3]);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const uint32_t sel = (j & 1) ? 0x7632u : 0x5410u;  // high or low bf16 of both words
        const uint32_t b0 = __byte_perm(r0[j >> 1], r1[j >> 1], sel);  // tokens 2t, 2t+1 at dim 64i+8g+j
        const uint32_t b1 = __byte_perm(r2[j >> 1], r3[j >> 1], sel);  // tokens 8+2t, 9+2t
        o[i][j][0] *= a0;
        o[i][j][1] *= a0;
        if (kUpper) {
          o[i][j][2] *= a1;
          o[i][j][3] *= a1;
        }
        ptx::mma_bf16(o[i][j], pa0, pa1, pa2, pa3, b0, b1);
      }
    }
  }

  // Merge the 4 warps. A warp that got no tokens has m = -inf, l = 0, O = 0: weight 0.
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  // c0/c1 of n-tile (i, j): head g, dims 64i + 8(2t) + j and 64i + 8(2t+1) + j; c2/c3: head g+8.
#pragma unroll
  for (int i = 0; i < NB64; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int d0 = 64 * i + 16 * t + j;
      if (g < G) {
        o_s[warp][g][d0] = o[i][j][0];
        o_s[warp][g][d0 + 8] = o[i][j][1];
      }
      if (kUpper && g + 8 < G) {
        o_s[warp][g + 8][d0] = o[i][j][2];
        o_s[warp][g + 8][d0 + 8] = o[i][j][3];
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
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float wt = ptx::ex2(m_s[w][hg] - mx);
      num += wt * o_s[w][hg][d];
      den += wt * l_s[w][hg];
    }
    const int h = h0 + hg;
    if (p.splits == 1) {
      p.out[(int64_t(b) * p.heads + h) * D + d] = __float2bfloat16(num / den);
    } else {
      const int64_t ix = (int64_t(b) * p.heads + h) * p.splits + split;
      p.ws_o[ix * D + d] = num / den;
      if (d == 0) p.ws_lse[ix] = mx + log2f(den);
    }
  }
}

// Merges the chunks of one (sequence, head): weights 2^(lse_i - max) on the normalised partials.
template <int D>
__global__ void decode_merge_kernel(DecodeParams p) {
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
  const int len = p.seq_lens[b];
  const int chunk = chunk_len(len, p.splits);
  const int active = min(p.splits, (len + chunk - 1) / chunk);
  const int64_t base = (int64_t(b) * p.heads + h) * p.splits;
  float m = -INFINITY;
  for (int s = 0; s < active; ++s) m = fmaxf(m, p.ws_lse[base + s]);
  float num = 0, den = 0;
  for (int s = 0; s < active; ++s) {
    const float w = exp2f(p.ws_lse[base + s] - m);
    den += w;
    num += w * p.ws_o[(base + s) * D + d];
  }
  p.out[(int64_t(b) * p.heads + h) * D + d] = __float2bfloat16(num / den);
}

template <int D, int G>
void launch_decode(const DecodeParams& p, int batch, cudaStream_t stream) {
  dim3 grid(p.splits, p.kv_heads, batch);
  decode_split_kernel<D, G><<<grid, kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH("decode_split_kernel");
  if (p.splits > 1) {
    decode_merge_kernel<D><<<dim3(p.heads, batch), D, 0, stream>>>(p);
    CUDA_CHECK_LAUNCH("decode_merge_kernel");
  }
}

template <int D>
void dispatch_group(const DecodeParams& p, int batch, int group, cudaStream_t stream) {
  switch (group) {
    case 1: return launch_decode<D, 1>(p, batch, stream);
    case 2: return launch_decode<D, 2>(p, batch, stream);
    case 4: return launch_decode<D, 4>(p, batch, stream);
    case 8: return launch_decode<D, 8>(p, batch, stream);
    case 16: return launch_decode<D, 16>(p, batch, stream);
    default:
      throw RuntimeError("decode_attention: " + std::to_string(group) +
                         " query heads per kv head is not instantiated (supported: 1, 2, 4, 8, 16)");
  }
}

// Chunks per sequence: enough that batch x kv_heads x chunks is ~8 blocks per SM (a few waves of
// the ~3 resident blocks per SM, so the tail wave is short), at most one chunk per kChunkQuantum
// tokens of the cache. The cache capacity only caps the count: each sequence's chunks are cut from
// its own length (chunk_len), so a large capacity costs no work.
int decode_splits(int batch, int kv_heads, int max_ctx, int sm_count) {
  const int per_seq = std::max(1, batch * kv_heads);
  const int target = (kBlocksPerSmTarget * std::max(sm_count, 1) + per_seq - 1) / per_seq;
  const int hi = std::max(1, (max_ctx + kChunkQuantum - 1) / kChunkQuantum);
  return std::max(1, std::min(target, hi));
}

}  // namespace

bool attention_head_dim_supported(int head_dim) { return head_dim == 64 || head_dim == 128; }

int decode_attention_chunk(int batch, int kv_heads, int max_ctx, int sm_count) {
  return chunk_len(max_ctx, decode_splits(batch, kv_heads, max_ctx, sm_count));  // the longest chunk
}

size_t decode_attention_workspace_bytes(int batch, int heads, int head_dim, int max_ctx, int kv_heads,
                                        int sm_count) {
  const int64_t splits = decode_splits(batch, kv_heads, max_ctx, sm_count);
  return size_t(int64_t(batch) * heads * splits * (head_dim + 1)) * sizeof(float);
}

void decode_attention(const DecodeAttention& a, int sm_count, cudaStream_t stream) {
  if (!attention_head_dim_supported(a.head_dim))
    throw RuntimeError("decode_attention: head_dim " + std::to_string(a.head_dim) + " not supported (64 or 128)");
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw RuntimeError("decode_attention: heads (" + std::to_string(a.heads) + ") must be a multiple of kv_heads (" +
                       std::to_string(a.kv_heads) + ")");
  if (a.q_row_stride % 8 != 0)
    throw RuntimeError("decode_attention: q_row_stride must be a multiple of 8 (Q is read in 16-byte pieces)");
  if (a.batch == 0) return;
  DecodeParams p{};
  p.q = a.q;
  p.q_row_stride = a.q_row_stride;
  p.k_cache = a.k_cache;
  p.v_cache = a.v_cache;
  p.slots = a.slots;
  p.seq_lens = a.seq_lens;
  p.out = a.out;
  p.heads = a.heads;
  p.kv_heads = a.kv_heads;
  p.max_ctx = a.max_ctx;
  p.splits = decode_splits(a.batch, a.kv_heads, a.max_ctx, sm_count);
  const float scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt(float(a.head_dim));
  p.scale_log2 = scale * 1.4426950408889634f;
  const int64_t n = int64_t(a.batch) * a.heads * p.splits;
  p.ws_o = a.workspace;
  p.ws_lse = a.workspace + n * a.head_dim;
  if (p.splits > 1 && !a.workspace) throw RuntimeError("decode_attention: workspace required for split-K");
  const int group = a.heads / a.kv_heads;
  if (a.head_dim == 128) dispatch_group<128>(p, a.batch, group, stream);
  else dispatch_group<64>(p, a.batch, group, stream);
}

}  // namespace peerplan::kernels
