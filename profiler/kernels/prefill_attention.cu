// Causal prefill attention, flash-attention style (online softmax over 64-token K/V tiles, tensor
// cores through WMMA bf16 16x16x16 with fp32 accumulation). It reads K/V from the KV cache, so a
// chunked prefill attends to the context already cached. Fully masked tiles are skipped, so
// causal attention costs half of full attention (the cuBLAS "two batched GEMMs + softmax" route
// computes and writes the whole score matrix).
#include <mma.h>

#include <cfloat>
#include <cmath>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/attention.hpp"

namespace peerplan::kernels {
namespace {

using namespace nvcuda;

constexpr int kBM = 64;  // query rows per block (16 per warp)
constexpr int kBN = 64;  // keys per tile
constexpr int kWarps = 4;

struct PrefillParams {
  const __nv_bfloat16* q;
  int64_t q_row_stride;
  const __nv_bfloat16* k_cache;
  const __nv_bfloat16* v_cache;
  const int* slots;
  const int* q_start;
  const int* seq_lens;
  __nv_bfloat16* out;
  int heads, kv_heads, max_ctx;
  float scale_log2;
};

template <int D>
struct Smem {
  static constexpr int LDQ = D + 8;        // bf16 row stride (pads off bank conflicts; multiple of 8)
  static constexpr int LDS = kBN + 4;      // fp32 score row stride
  static constexpr int LDP = kBN + 8;      // bf16 probability row stride (aliases the scores)
  static constexpr int LDO = D + 4;        // fp32 output row stride
  static constexpr size_t q = size_t(kBM) * LDQ * 2;
  static constexpr size_t k = size_t(kBN) * LDQ * 2;
  static constexpr size_t s = size_t(kWarps) * 16 * LDS * 4;
  static constexpr size_t o = size_t(kWarps) * 16 * LDO * 4;
  static constexpr size_t total = q + 2 * k + s + o;
};

template <int D>
__global__ void __launch_bounds__(kWarps * 32) prefill_kernel(PrefillParams p) {
  using S = Smem<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* Qs = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* Ks = reinterpret_cast<__nv_bfloat16*>(smem + S::q);
  __nv_bfloat16* Vs = reinterpret_cast<__nv_bfloat16*>(smem + S::q + S::k);
  float* Ss_all = reinterpret_cast<float*>(smem + S::q + 2 * S::k);
  float* Os_all = reinterpret_cast<float*>(smem + S::q + 2 * S::k + S::s);

  const int seq = blockIdx.z, h = blockIdx.y;
  const int qs = p.q_start[seq];
  const int q_len = p.q_start[seq + 1] - qs;
  const int qt0 = blockIdx.x * kBM;
  if (qt0 >= q_len) return;
  const int L = p.seq_lens[seq];
  const int ctx0 = L - q_len;  // cache position of the first new token
  const int kvh = h / (p.heads / p.kv_heads);
  const int slot = p.slots ? p.slots[seq] : seq;
  const int64_t kv_base = (int64_t(slot) * p.kv_heads + kvh) * p.max_ctx * D;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  constexpr int VPR = D / 8;  // uint4 per row

  for (int i = tid; i < kBM * VPR; i += kWarps * 32) {
    const int r = i / VPR, c = (i % VPR) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (qt0 + r < q_len)
      v = *reinterpret_cast<const uint4*>(p.q + int64_t(qs + qt0 + r) * p.q_row_stride + int64_t(h) * D + c);
    *reinterpret_cast<uint4*>(Qs + r * S::LDQ + c) = v;
  }
  float* Ss = Ss_all + warp * 16 * S::LDS;
  float* Os = Os_all + warp * 16 * S::LDO;
  __nv_bfloat16* Ps = reinterpret_cast<__nv_bfloat16*>(Ss);
  for (int i = lane; i < 16 * S::LDO; i += 32) Os[i] = 0;

  // Lane pair (2r, 2r+1) owns row r of this warp's 16: half of its columns each.
  const int r = lane / 2, half = lane % 2;
  const int row_in_tile = warp * 16 + r;
  const bool row_valid = qt0 + row_in_tile < q_len;
  const int qpos = ctx0 + qt0 + row_in_tile;  // this row's position: it sees keys 0..qpos
  float m_run = -INFINITY, l_run = 0;

  const int last_row = min(qt0 + kBM, q_len) - 1;
  const int kv_end = min(L, ctx0 + last_row + 1);
  for (int kt0 = 0; kt0 < kv_end; kt0 += kBN) {
    __syncthreads();  // previous tile fully consumed
    for (int i = tid; i < kBN * VPR; i += kWarps * 32) {
      const int t = i / VPR, c = (i % VPR) * 8;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (kt0 + t < L) {
        kv = *reinterpret_cast<const uint4*>(p.k_cache + kv_base + int64_t(kt0 + t) * D + c);
        vv = *reinterpret_cast<const uint4*>(p.v_cache + kv_base + int64_t(kt0 + t) * D + c);
      }
      *reinterpret_cast<uint4*>(Ks + t * S::LDQ + c) = kv;
      *reinterpret_cast<uint4*>(Vs + t * S::LDQ + c) = vv;
    }
    __syncthreads();

    // S = Q_w K^T (16 x 64) for this warp's 16 rows.
    const int warp_first_pos = ctx0 + qt0 + warp * 16;
    if (kt0 > warp_first_pos + 15) continue;  // whole tile masked for this warp: skip (no barrier below)
#pragma unroll
    for (int j = 0; j < kBN / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
        wmma::load_matrix_sync(a, Qs + warp * 16 * S::LDQ + kk * 16, S::LDQ);
        wmma::load_matrix_sync(b, Ks + j * 16 * S::LDQ + kk * 16, S::LDQ);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(Ss + j * 16, acc, S::LDS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax for row r, columns [half*32, half*32+32).
    float sv[32];
    float mx = -INFINITY;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const int t = kt0 + half * 32 + c;
      const bool ok = row_valid && t <= qpos && t < L;
      sv[c] = ok ? Ss[r * S::LDS + half * 32 + c] * p.scale_log2 : -INFINITY;
      mx = fmaxf(mx, sv[c]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float m_new = fmaxf(m_run, mx);
    const float alpha = (m_run == -INFINITY) ? 0.f : exp2f(m_run - m_new);
    float sum = 0;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      sv[c] = (m_new == -INFINITY) ? 0.f : exp2f(sv[c] - m_new);
      sum += sv[c];
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l_run = l_run * alpha + sum;
    m_run = m_new;
    __syncwarp();  // every lane has read its scores before the probabilities overwrite them
#pragma unroll
    for (int c = 0; c < 32; ++c) Ps[r * S::LDP + half * 32 + c] = __float2bfloat16(sv[c]);
    for (int c = 0; c < D / 2; ++c) Os[r * S::LDO + half * (D / 2) + c] *= alpha;
    __syncwarp();

    // O += P V.
#pragma unroll
    for (int j = 0; j < D / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, Os + j * 16, S::LDO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
        wmma::load_matrix_sync(a, Ps + kk * 16, S::LDP);
        wmma::load_matrix_sync(b, Vs + kk * 16 * S::LDQ + j * 16, S::LDQ);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(Os + j * 16, acc, S::LDO, wmma::mem_row_major);
    }
    __syncwarp();
  }

  if (row_valid) {
    const float inv = l_run > 0 ? 1.f / l_run : 0.f;
    __nv_bfloat16* o = p.out + int64_t(qs + qt0 + row_in_tile) * p.heads * D + int64_t(h) * D;
    for (int c = half * (D / 2); c < (half + 1) * (D / 2); c += 2) {
      __nv_bfloat162 v = __floats2bfloat162_rn(Os[r * S::LDO + c] * inv, Os[r * S::LDO + c + 1] * inv);
      *reinterpret_cast<__nv_bfloat162*>(o + c) = v;
    }
  }
}

template <int D>
void launch_prefill(const PrefillParams& p, int num_seqs, int max_q_len, cudaStream_t stream) {
  constexpr size_t smem = Smem<D>::total;
  CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  dim3 grid((max_q_len + kBM - 1) / kBM, p.heads, num_seqs);
  prefill_kernel<D><<<grid, kWarps * 32, smem, stream>>>(p);
  CUDA_CHECK_LAUNCH("prefill_kernel");
}

}  // namespace

void prefill_attention(const PrefillAttention& a, cudaStream_t stream) {
  if (!attention_head_dim_supported(a.head_dim))
    throw RuntimeError("prefill_attention: head_dim " + std::to_string(a.head_dim) + " not supported (64 or 128)");
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw RuntimeError("prefill_attention: heads must be a multiple of kv_heads");
  if (a.num_seqs == 0 || a.max_q_len == 0) return;
  PrefillParams p{};
  p.q = a.q;
  p.q_row_stride = a.q_row_stride;
  p.k_cache = a.k_cache;
  p.v_cache = a.v_cache;
  p.slots = a.slots;
  p.q_start = a.q_start;
  p.seq_lens = a.seq_lens;
  p.out = a.out;
  p.heads = a.heads;
  p.kv_heads = a.kv_heads;
  p.max_ctx = a.max_ctx;
  const float scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt(float(a.head_dim));
  p.scale_log2 = scale * 1.4426950408889634f;
  if (a.head_dim == 128) launch_prefill<128>(p, a.num_seqs, a.max_q_len, stream);
  else launch_prefill<64>(p, a.num_seqs, a.max_q_len, stream);
}

}  // namespace peerplan::kernels
