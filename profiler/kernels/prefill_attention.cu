// Causal prefill attention, FlashAttention-2 style: one block = 4 warps of one head, each warp
// owning 16 (MT = 1) or 32 (MT = 2) query rows; K/V tiles of 64 keys stream through shared memory
// with cp.async, two stages deep (tile j+1 loads while tile j is used); S = Q K^T and O += P V run
// on mma.sync m16n8k16 (bf16 in, fp32 accumulate) with operands from ldmatrix; the scores, the
// online softmax state and the O accumulator stay in registers for the whole key loop (nothing
// round-trips through shared memory). K/V are read from the KV cache, so a chunked prefill attends
// to the context already cached; tiles no row of a warp can see are skipped, so causal attention
// costs half of full attention, and a sliding window (PrefillAttention::window) costs its band.
// MT = 1 keeps Q in registers too. MT = 2 reuses every K/V fragment read from shared memory for
// two 16-row tiles, which halves the shared-memory traffic per FLOP (shared-memory bandwidth, not
// the tensor cores, bounds the MT = 1 kernel on an H100/H200); Q then lives in shared memory to
// leave registers for the two accumulators. MT = 2 blocks hold 128 rows, so short prompts use
// MT = 1 to keep enough blocks.
// Any number of query heads per kv head runs (a block is one query head; it reads its kv head's
// cache). Instantiated for head_dim 64, 80, 96, 128 and 192 (a multiple of 16: whole m16n8k16
// steps; the shared-memory rows of D + 8 elements keep ldmatrix free of bank conflicts for all).
// ptxas -v (sm_90, 2026-12-02): no spills except 96 at MT = 2 (40 bytes; 80 and 128 use 255
// registers without). 192 runs at MT = 1 only (255 registers bf16, 250 FP8, no spills; 102 KiB of
// shared memory, 2 blocks per SM): its MT = 2 kernel spills 872 bytes. Not 256: 2316 bytes at
// MT = 2, 76 at MT = 1; it prefills on cuDNN only (prefill_dispatch.cpp,
// profiler/common/attention_support.hpp).
#include <cfloat>
#include <cmath>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/kv_fp8.cuh"
#include "profiler/kernels/mma_ptx.cuh"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kBN = 64;  // keys per tile
// Prompts at least this long use MT = 2 (a macro only so a benchmark build can move it).
#ifndef PEERPLAN_PREFILL_MT2_MIN_Q
#define PEERPLAN_PREFILL_MT2_MIN_Q 1024
#endif

struct PrefillParams {
  const bf16* q;
  int64_t q_row_stride;
  const void* k_cache;  // bf16 or e4m3 codes (the kernel's KV type)
  const void* v_cache;
  float v_scale;        // FP8 KV: V's per-tensor scale, on the output (K's is in scale_log2)
  const int* slots;
  const int* q_start;
  const int* seq_lens;
  bf16* out;
  int heads, kv_heads, max_ctx;
  int window;  // sliding window (kWin kernels): row at position p sees keys (p - window, p]
  float scale_log2;
};

template <int D, int MT>
struct Cfg {
  static constexpr int BM = 16 * MT * kWarps;  // query rows per block
  static constexpr int LD = D + 8;  // bf16 row stride: +16 bytes puts the 8 rows of an ldmatrix in different banks
  static constexpr int kv_elems = kBN * LD;
  static constexpr int q_elems = MT == 1 ? 0 : BM * LD;
  static constexpr size_t smem = (size_t(4) * kv_elems + q_elems) * sizeof(bf16);  // 2 stages x (K, V) [+ Q]
};

__device__ __forceinline__ uint32_t ld_u32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// 2 blocks per SM: MT = 1 measured faster so (no spills at <= 255 registers) than 3 blocks with
// <= 168 registers and spills (H200, 2026-12-01: 222 vs 203 TFLOP/s at 2048 tokens).
// KV = uint8_t: an FP8 e4m3 cache, converted to bf16 on its way into shared memory (a register
// load, not cp.async; kv_fp8.cuh).
// kWin: a sliding window (p.window). A separate instantiation, so full attention compiles exactly
// as before windows existed; the band's mask is one unsigned compare per score (0 <= pos - t < W),
// which keeps the windowed kernels at the unwindowed ones' registers and spills (ptxas -v, sm_90,
// 2026-12-03: identical counts; the mask as two signed compares spilled 136 bytes at head_dim 128,
// MT = 2).
template <int D, int MT, class KV, bool kWin>
__global__ void __launch_bounds__(kWarps * 32, 2) prefill_kernel(PrefillParams p) {
  using C = Cfg<D, MT>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* smem = reinterpret_cast<bf16*>(smem_raw);  // stage s: K at (2s) * kv_elems, V at (2s+1) * kv_elems
  bf16* qsm = smem + 4 * C::kv_elems;              // MT = 2: the block's Q rows

  const int h = blockIdx.x, seq = blockIdx.z;
  const int qtile = int(gridDim.y) - 1 - int(blockIdx.y);  // the longest (last) query tiles start first
  const int qs = p.q_start[seq];
  const int q_len = p.q_start[seq + 1] - qs;
  const int qt0 = qtile * C::BM;
  if (qt0 >= q_len) return;
  const int L = p.seq_lens[seq];
  const int ctx0 = L - q_len;  // cache position of the first new token
  const int kvh = h / (p.heads / p.kv_heads);
  const int slot = p.slots ? p.slots[seq] : seq;
  const int64_t kv_base = (int64_t(slot) * p.kv_heads + kvh) * p.max_ctx * D;
  const KV* kg = static_cast<const KV*>(p.k_cache) + kv_base;
  const KV* vg = static_cast<const KV*>(p.v_cache) + kv_base;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t4 = lane & 3;
  constexpr int VPR = D / 8;  // 16-byte pieces per row

  // Keys [kv_begin, kv_end) are visible to at least one row of this block (row i at position
  // ctx0 + i sees keys (ctx0 + i - window, ctx0 + i]; without a window, from 0). Sliding window
  // (issue 18, Mistral's convention: transformers' sliding_window_overlay, vLLM's flash-attn
  // window_size = (window - 1, 0)): the tiles wholly before the band of the block's first row are
  // never loaded, so a block reads and computes about window + BM keys, not its whole context.
  const int last_row = min(qt0 + C::BM, q_len) - 1;
  const int kv_end = ctx0 + last_row + 1;
  const int kv_begin = kWin ? max(0, ctx0 + qt0 - p.window + 1) : 0;
  const int j_begin = kv_begin / kBN;
  const int n_tiles = (kv_end + kBN - 1) / kBN;

  auto load_tile = [&](int tile, int stage) {
    const int kt0 = tile * kBN;
    bf16* ks = smem + (2 * stage) * C::kv_elems;
    bf16* vs = ks + C::kv_elems;
#pragma unroll
    for (int i = tid; i < kBN * VPR; i += kWarps * 32) {
      const int r = i / VPR, c = (i % VPR) * 8;
      const bool ok = kt0 + r < kv_end;
      const int64_t off = int64_t(ok ? kt0 + r : 0) * D + c;
      if constexpr (sizeof(KV) == 1) {
        *reinterpret_cast<uint4*>(ks + r * C::LD + c) = ok ? ld_kv8(kg + off) : make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(vs + r * C::LD + c) = ok ? ld_kv8(vg + off) : make_uint4(0, 0, 0, 0);
      } else {
        ptx::cp_async16(ks + r * C::LD + c, kg + off, ok);
        ptx::cp_async16(vs + r * C::LD + c, vg + off, ok);
      }
    }
  };
  if constexpr (MT > 1) {  // Q rows past q_len are zeros (their results are never stored)
#pragma unroll
    for (int i = tid; i < C::BM * VPR; i += kWarps * 32) {
      const int r = i / VPR, c = (i % VPR) * 8;
      const bool ok = qt0 + r < q_len;
      ptx::cp_async16(qsm + r * C::LD + c, p.q + int64_t(qs + (ok ? qt0 + r : 0)) * p.q_row_stride + int64_t(h) * D + c,
                      ok);
    }
  }
  load_tile(j_begin, j_begin & 1);
  ptx::cp_async_commit();  // Q (MT = 2) lands with the first tile

  const int wrow0 = qt0 + warp * 16 * MT;  // this warp's first row (block-relative to the sequence)
  // MT = 1: Q fragments (A operand) straight from global memory, once: rows g and g + 8.
  uint32_t qf[MT == 1 ? D / 16 : 1][4];
  if constexpr (MT == 1) {
    const int r0 = wrow0 + g, r1 = r0 + 8;
    const bf16* q0 = p.q + int64_t(qs + r0) * p.q_row_stride + int64_t(h) * D;
    const bf16* q1 = q0 + 8 * p.q_row_stride;
    const bool v0 = r0 < q_len, v1 = r1 < q_len;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int c = kk * 16 + 2 * t4;
      qf[kk][0] = v0 ? ld_u32(q0 + c) : 0u;
      qf[kk][1] = v1 ? ld_u32(q1 + c) : 0u;
      qf[kk][2] = v0 ? ld_u32(q0 + c + 8) : 0u;
      qf[kk][3] = v1 ? ld_u32(q1 + c + 8) : 0u;
    }
  }

  float o[MT][D / 8][4];
  float m[MT][2], l[MT][2];  // rows g and g+8 of each m-tile, base-2 scaled units
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int j = 0; j < D / 8; ++j) o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }
  const int warp_first = ctx0 + wrow0, warp_last = warp_first + 16 * MT - 1;  // row i sees keys t <= ctx0 + i
  const int W = kWin ? p.window : 0;  // ... and (kWin) t > ctx0 + i - W
  const float sl2 = p.scale_log2;
  // ldmatrix lane roles: matrix lm = lane / 8, its row lr = lane % 8.
  const int lm = lane >> 3, lr = lane & 7;

  for (int j = j_begin; j < n_tiles; ++j) {
    if (j + 1 < n_tiles) load_tile(j + 1, (j + 1) & 1);
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();  // tile j has landed (for this thread's copies) ...
    __syncthreads();          // ... and for everyone's
    const int kt0 = j * kBN;
    // Otherwise every key of the tile is in the future of all the warp's rows, or (window) before
    // the band of all of them.
    if (kt0 <= warp_last && (!kWin || kt0 + kBN - 1 > warp_first - W)) {
      const bf16* ks = smem + (2 * (j & 1)) * C::kv_elems;
      const bf16* vs = ks + C::kv_elems;
      float s[MT][kBN / 8][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < kBN / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
      // S = Q K^T. K rows are keys (the n index), so plain ldmatrix gives B fragments: matrices
      // (keys +0..7, dims +0..7), (keys +0..7, dims +8..15), (keys +8..15, dims +0..7), (+8, +8).
      // Q rows are the m index: matrices (rows +0..7, dims +0..7), (rows +8..15, dims +0..7), ...
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a[MT][4];
        if constexpr (MT == 1) {
          a[0][0] = qf[kk][0], a[0][1] = qf[kk][1], a[0][2] = qf[kk][2], a[0][3] = qf[kk][3];
        } else {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            ptx::ldmatrix_x4(a[mt][0], a[mt][1], a[mt][2], a[mt][3],
                             ptx::smem_u32(qsm + (warp * 16 * MT + mt * 16 + (lm & 1) * 8 + lr) * C::LD + kk * 16 +
                                           (lm >> 1) * 8));
        }
#pragma unroll
        for (int np = 0; np < kBN / 16; ++np) {
          uint32_t b0, b1, b2, b3;
          ptx::ldmatrix_x4(b0, b1, b2, b3,
                           ptx::smem_u32(ks + (np * 16 + (lm >> 1) * 8 + lr) * C::LD + kk * 16 + (lm & 1) * 8));
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            ptx::mma_bf16(s[mt][2 * np], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b0, b1);
            ptx::mma_bf16(s[mt][2 * np + 1], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b2, b3);
          }
        }
      }
      // Only tiles reaching past the warp's first row (causal) or, with a window, starting at or
      // before its last row's band edge.
      const bool need_mask = kt0 + kBN - 1 > warp_first || (kWin && kt0 <= warp_last - W);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int pos0 = warp_first + mt * 16 + g, pos1 = pos0 + 8;
        if (need_mask) {
#pragma unroll
          for (int n = 0; n < kBN / 8; ++n) {
            const int t = kt0 + n * 8 + 2 * t4;
            if constexpr (kWin) {  // key t visible iff 0 <= pos - t < W: one unsigned compare
              if (unsigned(pos0 - t) >= unsigned(W)) s[mt][n][0] = -INFINITY;
              if (unsigned(pos0 - t - 1) >= unsigned(W)) s[mt][n][1] = -INFINITY;
              if (unsigned(pos1 - t) >= unsigned(W)) s[mt][n][2] = -INFINITY;
              if (unsigned(pos1 - t - 1) >= unsigned(W)) s[mt][n][3] = -INFINITY;
            } else {
              if (t > pos0) s[mt][n][0] = -INFINITY;
              if (t + 1 > pos0) s[mt][n][1] = -INFINITY;
              if (t > pos1) s[mt][n][2] = -INFINITY;
              if (t + 1 > pos1) s[mt][n][3] = -INFINITY;
            }
          }
        }
        // Online softmax: a row's 64 scores sit in the 4 lanes of one quad.
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int n = 0; n < kBN / 8; ++n) {
          mx0 = fmaxf(mx0, fmaxf(s[mt][n][0], s[mt][n][1]));
          mx1 = fmaxf(mx1, fmaxf(s[mt][n][2], s[mt][n][3]));
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float mn0 = fmaxf(m[mt][0], mx0 * sl2), mn1 = fmaxf(m[mt][1], mx1 * sl2);
        // A row with nothing visible yet keeps max -inf: subtract 0 instead (its p are all 0).
        const float base0 = mn0 == -INFINITY ? 0.f : mn0, base1 = mn1 == -INFINITY ? 0.f : mn1;
        const float a0 = ptx::ex2(m[mt][0] - base0), a1 = ptx::ex2(m[mt][1] - base1);  // 0 when m was -inf
        m[mt][0] = mn0;
        m[mt][1] = mn1;
        float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
        for (int n = 0; n < kBN / 8; ++n) {
          s[mt][n][0] = ptx::ex2(fmaf(s[mt][n][0], sl2, -base0));
          s[mt][n][1] = ptx::ex2(fmaf(s[mt][n][1], sl2, -base0));
          s[mt][n][2] = ptx::ex2(fmaf(s[mt][n][2], sl2, -base1));
          s[mt][n][3] = ptx::ex2(fmaf(s[mt][n][3], sl2, -base1));
          sum0 += s[mt][n][0] + s[mt][n][1];
          sum1 += s[mt][n][2] + s[mt][n][3];
        }
        l[mt][0] = l[mt][0] * a0 + sum0;  // lane-partial row sums; the quad is summed once at the end
        l[mt][1] = l[mt][1] * a1 + sum1;
#pragma unroll
        for (int d = 0; d < D / 8; ++d) {
          o[mt][d][0] *= a0;
          o[mt][d][1] *= a0;
          o[mt][d][2] *= a1;
          o[mt][d][3] *= a1;
        }
      }
      // O += P V. The S accumulators of two key n-tiles are exactly an A fragment of P; V rows are
      // keys (the k index), so ldmatrix.trans gives B fragments: matrices (keys +0..7, dims
      // +0..7), (keys +8..15, dims +0..7), (keys +0..7, dims +8..15), (keys +8..15, dims +8..15).
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk) {
        uint32_t pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          pa[mt][0] = ptx::pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          pa[mt][1] = ptx::pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          pa[mt][2] = ptx::pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          pa[mt][3] = ptx::pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t b0, b1, b2, b3;
          ptx::ldmatrix_x4_trans(b0, b1, b2, b3,
                                 ptx::smem_u32(vs + (kk * 16 + (lm & 1) * 8 + lr) * C::LD + dp * 16 + (lm >> 1) * 8));
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            ptx::mma_bf16(o[mt][2 * dp], pa[mt][0], pa[mt][1], pa[mt][2], pa[mt][3], b0, b1);
            ptx::mma_bf16(o[mt][2 * dp + 1], pa[mt][0], pa[mt][1], pa[mt][2], pa[mt][3], b2, b3);
          }
        }
      }
    }
    __syncthreads();  // everyone is done with stage j&1 before tile j+2 is loaded into it
  }

  const int64_t out_stride = int64_t(p.heads) * D;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float l0 = l[mt][0], l1 = l[mt][1];
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float inv0 = l0 > 0.f ? p.v_scale / l0 : 0.f, inv1 = l1 > 0.f ? p.v_scale / l1 : 0.f;
    const int r0 = wrow0 + mt * 16 + g, r1 = r0 + 8;
    bf16* o0 = p.out + int64_t(qs + r0) * out_stride + int64_t(h) * D + 2 * t4;
    bf16* o1 = o0 + 8 * out_stride;
#pragma unroll
    for (int d = 0; d < D / 8; ++d) {
      if (r0 < q_len)
        *reinterpret_cast<__nv_bfloat162*>(o0 + d * 8) = __floats2bfloat162_rn(o[mt][d][0] * inv0, o[mt][d][1] * inv0);
      if (r1 < q_len)
        *reinterpret_cast<__nv_bfloat162*>(o1 + d * 8) = __floats2bfloat162_rn(o[mt][d][2] * inv1, o[mt][d][3] * inv1);
    }
  }
}

template <int D, int MT, class KV>
void launch_prefill(const PrefillParams& p, int num_seqs, int max_q_len, cudaStream_t stream) {
  using C = Cfg<D, MT>;
  auto kernel = p.window > 0 ? prefill_kernel<D, MT, KV, true> : prefill_kernel<D, MT, KV, false>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::smem)));
  dim3 grid(p.heads, (max_q_len + C::BM - 1) / C::BM, num_seqs);  // heads fastest: a GQA group's heads share K/V in L2
  kernel<<<grid, kWarps * 32, C::smem, stream>>>(p);
  CUDA_CHECK_LAUNCH("prefill_kernel");
}

template <int D, class KV>
void launch_prefill(const PrefillParams& p, int num_seqs, int max_q_len, cudaStream_t stream) {
  if (max_q_len >= PEERPLAN_PREFILL_MT2_MIN_Q) launch_prefill<D, 2, KV>(p, num_seqs, max_q_len, stream);
  else launch_prefill<D, 1, KV>(p, num_seqs, max_q_len, stream);
}

template <class KV>
void launch_prefill_dim(const PrefillParams& p, int head_dim, int num_seqs, int max_q_len, cudaStream_t stream) {
  switch (head_dim) {
    case 192: return launch_prefill<192, 1, KV>(p, num_seqs, max_q_len, stream);  // MT = 2 spills (872 bytes)
    case 128: return launch_prefill<128, KV>(p, num_seqs, max_q_len, stream);
    case 96: return launch_prefill<96, KV>(p, num_seqs, max_q_len, stream);
    case 80: return launch_prefill<80, KV>(p, num_seqs, max_q_len, stream);
    default: return launch_prefill<64, KV>(p, num_seqs, max_q_len, stream);
  }
}

}  // namespace

void prefill_attention(const PrefillAttention& a, cudaStream_t stream) {
  const bool own = attention_head_dim_supported(a.head_dim);  // else 256: cuDNN only
  if (!own && !attention_head_dim_needs_cudnn(a.head_dim))
    throw RuntimeError("prefill_attention: head_dim " + std::to_string(a.head_dim) +
                       " not supported (64, 80, 96, 128, 192; 256 on cuDNN)");
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw RuntimeError("prefill_attention: heads must be a multiple of kv_heads");
  if (a.q_row_stride % 2 != 0)
    throw RuntimeError("prefill_attention: q_row_stride must be even (Q is read in bf16 pairs)");
  if (a.window < 0) throw RuntimeError("prefill_attention: window must be >= 0 (0: full causal attention)");
  if (a.num_seqs == 0 || a.max_q_len == 0) return;
  // issue 18: cuDNN's fused attention where it runs (bf16 KV; an FP8 KV cache, issue 15, takes the own kernel)
  if (!a.k_cache_fp8 && prefill_attention_cudnn(a, stream)) return;
  if (!own) {  // attention_shape_refusal refuses these shapes before any GPU work; this is the backstop
    const AttentionPath path = prefill_attention_path(a.k_cache_fp8 != nullptr);
    const std::string why = path.kv_fp8  ? std::string("the KV cache is FP8 and cuDNN's graph reads bf16")
                            : !path.cudnn ? path.no_cudnn_why
                                          : prefill_attention_last_path();  // cuDNN refused the graph: its reason
    throw RuntimeError("prefill_attention: head_dim " + std::to_string(a.head_dim) +
                       " runs only on cuDNN (the own kernel would spill registers), which did not run it: " + why);
  }
  PrefillParams p{};
  p.q = a.q;
  p.q_row_stride = a.q_row_stride;
  const bool fp8 = a.k_cache_fp8 != nullptr;
  if (fp8 != (a.v_cache_fp8 != nullptr))
    throw RuntimeError("prefill_attention: an FP8 KV cache needs both k_cache_fp8 and v_cache_fp8");
  p.k_cache = fp8 ? static_cast<const void*>(a.k_cache_fp8) : a.k_cache;
  p.v_cache = fp8 ? static_cast<const void*>(a.v_cache_fp8) : a.v_cache;
  p.v_scale = fp8 ? a.v_scale : 1.f;
  p.slots = a.slots;
  p.q_start = a.q_start;
  p.seq_lens = a.seq_lens;
  p.out = a.out;
  p.heads = a.heads;
  p.kv_heads = a.kv_heads;
  p.max_ctx = a.max_ctx;
  p.window = a.window;
  const float scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt(float(a.head_dim));
  p.scale_log2 = scale * 1.4426950408889634f * (fp8 ? a.k_scale : 1.f);
  if (fp8) launch_prefill_dim<uint8_t>(p, a.head_dim, a.num_seqs, a.max_q_len, stream);
  else launch_prefill_dim<bf16>(p, a.head_dim, a.num_seqs, a.max_q_len, stream);
}

}  // namespace peerplan::kernels
