// Decode attention (one query token per sequence) over a contiguous per-sequence KV cache, GQA,
// flash-decoding split-K. One block handles one (chunk of context, kv head, sequence) and all the
// query heads that share that kv head, so each K/V row is read from HBM once per group.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/attention.hpp"

namespace peerplan::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxChunk = 512;

struct DecodeParams {
  const __nv_bfloat16* q;
  int64_t q_row_stride;
  const __nv_bfloat16* k_cache;
  const __nv_bfloat16* v_cache;
  const int* slots;
  const int* seq_lens;
  __nv_bfloat16* out;
  float* ws_o;    // [batch][heads][splits][D]
  float* ws_lse;  // [batch][heads][splits]
  int heads, kv_heads, max_ctx, chunk, splits;  // chunk: the longest chunk (smem); splits: fixed grid
  float scale_log2;  // scale * log2(e): softmax in base 2
};

__device__ inline void bf16x8_to_float(const uint4& u, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 v = __bfloat1622float2(h[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

template <int D, int G>
__global__ void __launch_bounds__(kThreads) decode_split_kernel(DecodeParams p) {
  constexpr int LPT = D / 8;                    // lanes per token row (16 bytes each)
  constexpr int TPB = kThreads / LPT;           // token rows processed per pass by the block
  extern __shared__ float smem[];
  float* q_s = smem;                            // [G][D]
  float* s_s = q_s + G * D;                     // [G][chunk] scores, then probabilities;
                                                // reused as [TPB][G][D] for the PV reduction
  __shared__ float m_s[G], l_s[G];

  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int len = p.seq_lens[b];
  // The context is cut into `splits` chunks of this sequence's own length, so the work per block
  // follows the real context, not the cache's capacity (and the grid stays graph-stable).
  const int chunk = ((len + p.splits - 1) / p.splits + 31) / 32 * 32;
  const int t0 = split * chunk;
  const int t1 = min(t0 + chunk, len);
  const int tid = threadIdx.x;
  const int h0 = kvh * G;

  if (t0 >= len) {  // this chunk lies past the sequence: contribute nothing to the merge
    if (p.splits > 1 && tid < G) p.ws_lse[(int64_t(b) * p.heads + h0 + tid) * p.splits + split] = -INFINITY;
    return;
  }
  const int slot = p.slots ? p.slots[b] : b;
  const int64_t kv_base = (int64_t(slot) * p.kv_heads + kvh) * p.max_ctx * D;
  const __nv_bfloat16* kp = p.k_cache + kv_base;
  const __nv_bfloat16* vp = p.v_cache + kv_base;

  for (int i = tid; i < G * D; i += kThreads)
    q_s[i] = __bfloat162float(p.q[int64_t(b) * p.q_row_stride + int64_t(h0) * D + i]);
  __syncthreads();

  const int sub = tid % LPT, tg = tid / LPT;
  float qreg[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int j = 0; j < 8; ++j) qreg[g][j] = q_s[g * D + sub * 8 + j];

  // Scores: LPT lanes share one K row; each lane dots its 8 dims against every head of the group.
  for (int t = t0 + tg; t < t1; t += TPB) {
    uint4 raw = *reinterpret_cast<const uint4*>(kp + int64_t(t) * D + sub * 8);
    float k[8];
    bf16x8_to_float(raw, k);
    float dot[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float acc = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) acc += qreg[g][j] * k[j];
      dot[g] = acc;
    }
    // Only the LPT lanes of this token row take part: the other lanes of the warp may have left
    // the loop already (their row count differs), and a full-warp mask would wait for them forever.
    const unsigned row_mask = (LPT == 32 ? 0xffffffffu : ((1u << LPT) - 1u)) << ((tid % 32) / LPT * LPT);
#pragma unroll
    for (int off = LPT / 2; off > 0; off /= 2)
#pragma unroll
      for (int g = 0; g < G; ++g) dot[g] += __shfl_xor_sync(row_mask, dot[g], off);
    if (sub == 0)
#pragma unroll
      for (int g = 0; g < G; ++g) s_s[g * p.chunk + (t - t0)] = dot[g] * p.scale_log2;
  }
  __syncthreads();

  // Softmax within the chunk: warp w takes heads w, w+4, ...
  const int n = t1 - t0;
  const int warp = tid / 32, lane = tid % 32;
  for (int g = warp; g < G; g += kThreads / 32) {
    float* row = s_s + g * p.chunk;
    float m = -INFINITY;
    for (int i = lane; i < n; i += 32) m = fmaxf(m, row[i]);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float l = 0;
    for (int i = lane; i < n; i += 32) {
      float e = exp2f(row[i] - m);
      row[i] = e;
      l += e;
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (lane == 0) { m_s[g] = m; l_s[g] = l; }
  }
  __syncthreads();

  // P x V: the same lane layout as for K; partial sums per token group, then reduced.
  float acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[g][j] = 0;
  for (int t = t0 + tg; t < t1; t += TPB) {
    uint4 raw = *reinterpret_cast<const uint4*>(vp + int64_t(t) * D + sub * 8);
    float v[8];
    bf16x8_to_float(raw, v);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float pr = s_s[g * p.chunk + (t - t0)];
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[g][j] += pr * v[j];
    }
  }
  __syncthreads();  // s_s is reused below
  float* red = s_s;  // [TPB][G][D]
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int j = 0; j < 8; ++j) red[(tg * G + g) * D + sub * 8 + j] = acc[g][j];
  __syncthreads();

  for (int i = tid; i < G * D; i += kThreads) {
    float s = 0;
#pragma unroll
    for (int r = 0; r < TPB; ++r) s += red[r * G * D + i];
    const int g = i / D, d = i % D;
    const int h = h0 + g;
    if (p.splits == 1) {
      p.out[(int64_t(b) * p.heads + h) * D + d] = __float2bfloat16(s / l_s[g]);
    } else {
      const int64_t idx = (int64_t(b) * p.heads + h) * p.splits + split;
      p.ws_o[idx * D + d] = s / l_s[g];
      if (d == 0) p.ws_lse[idx] = m_s[g] + log2f(l_s[g]);
    }
  }
}

// Merges the chunks of one (sequence, head): weights 2^(lse_i - max) on the normalised partials.
template <int D>
__global__ void decode_merge_kernel(DecodeParams p) {
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
  const int len = p.seq_lens[b];
  const int chunk = ((len + p.splits - 1) / p.splits + 31) / 32 * 32;
  const int active = min(p.splits, (len + chunk - 1) / chunk);
  const int64_t base = (int64_t(b) * p.heads + h) * p.splits;
  float m = -INFINITY;
  for (int s = 0; s < active; ++s) m = fmaxf(m, p.ws_lse[base + s]);
  float num = 0, den = 0;
  for (int s = 0; s < active; ++s) {
    float w = exp2f(p.ws_lse[base + s] - m);
    den += w;
    num += w * p.ws_o[(base + s) * D + d];
  }
  p.out[(int64_t(b) * p.heads + h) * D + d] = __float2bfloat16(num / den);
}

template <int D, int G>
void launch_decode(const DecodeParams& p, int batch, cudaStream_t stream) {
  const size_t smem = size_t(G * D + std::max(G * p.chunk, (kThreads / (D / 8)) * G * D)) * sizeof(float);
  auto kernel = decode_split_kernel<D, G>;
  if (smem > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  dim3 grid(p.splits, p.kv_heads, batch);
  kernel<<<grid, kThreads, smem, stream>>>(p);
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
    default:
      throw RuntimeError("decode_attention: " + std::to_string(group) +
                         " query heads per kv head is not instantiated (supported: 1, 2, 4, 8)");
  }
}

}  // namespace

bool attention_head_dim_supported(int head_dim) { return head_dim == 64 || head_dim == 128; }

namespace {
// Chunks per sequence: enough that batch x kv_heads x chunks is ~4 blocks per SM, at least
// max_ctx / 512 (a chunk's scores fit shared memory), at most max_ctx / 64 (shorter chunks cost
// more in the merge than they save).
int decode_splits(int batch, int kv_heads, int max_ctx, int sm_count) {
  const int target = (4 * std::max(sm_count, 1) + batch * kv_heads - 1) / std::max(1, batch * kv_heads);
  const int lo = (max_ctx + kMaxChunk - 1) / kMaxChunk;
  const int hi = std::max(1, (max_ctx + 63) / 64);
  return std::max(lo, std::min(target, hi));
}
}  // namespace

int decode_attention_chunk(int batch, int kv_heads, int max_ctx, int sm_count) {
  const int splits = decode_splits(batch, kv_heads, max_ctx, sm_count);
  return ((max_ctx + splits - 1) / splits + 31) / 32 * 32;  // the longest chunk (at full context)
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
  p.chunk = decode_attention_chunk(a.batch, a.kv_heads, a.max_ctx, sm_count);
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
