// W4A16 tensor-core GEMV and dequantisation (layout and design: w4a16.hpp).
//
// Fragment mapping. mma m16n8k16 with A = x (16 rows of M), B = W^T (16 k x 8 output columns),
// g = lane / 4, t = lane % 4. k is the reduction, so any bijection of logical to physical k works
// as long as A and B use the same one. Lane (g, t) loads the 16 bytes (32 codes) of W row
// n0 + g at k = c*128 + 32t .. +32 (4 words: the 4 lanes of a row read its 64-byte segment of the
// group), and x rows g, g+8 at the same 32 k. Word w of those gives two mma steps h = 0, 1:
//   B reg0 = (nibble 2h, nibble 2h+4) of word w, B reg1 = (nibble 2h+1, nibble 2h+5)
//   A reg0/1 = x rows g / g+8 at the same two k each, A reg2/3 = the same for reg1's k.
// (w >> 8h) & 0x000F000F puts nibbles 2h and 2h+4 in the two bf16 halves at once.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/mma_ptx.cuh"
#include "profiler/kernels/pdl.cuh"
#include "profiler/kernels/silu_mul.cuh"
#include "profiler/kernels/w4a16.hpp"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 4;
constexpr int kNT = 4;               // 8-column tiles per warp: 32 output columns
constexpr int kCols = 8 * kNT;
// Split-K workspace: one int counter per column group (zeroed once by its owner, re-armed by the
// kernel), then the partial sums.
constexpr int64_t kCounterFloats = 65536;  // column groups of n <= 2M columns
constexpr int kWarpsPerSmTarget = 16;  // one wave at <= 128 registers (16 warps/SM); 2 KB per warp per chunk in flight, double-buffered

using ptx::ld_stream16;

// Two bf16 (q - 8) * s from the nibbles at bits [sh, sh+4) and [sh+16, sh+20) of w.
__device__ __forceinline__ uint32_t dq2(uint32_t w, int sh, __nv_bfloat162 s2) {
  uint32_t v = ((w >> sh) & 0x000F000Fu) | 0x43004300u;  // bf16 128 + q in each half
  __nv_bfloat162 h = *reinterpret_cast<__nv_bfloat162*>(&v);
  h = __hmul2(__hsub2(h, __floats2bfloat162_rn(136.f, 136.f)), s2);  // q - 8 exact, one rounding
  return *reinterpret_cast<uint32_t*>(&h);
}

// Word of W where row r's 16 bytes at quarter t of group 0 begin (common/w4_layout.hpp); group c
// is c * a.w_chunk words on.
__device__ __forceinline__ int64_t w_unit(const W4A16Gemm& a, int64_t r, int t) {
  return (r / 8) * a.k + (r % 8) * a.w_row + 4 * t;
}

struct Chunk {
  uint4 w[kNT];
  float s[kNT];  // this lane's row's group scale, per tile
};

// (nibble at bits [sh, sh+4), nibble at [sh+16, sh+20)) of w as bf16 (128 + q): one shift and one
// lop3. The 128 + 8 offset comes off after the MMA (136 * the group's x sums, one more MMA per
// k-step shared by all tiles), and the group scale after that, in fp32: 2 instructions per 2
// weights instead of 5 (the kernel is instruction-bound otherwise: H200, 2026-12-02, 1.4 TB/s).
__device__ __forceinline__ uint32_t raw2(uint32_t w_shifted) { return (w_shifted & 0x000F000Fu) | 0x43004300u; }

// One 128-k group of one warp (the arithmetic of every variant): acc += ((x . (128 + q)) - 136 sum(x)) * scale.
template <int MT>
__device__ __forceinline__ void chunk_mma(const W4A16Gemm& a, const uint4 (&wv)[kNT], const float (&sv)[kNT],
                                          int64_t kb, int g, int t, float (&acc)[MT][kNT][4]) {
  const uint32_t b136 = 0x43084308u;
  float part[MT][kNT][4], corr[MT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    corr[mt][0] = corr[mt][1] = corr[mt][2] = corr[mt][3] = 0.f;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) part[mt][nt][0] = part[mt][nt][1] = part[mt][nt][2] = part[mt][nt][3] = 0.f;
  }
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    uint32_t xa[MT][2][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int64_t r0 = mt * 16 + g, r1 = r0 + 8;
      const uint4 v0 = r0 < a.M ? *reinterpret_cast<const uint4*>(a.x + r0 * a.k + kb + 8 * w) : make_uint4(0, 0, 0, 0);
      const uint4 v1 = r1 < a.M ? *reinterpret_cast<const uint4*>(a.x + r1 * a.k + kb + 8 * w) : make_uint4(0, 0, 0, 0);
      xa[mt][0][0] = __byte_perm(v0.x, v0.z, 0x5410u);
      xa[mt][0][1] = __byte_perm(v1.x, v1.z, 0x5410u);
      xa[mt][0][2] = __byte_perm(v0.x, v0.z, 0x7632u);
      xa[mt][0][3] = __byte_perm(v1.x, v1.z, 0x7632u);
      xa[mt][1][0] = __byte_perm(v0.y, v0.w, 0x5410u);
      xa[mt][1][1] = __byte_perm(v1.y, v1.w, 0x5410u);
      xa[mt][1][2] = __byte_perm(v0.y, v0.w, 0x7632u);
      xa[mt][1][3] = __byte_perm(v1.y, v1.w, 0x7632u);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        ptx::mma_bf16(corr[mt], xa[mt][h][0], xa[mt][h][1], xa[mt][h][2], xa[mt][h][3], b136, b136);
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const uint32_t word = reinterpret_cast<const uint32_t*>(&wv[nt])[w];
      const uint32_t w4 = word >> 4, w8 = word >> 8, w12 = word >> 12;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t b0 = raw2(h ? w8 : word), b1 = raw2(h ? w12 : w4);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          ptx::mma_bf16(part[mt][nt], xa[mt][h][0], xa[mt][h][1], xa[mt][h][2], xa[mt][h][3], b0, b1);
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    const float se = __shfl_sync(0xffffffffu, sv[nt], 8 * t), so = __shfl_sync(0xffffffffu, sv[nt], 8 * t + 4);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      acc[mt][nt][0] = fmaf(part[mt][nt][0] - corr[mt][0], se, acc[mt][nt][0]);
      acc[mt][nt][1] = fmaf(part[mt][nt][1] - corr[mt][1], so, acc[mt][nt][1]);
      acc[mt][nt][2] = fmaf(part[mt][nt][2] - corr[mt][2], se, acc[mt][nt][2]);
      acc[mt][nt][3] = fmaf(part[mt][nt][3] - corr[mt][3], so, acc[mt][nt][3]);
    }
  }
}

template <int MT>
__global__ void __launch_bounds__(kWarps * 32) w4a16_kernel(W4A16Gemm a, int splits, int chunks_per_split) {
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int64_t warp_id = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t col_groups = (a.n + kCols - 1) / kCols;
  const int64_t cg = warp_id % col_groups;
  const int split = int(warp_id / col_groups);
  if (split >= splits) return;
  const int64_t chunks = a.k / kW4Group;
  const int64_t c0 = int64_t(split) * chunks_per_split;
  const int64_t c1 = std::min<int64_t>(chunks, c0 + chunks_per_split);
  const int64_t groups_per_row = a.k / kW4Group;
  const int64_t n0 = cg * kCols;

  // Row of W this lane streams in each tile (tiles past n are skipped as a whole: n % 8 == 0).
  bool tile_ok[kNT];
  const uint32_t* wrow[kNT];
  const bf16* srow[kNT];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    const int64_t r = n0 + nt * 8 + g;
    tile_ok[nt] = n0 + nt * 8 < a.n;
    wrow[nt] = a.w + w_unit(a, tile_ok[nt] ? r : g, t);
    srow[nt] = a.scales + (tile_ok[nt] ? r : 0) * groups_per_row;
  }
  auto load = [&](int64_t c, Chunk& ch) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      if (tile_ok[nt]) {
        ch.w[nt] = ld_stream16(wrow[nt] + c * a.w_chunk);
        ch.s[nt] = __bfloat162float(srow[nt][c]);
      } else {
        ch.w[nt] = make_uint4(0x88888888u, 0x88888888u, 0x88888888u, 0x88888888u);  // codes 8: zeros
        ch.s[nt] = 0.f;
      }
    }
  };

  float acc[MT][kNT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;

  Chunk cur, nxt;
  if (c0 < c1) load(c0, cur);
  for (int64_t c = c0; c < c1; ++c) {
    if (c + 1 < c1) load(c + 1, nxt);  // the next chunk's loads fly while this one computes
    chunk_mma<MT>(a, cur.w, cur.s, c * kW4Group + 32 * t, g, t, acc);
    if (c + 1 < c1) cur = nxt;
  }

  // C fragment: rows (x rows) g, g+8 of each m-tile; columns n0 + 8nt + 2t, +1.
  float* part = a.workspace + kCounterFloats;  // [splits][M][n] partial sums past the counters
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      if (!tile_ok[nt]) continue;
      const int64_t col = n0 + nt * 8 + 2 * t;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t r = mt * 16 + g + 8 * half;
        if (r >= a.M) continue;
        const float v0 = acc[mt][nt][2 * half], v1 = acc[mt][nt][2 * half + 1];
        if (splits == 1)
          *reinterpret_cast<__nv_bfloat162*>(a.y + r * a.n + col) = __floats2bfloat162_rn(v0, v1);
        else
          *reinterpret_cast<float2*>(part + (int64_t(split) * a.M + r) * a.n + col) = make_float2(v0, v1);
      }
    }
  if (splits == 1) return;
  // Split-K: the last warp of this column group to finish sums every split's partials (no second
  // kernel: at batch 1 its launch would cost as much as a small GEMM's whole weight stream) and
  // re-arms the group's counter for the next call (graph replays included).
  __threadfence();
  int prev = 0;
  if (lane == 0) prev = atomicAdd(reinterpret_cast<int*>(a.workspace) + cg, 1);
  prev = __shfl_sync(0xffffffffu, prev, 0);
  if (prev != splits - 1) return;
  __threadfence();
  const int64_t cols = std::min<int64_t>(kCols, a.n - n0);
  for (int64_t e = lane; e < a.M * cols / 2; e += 32) {
    const int64_t r = e / (cols / 2), col = n0 + 2 * (e % (cols / 2));
    float2 sum = make_float2(0.f, 0.f);
    for (int p = 0; p < splits; ++p) {
      const float2 v = __ldcg(reinterpret_cast<const float2*>(part + (int64_t(p) * a.M + r) * a.n + col));
      sum.x += v.x;
      sum.y += v.y;
    }
    *reinterpret_cast<__nv_bfloat162*>(a.y + r * a.n + col) = __floats2bfloat162_rn(sum.x, sum.y);
  }
  if (lane == 0) reinterpret_cast<int*>(a.workspace)[cg] = 0;
}

// ---------------------------------------------------------------------------------------------
// v2 / v3 / v4 (PEERPLAN_W4A16=v2|v3|v4): a block of KW warps owns one 32-column group (the same
// 4 x 8-column tiles and fragment mapping as v1) and splits the block's k range between its warps
// chunk by chunk (warp w takes chunks w, w + KW, ...: per round the block reads KW x 64 contiguous
// bytes of each of its 32 rows). Each warp streams its chunks through a private ring of S stages in
// shared memory filled by cp.async (16 bytes of W per lane and tile, and the 4-byte word holding
// its row's group scale), so S - 1 chunks (2 KB each) are in flight per warp instead of v1's one;
// a lane reads back only what it copied itself, so no barrier is needed inside the loop. The
// warps' partial sums meet in shared memory (one __syncthreads); split-K across blocks only when
// the column groups alone leave SMs idle (n < 32 x SMs), then the last block of a column group
// sums the splits with all its threads and independent loads.

// 16-byte copy global -> shared, zero-filled when !pred; HINT adds an L2 256-byte prefetch.
template <bool HINT>
__device__ __forceinline__ void cp16(void* smem, const void* gmem, bool pred) {
  const int n = pred ? 16 : 0;
  if (HINT)
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(ptx::smem_u32(smem)), "l"(gmem),
                 "r"(n)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(ptx::smem_u32(smem)), "l"(gmem), "r"(n)
                 : "memory");
}
__device__ __forceinline__ void cp4(void* smem, const void* gmem, bool pred) {
  const int n = pred ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(ptx::smem_u32(smem)), "l"(gmem), "r"(n)
               : "memory");
}


// M <= 8 with the operands swapped (v5, v6): A = W (16 output columns: tiles 2p and 2p + 1 as
// rows g and g + 8), B = x (8 tokens). The same k permutation as chunk_mma: a0 / a2 are what B's
// b0 / b1 were, x's row-g A registers 0 / 2 become b0 / b1. Per group 4 x 2 x (2 + 1) MMAs instead
// of 4 x 2 x (4 + 1), no x rows g + 8 and no scale shuffle (a lane holds both rows' scales).
// acc[p]: c0, c1 = column 16p + g, tokens 2t, 2t + 1; c2, c3 = column 16p + 8 + g, same tokens.
__device__ __forceinline__ void chunk_mma_swap(const W4A16Gemm& a, const uint4 (&wv)[kNT], const float (&sv)[kNT],
                                               int64_t kb, int g, float (&acc)[kNT / 2][4]) {
  const uint32_t b136 = 0x43084308u;
  float part[kNT / 2][4], corr[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int p = 0; p < kNT / 2; ++p) part[p][0] = part[p][1] = part[p][2] = part[p][3] = 0.f;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const uint4 v0 = g < a.M ? *reinterpret_cast<const uint4*>(a.x + g * a.k + kb + 8 * w) : make_uint4(0, 0, 0, 0);
    uint32_t xb[2][2];
    xb[0][0] = __byte_perm(v0.x, v0.z, 0x5410u);
    xb[0][1] = __byte_perm(v0.x, v0.z, 0x7632u);
    xb[1][0] = __byte_perm(v0.y, v0.w, 0x5410u);
    xb[1][1] = __byte_perm(v0.y, v0.w, 0x7632u);
#pragma unroll
    for (int h = 0; h < 2; ++h) ptx::mma_bf16(corr, b136, b136, b136, b136, xb[h][0], xb[h][1]);
#pragma unroll
    for (int p = 0; p < kNT / 2; ++p) {
      const uint32_t u = reinterpret_cast<const uint32_t*>(&wv[2 * p])[w];
      const uint32_t v = reinterpret_cast<const uint32_t*>(&wv[2 * p + 1])[w];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t a0 = raw2(h ? u >> 8 : u), a2 = raw2(h ? u >> 12 : u >> 4);
        const uint32_t a1 = raw2(h ? v >> 8 : v), a3 = raw2(h ? v >> 12 : v >> 4);
        ptx::mma_bf16(part[p], a0, a1, a2, a3, xb[h][0], xb[h][1]);
      }
    }
  }
#pragma unroll
  for (int p = 0; p < kNT / 2; ++p) {
    acc[p][0] = fmaf(part[p][0] - corr[0], sv[2 * p], acc[p][0]);
    acc[p][1] = fmaf(part[p][1] - corr[1], sv[2 * p], acc[p][1]);
    acc[p][2] = fmaf(part[p][2] - corr[2], sv[2 * p + 1], acc[p][2]);
    acc[p][3] = fmaf(part[p][3] - corr[3], sv[2 * p + 1], acc[p][3]);
  }
}

template <int KW, int S>
constexpr size_t v2_ring_bytes() {
  return size_t(KW) * S * kNT * 32 * (16 + 4);
}
template <int MT, int KW, int S>
constexpr size_t v2_smem_bytes() {
  return std::max(v2_ring_bytes<KW, S>(), size_t(KW) * MT * 16 * kCols * 4);
}

// SWAP (MT == 1, M <= 8 only): chunk_mma_swap.
template <int MT, int KW, int S, bool HINT, bool SWAP = false>
__global__ void __launch_bounds__(KW * 32) w4a16_v2_kernel(W4A16Gemm a, int splits, int chunks_per_split) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int is_last;
  const int lane = threadIdx.x & 31, wk = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int64_t col_groups = (a.n + kCols - 1) / kCols;
  const int64_t cg = blockIdx.x % col_groups;
  const int split = int(blockIdx.x / col_groups);
  const int64_t chunks = a.k / kW4Group;
  const int64_t cb = int64_t(split) * chunks_per_split;
  const int64_t ce = std::min<int64_t>(chunks, cb + chunks_per_split);
  const int nj = ce > cb + wk ? int((ce - cb - wk + KW - 1) / KW) : 0;  // this warp's chunks cb + wk + j * KW
  const int64_t groups_per_row = a.k / kW4Group;
  const int64_t n0 = cg * kCols;

  uint4* ringw = reinterpret_cast<uint4*>(smem) + size_t(wk) * S * kNT * 32;
  uint32_t* rings = reinterpret_cast<uint32_t*>(smem + size_t(KW) * S * kNT * 32 * 16) + size_t(wk) * S * kNT * 32;
  bool tile_ok[kNT];
  const uint32_t* wrow[kNT];
  int64_t sidx[kNT];  // index of this lane's row's first scale
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    const int64_t r = n0 + nt * 8 + g;
    tile_ok[nt] = n0 + nt * 8 < a.n;
    wrow[nt] = a.w + w_unit(a, tile_ok[nt] ? r : g, t);
    sidx[nt] = (tile_ok[nt] ? r : 0) * groups_per_row;
  }
  auto issue = [&](int j) {
    const int64_t c = cb + wk + int64_t(j) * KW;
    const int st = j % S;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      cp16<HINT>(ringw + (st * kNT + nt) * 32 + lane, wrow[nt] + c * a.w_chunk, tile_ok[nt]);
      // The aligned 4-byte word holding the scale (n * groups_per_row is even: n % 8 == 0).
      cp4(rings + (st * kNT + nt) * 32 + lane, a.scales + ((sidx[nt] + c) & ~int64_t(1)), tile_ok[nt]);
    }
  };

  float acc[MT][kNT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;
  float acc2[kNT / 2][4];  // SWAP
#pragma unroll
  for (int p = 0; p < kNT / 2; ++p) acc2[p][0] = acc2[p][1] = acc2[p][2] = acc2[p][3] = 0.f;

#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < nj) issue(s);
    ptx::cp_async_commit();
  }
  for (int j = 0; j < nj; ++j) {
    ptx::cp_async_wait<S - 2>();  // chunk j has landed (this lane's copies)
    __syncwarp();                 // every lane is past its reads of the stage refilled next
    if (j + S - 1 < nj) issue(j + S - 1);
    ptx::cp_async_commit();
    const int st = j % S;
    const int64_t c = cb + wk + int64_t(j) * KW;
    uint4 wv[kNT];
    float sv[kNT];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      wv[nt] = ringw[(st * kNT + nt) * 32 + lane];
      const uint32_t sw = rings[(st * kNT + nt) * 32 + lane];
      sv[nt] = __uint_as_float(((sidx[nt] + c) & 1) ? (sw & 0xffff0000u) : (sw << 16));
    }
    if constexpr (SWAP) chunk_mma_swap(a, wv, sv, c * kW4Group + 32 * t, g, acc2);
    else chunk_mma<MT>(a, wv, sv, c * kW4Group + 32 * t, g, t, acc);
  }
  ptx::cp_async_wait<0>();
  __syncthreads();  // the ring is free: it holds the block reduction now

  float* red = reinterpret_cast<float*>(smem);  // [KW][MT * 16][kCols]
  if constexpr (SWAP) {
#pragma unroll
    for (int p = 0; p < kNT / 2; ++p)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int token = 2 * t + (i & 1), col = 16 * p + 8 * (i >> 1) + g;
        red[(wk * MT * 16 + token) * kCols + col] = acc2[p][i];
      }
  } else {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int row = mt * 16 + g + 8 * half, col = nt * 8 + 2 * t;
          red[(wk * MT * 16 + row) * kCols + col] = acc[mt][nt][2 * half];
          red[(wk * MT * 16 + row) * kCols + col + 1] = acc[mt][nt][2 * half + 1];
        }
  }
  __syncthreads();
  const int cols = int(std::min<int64_t>(kCols, a.n - n0));
  const int elems = int(a.M) * kCols;
  float* part = a.workspace + kCounterFloats;  // [splits][M][n]
  for (int e = threadIdx.x; e < elems; e += KW * 32) {
    const int row = e / kCols, col = e % kCols;
    if (col >= cols) continue;
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < KW; ++w) s += red[(w * MT * 16 + row) * kCols + col];
    if (splits == 1) a.y[row * a.n + n0 + col] = __float2bfloat16(s);
    else part[(int64_t(split) * a.M + row) * a.n + n0 + col] = s;
  }
  if (splits == 1) return;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(reinterpret_cast<int*>(a.workspace) + cg, 1) == splits - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  for (int e = threadIdx.x; e < elems; e += KW * 32) {
    const int row = e / kCols, col = e % kCols;
    if (col >= cols) continue;
    const float* p = part + int64_t(row) * a.n + n0 + col;
    const int64_t stride = a.M * a.n;
    float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
    int p4 = 0;
    for (; p4 + 4 <= splits; p4 += 4) {  // four independent L2 loads in flight
      s0 += __ldcg(p + (p4 + 0) * stride);
      s1 += __ldcg(p + (p4 + 1) * stride);
      s2 += __ldcg(p + (p4 + 2) * stride);
      s3 += __ldcg(p + (p4 + 3) * stride);
    }
    for (; p4 < splits; ++p4) s0 += __ldcg(p + p4 * stride);
    a.y[row * a.n + n0 + col] = __float2bfloat16((s0 + s1) + (s2 + s3));
  }
  if (threadIdx.x == 0) reinterpret_cast<int*>(a.workspace)[cg] = 0;
}


// ---- v7: x quantized to int8 per 128-k group, dp4a on the nibbles (M <= kW4Dp4aMaxM) ----
// v1..v6 multiply on mma.sync with x padded to 8 or 16 rows, so at decode sizes they spend more on
// arithmetic and dequantisation than the loads take (v5: 2.97x the packed-bytes floor on 8B's four
// GEMMs at M = 1). llama.cpp's mmvq instead quantizes x to int8 and multiplies the codes with dp4a:
// per word of 8 codes, 2 masks, 1 shift and 2 dp4a per token. bench/quant/w4layout (H200,
// 2026-12-04, session 11): 43.5 us on the tiled layout against v5's 73.7 (floor 24.8).
// Warp: kDpTiles tiles of 8 rows (lane (g, t): row g of each tile, k quarter t of each 128-k group,
// v1's mapping), its share of k two groups per load batch with the next batch's loads in flight.
// Each block first quantizes the x groups its warps need into shared memory, laid out per 8 k as
// [x0 x2 x4 x6][x1 x3 x5 x7] (a word's low / high nibbles), with each group's scale and the sum of
// each 32-k quarter's codes (the zero point 8 comes off as 8 * that sum). Split-K partials meet by
// fp32 atomics in the workspace; the last warp of a column group writes y and re-zeroes them.
constexpr int kDpWarps = 8, kDpBatch = 2;
// Tiles of 8 rows per warp: 4 at M = 1, 2 at M = 2 (4 would spill there; ptxas sm_90: 120 / 104
// registers, no spill). At M = 4 v7 measured slower than v5 (qb, H200, session 11 B: 8B's four
// GEMMs 84.2 vs 76.1 us; M = 1 54.6 vs 74.9, M = 2 66.5 vs 75.2), so kW4Dp4aMaxM = 2.
constexpr int dp4a_tiles(int64_t M) { return M == 1 ? 4 : 2; }

__device__ __forceinline__ int dp_word(uint32_t q, uint32_t xe, uint32_t xo, int s) {
  s = __dp4a(int(q & 0x0F0F0F0Fu), int(xe), s);
  return __dp4a(int((q >> 4) & 0x0F0F0F0Fu), int(xo), s);
}

// ACT (a.act): W is a gated MLP's gate_up ([gate; up], n = 2 x inter, n % 32 == 0): a column group's first
// kDpTiles / 2 tiles are gate rows and the rest the same rows of up (n / 2 on), and y [M][n / 2] receives
// SiLU(gate) * up. The groups, splits and workspace are those of the plain call (n / 2 is a multiple of
// the group's kDpRows / 2 gate rows), partials keep their rows of n.
template <int MT, int kDpTiles, bool ACT = false>
__global__ void __launch_bounds__(kDpWarps * 32, 2) w4a16_dp4a_kernel(W4A16Gemm a, int splits, int per, int span) {
  constexpr int kDpRows = 8 * kDpTiles, kHalfTiles = kDpTiles / 2;
  extern __shared__ __align__(16) unsigned char dsm[];
  const int64_t K = a.k, chunks = K / kW4Group;
  // x of the groups [q0, q0 + span) this block's warps read (span: dp4a_span, host side).
  const int64_t SK = int64_t(span) * kW4Group;
  int8_t* xq = reinterpret_cast<int8_t*>(dsm);                // [MT][SK]
  float* sx = reinterpret_cast<float*>(dsm + MT * SK);         // [MT][span]
  int* xs32 = reinterpret_cast<int*>(sx + MT * span);          // [MT][span * 4]
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, warp = threadIdx.x >> 5;
  const int64_t groups = (a.n + kDpRows - 1) / kDpRows;
  const int64_t gw = int64_t(blockIdx.x) * kDpWarps + warp, cg = gw % groups, sp = gw / groups;
  const int64_t c0 = sp * per, c1 = std::min<int64_t>(chunks, c0 + per);
  const bool ok = sp < splits && c0 < c1;
  // Row of tile r: row0 + 8r, or for a tile past n the last tile's (loaded, never stored; n % 8 == 0,
  // so row0 < n). One base pointer and per-tile offsets rather than 8 pointers: v7 must fit 128
  // registers (2 blocks, 16 warps per SM). A tile is k words on in either layout (common/w4_layout.hpp).
  const int64_t half = a.n / 2;
  const int64_t row0 = (ACT ? cg * (kDpRows / 2) : cg * kDpRows) + g;
  // ACT: the gate tiles' last valid one (the up tiles mirror it); the up tiles sit up_rows rows further.
  const int last_tile = int(std::min<int64_t>(((ACT ? half : a.n) - 1 - row0) / 8, (ACT ? kHalfTiles : kDpTiles) - 1));
  const uint32_t up_rows = ACT ? uint32_t(half - 8 * kHalfTiles) : 0u;
  const uint32_t* wbase = a.w + w_unit(a, row0, t);
  const uint32_t k32 = uint32_t(K), ch32 = uint32_t(chunks), cs32 = uint32_t(a.w_chunk);
  const bf16* sbase = a.scales + row0 * chunks;
  uint4 wa[kDpBatch][kDpTiles];
  bf16 sa[kDpBatch][kDpTiles];  // converted where used: a conversion here would wait for the load
  auto load = [&](uint4 (&wv)[kDpBatch][kDpTiles], bf16 (&sv)[kDpBatch][kDpTiles], int64_t c) {
#pragma unroll
    for (int u = 0; u < kDpBatch; ++u)
#pragma unroll
      for (int r = 0; r < kDpTiles; ++r) {
        // 32-bit offsets (a matrix's words and scales < 2^32: w4a16_gemm checks), fewer registers.
        const uint32_t cc = uint32_t(std::min<int64_t>(c + u, c1 - 1));
        // Rows past row0 of tile r, a multiple of 8 (a tile is k words on in either layout).
        uint32_t tr8;
        if constexpr (ACT) tr8 = r < kHalfTiles ? 8u * uint32_t(std::min(r, last_tile))
                                                : up_rows + 8u * uint32_t(kHalfTiles + std::min(r - kHalfTiles, last_tile));
        else tr8 = 8u * uint32_t(std::min(r, last_tile));
        wv[u][r] = ld_stream16(wbase + ((tr8 / 8) * k32 + cc * cs32));
        sv[u][r] = sbase[tr8 * ch32 + cc];
      }
  };
  if (ok) load(wa, sa, c0);  // in flight while x is quantized (and, launched with PDL, while the kernel before ends)
  pdl::wait();               // x, y and the workspace belong to the stream's earlier kernels until here
  pdl::launch_dependents();
  const int64_t gw0 = int64_t(blockIdx.x) * kDpWarps;
  const int64_t q0 = std::min<int64_t>(chunks, (gw0 / groups) * per);
  {
    const int64_t q1 = std::min<int64_t>(chunks, ((gw0 + kDpWarps - 1) / groups + 1) * per);
    for (int64_t job = warp; job < (q1 - q0) * MT; job += kDpWarps) {
      const int m = int(job % MT);
      const int64_t grp = q0 + job / MT, lg = grp - q0;
      const int kk = lane * 4;
      float v[4] = {0.f, 0.f, 0.f, 0.f};
      if (m < a.M) {
        const uint2 raw = *reinterpret_cast<const uint2*>(a.x + m * K + grp * kW4Group + kk);
        const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
        const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
        v[0] = lo.x, v[1] = lo.y, v[2] = hi.x, v[3] = hi.y;
      }
      float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
#pragma unroll
      for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
      const float sc = amax > 0.f ? amax / 127.f : 1.f, inv = 1.f / sc;  // the self-test's reference does the same
      int sum = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int q = __float2int_rn(v[i] * inv), o = (kk + i) % 8;
        xq[m * SK + lg * kW4Group + ((kk + i) / 8) * 8 + (o % 2) * 4 + o / 2] = int8_t(q);
        sum += q;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      if (lane % 8 == 0) xs32[(m * span + lg) * 4 + lane / 8] = sum;
      if (lane == 0) sx[m * span + lg] = sc;
    }
  }
  __syncthreads();
  if (!ok) return;
  float acc[kDpTiles][MT] = {};
  for (int64_t c = c0; c < c1; c += kDpBatch) {
    uint4 wb[kDpBatch][kDpTiles];
    bf16 sb[kDpBatch][kDpTiles];
    const bool more = c + kDpBatch < c1;
    if (more) load(wb, sb, c + kDpBatch);
#pragma unroll
    for (int u = 0; u < kDpBatch; ++u) {
      const int64_t cc = c + u, lc = cc - q0;
      if (cc >= c1) continue;
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const int8_t* xp = xq + m * SK + lc * kW4Group + 32 * t;
        const uint4 xa = *reinterpret_cast<const uint4*>(xp), xb = *reinterpret_cast<const uint4*>(xp + 16);
        const float sxc = sx[m * span + lc];
        const int zero = 8 * xs32[(m * span + lc) * 4 + t];
#pragma unroll
        for (int r = 0; r < kDpTiles; ++r) {
          const uint4 q = wa[u][r];
          int s = dp_word(q.x, xa.x, xa.y, 0);
          s = dp_word(q.y, xa.z, xa.w, s);
          s = dp_word(q.z, xb.x, xb.y, s);
          s = dp_word(q.w, xb.z, xb.w, s);
          acc[r][m] = fmaf(float(s - zero), __bfloat162float(sa[u][r]) * sxc, acc[r][m]);
        }
      }
    }
    if (more) {
#pragma unroll
      for (int u = 0; u < kDpBatch; ++u)
#pragma unroll
        for (int r = 0; r < kDpTiles; ++r) wa[u][r] = wb[u][r], sa[u][r] = sb[u][r];
    }
  }
#pragma unroll
  for (int r = 0; r < kDpTiles; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], 1);
      acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], 2);
    }
  // Lane (g, 0) holds row g of each tile (lanes t = 1..3 the same sums): y directly, or with split-K
  // its share of the partial sums [M][n] past the counters (zero between calls).
  float* part = a.workspace + kCounterFloats;
  if (t == 0) {
    if constexpr (ACT) {
#pragma unroll
      for (int r = 0; r < kHalfTiles; ++r) {
        const int64_t j = row0 + r * 8;  // gate row; its up row half + j
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          if (j >= half || m >= a.M) continue;
          if (splits == 1) {
            a.y[m * half + j] = silu_mul_rounded(acc[r][m], acc[r + kHalfTiles][m]);
          } else {
            atomicAdd(part + m * a.n + j, acc[r][m]);
            atomicAdd(part + m * a.n + half + j, acc[r + kHalfTiles][m]);
          }
        }
      }
    } else {
#pragma unroll
      for (int r = 0; r < kDpTiles; ++r) {
        const int64_t row = cg * kDpRows + r * 8 + g;
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          if (row >= a.n || m >= a.M) continue;
          if (splits == 1) a.y[m * a.n + row] = __float2bfloat16(acc[r][m]);
          else atomicAdd(part + m * a.n + row, acc[r][m]);
        }
      }
    }
  }
  if (splits == 1) return;
  __threadfence();
  __syncwarp();
  int last = 0;
  if (lane == 0) last = atomicAdd(reinterpret_cast<int*>(a.workspace) + cg, 1) == splits - 1;
  last = __shfl_sync(0xffffffffu, last, 0);
  if (!last) return;
  __threadfence();
  if constexpr (ACT) {
    for (int e = lane; e < kDpRows / 2 * MT; e += 32) {
      const int m = e / (kDpRows / 2);
      const int64_t j = cg * (kDpRows / 2) + e % (kDpRows / 2);
      if (j >= half || m >= a.M) continue;
      float* pg = part + m * a.n + j;
      float* pu = pg + half;
      a.y[m * half + j] = silu_mul_rounded(__ldcg(pg), __ldcg(pu));
      *pg = 0.f;
      *pu = 0.f;
    }
  } else {
    for (int e = lane; e < kDpRows * MT; e += 32) {
      const int m = e / kDpRows;
      const int64_t row = cg * kDpRows + e % kDpRows;
      if (row >= a.n || m >= a.M) continue;
      float* p = part + m * a.n + row;
      a.y[m * a.n + row] = __float2bfloat16(__ldcg(p));
      *p = 0.f;
    }
  }
  if (lane == 0) reinterpret_cast<int*>(a.workspace)[cg] = 0;
}

// Groups of x one block quantizes: its 8 warps' splits (consecutive warps take consecutive column
// groups of one split, so a block spans at most ceil(8 / groups) + 1 splits).
int dp4a_span(int64_t M, int64_t n, int64_t k, int per) {
  const int64_t rows = 8 * dp4a_tiles(M), groups = (n + rows - 1) / rows, chunks = k / kW4Group;
  return int(std::min<int64_t>(chunks, ((kDpWarps + groups - 1) / groups + 1) * per));
}
size_t dp4a_smem_bytes(int mt, int span) { return size_t(mt) * size_t(span) * (kW4Group + 4 + 16); }

__global__ void w4a16_dequant_kernel(const uint32_t* w, const bf16* scales, bf16* out, int64_t row0, int64_t rows,
                                     int64_t k, W4Layout layout) {
  const int64_t words = rows * (k / 8);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < words; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / (k / 8), j = i % (k / 8);
    const uint32_t word = w[w4_word_index(layout, row0 + r, j, k)];
    const bf16 s = scales[(row0 + r) * (k / kW4Group) + j * 8 / kW4Group];
    const __nv_bfloat162 s2 = __halves2bfloat162(s, s);
    // Nibbles (0,4), (1,5), (2,6), (3,7) -> natural order 0..7.
    const uint32_t p04 = dq2(word, 0, s2), p15 = dq2(word, 4, s2), p26 = dq2(word, 8, s2), p37 = dq2(word, 12, s2);
    uint4 o;
    o.x = __byte_perm(p04, p15, 0x5410u);  // k0, k1
    o.y = __byte_perm(p26, p37, 0x5410u);  // k2, k3
    o.z = __byte_perm(p04, p15, 0x7632u);  // k4, k5
    o.w = __byte_perm(p26, p37, 0x7632u);  // k6, k7
    reinterpret_cast<uint4*>(out)[i] = o;
  }
}

void check_shape(int64_t n, int64_t k, const char* what) {
  if (k % kW4Group != 0 || n % 8 != 0 || k <= 0 || n <= 0)
    throw RuntimeError(std::string(what) + ": k = " + std::to_string(k) + " must be a positive multiple of " +
                       std::to_string(kW4Group) + " (the scale group) and n = " + std::to_string(n) +
                       " a positive multiple of 8");
}

}  // namespace

namespace {

struct V2Cfg {
  int kw, stages;
};
// Variant 2..6's block shape: v2 4 warps x 8 stages; v3 8 warps x 4 stages; v4 = v2 with an L2
// 256-byte prefetch hint on every copy; v5 = v3 and v6 = v2 with the swapped MMA at M <= 8.
V2Cfg v2_cfg(int variant) {
  switch (variant) {
    case 3:
    case 5: return {8, 4};
    default: return {4, 8};
  }
}

// Unset: v7 (x in int8, dp4a) at M <= 2 and v5 above. v5 was the fastest mma.sync variant on H200 (2026-12-04, qb over rotating weights in a CUDA graph, Llama-3.1-8B's
// four GEMMs: M = 1 74.8 us vs v1 81.0, M = 8 79.1 vs 90.6, M = 32 148.0 vs 191.8, M = 64 232.8 vs 326.9;
// docs/validation/runs/2026-12-04-session8/C).
int parse_variant(const char* e) {
  if (!e || !*e) return 7;
  std::string v = e;
  if (!v.empty() && (v[0] == 'v' || v[0] == 'V')) v = v.substr(1);
  const int i = std::atoi(v.c_str());
  if (i < 1 || i > kW4Variants)
    throw RuntimeError("PEERPLAN_W4A16=" + std::string(e) + ": expected v1 .. v" + std::to_string(kW4Variants));
  return i;
}
int& variant_ref() {
  static int v = parse_variant(std::getenv("PEERPLAN_W4A16"));
  return v;
}

// Unset: tiled (measured against GPTQ's order with the same kernels: docs/quantization.md).
W4Layout parse_layout(const char* e) {
  const std::string v = e ? e : "";
  if (v.empty() || v == "tiled") return W4Layout::Tiled;
  if (v == "gptq") return W4Layout::Gptq;
  throw RuntimeError("PEERPLAN_W4_LAYOUT=" + v + ": expected tiled or gptq (the packed int4 weights' word order)");
}
W4Layout& layout_ref() {
  static W4Layout l = parse_layout(std::getenv("PEERPLAN_W4_LAYOUT"));
  return l;
}

int v1_splits(int64_t n, int64_t k, int sm_count) {
  const int64_t col_groups = (n + kCols - 1) / kCols;
  const int64_t chunks = k / kW4Group;
  const int64_t target = int64_t(std::max(sm_count, 1)) * kWarpsPerSmTarget;
  int64_t s = std::max<int64_t>(1, target / std::max<int64_t>(col_groups, 1));
  s = std::min<int64_t>(s, std::max<int64_t>(1, chunks / 2));  // >= 2 chunks per split: the prefetch overlaps
  // Equal chunk counts per split (no empty split).
  const int64_t per = (chunks + s - 1) / s;
  return int((chunks + per - 1) / per);
}

// Split-K across blocks only while the column groups (one block each) leave SMs idle, and never
// below 2 chunks per warp.
int v2_splits(int64_t n, int64_t k, int sm_count, int kw) {
  const int64_t col_groups = (n + kCols - 1) / kCols;
  const int64_t chunks = k / kW4Group;
  int64_t s = std::max<int64_t>(1, int64_t(std::max(sm_count, 1)) / col_groups);
  s = std::min<int64_t>(s, std::max<int64_t>(1, chunks / (2 * kw)));
  const int64_t per = (chunks + s - 1) / s;
  return int((chunks + per - 1) / per);
}

template <int MT, int KW, int S, bool HINT, bool SWAP = false>
void launch_v2(const W4A16Gemm& a, int splits, int per, cudaStream_t stream) {
  constexpr size_t smem = v2_smem_bytes<MT, KW, S>();
  static_assert(!SWAP || MT == 1);
  static bool attr_set[64] = {};  // per device (the attribute is set in the current device's context)
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64 || !attr_set[dev]) {
    CUDA_CHECK(cudaFuncSetAttribute(w4a16_v2_kernel<MT, KW, S, HINT, SWAP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(smem)));
    if (dev >= 0 && dev < 64) attr_set[dev] = true;
  }
  const unsigned blocks = unsigned((a.n + kCols - 1) / kCols * splits);
  w4a16_v2_kernel<MT, KW, S, HINT, SWAP><<<blocks, KW * 32, smem, stream>>>(a, splits, per);
}

template <int MT>
void launch_v2_variant(int variant, const W4A16Gemm& a, int splits, int per, cudaStream_t stream) {
  switch (variant) {
    case 3: return launch_v2<MT, 8, 4, false>(a, splits, per, stream);
    case 4: return launch_v2<MT, 4, 8, true>(a, splits, per, stream);
    case 5:
      if constexpr (MT == 1)
        if (a.M <= 8) return launch_v2<1, 8, 4, false, true>(a, splits, per, stream);
      return launch_v2<MT, 8, 4, false>(a, splits, per, stream);
    case 6:
      if constexpr (MT == 1)
        if (a.M <= 8) return launch_v2<1, 4, 8, false, true>(a, splits, per, stream);
      return launch_v2<MT, 4, 8, false>(a, splits, per, stream);
    default: return launch_v2<MT, 4, 8, false>(a, splits, per, stream);
  }
}

// v7's split-K: 16 warps per SM as v1 (each warp streams independently), >= 2 groups per warp.
int dp4a_splits(int64_t M, int64_t n, int64_t k, int sm_count) {
  const int64_t rows = 8 * dp4a_tiles(M), groups = (n + rows - 1) / rows, chunks = k / kW4Group;
  const int64_t target = int64_t(std::max(sm_count, 1)) * kWarpsPerSmTarget;
  int64_t s = std::clamp<int64_t>((target + groups - 1) / groups, 1, std::max<int64_t>(1, chunks / 2));
  const int64_t per = (chunks + s - 1) / s;
  return int((chunks + per - 1) / per);
}

template <int MT, bool ACT>
void launch_dp4a(const W4A16Gemm& a, int splits, int per, int span, unsigned blocks, cudaStream_t stream) {
  constexpr int kTiles = dp4a_tiles(MT);
  const size_t smem = dp4a_smem_bytes(MT, span);
  static size_t attr_bytes[64] = {};  // per device and instantiation: the largest dynamic shared memory allowed so far
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (smem > 48 * 1024 && (dev < 0 || dev >= 64 || attr_bytes[dev] < smem)) {
    CUDA_CHECK(cudaFuncSetAttribute(w4a16_dp4a_kernel<MT, kTiles, ACT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(smem)));
    if (dev >= 0 && dev < 64) attr_bytes[dev] = smem;
  }
  pdl::launch(w4a16_dp4a_kernel<MT, kTiles, ACT>, dim3(blocks), dim3(kDpWarps * 32), smem, stream, a, splits, per, span);
}

}  // namespace

W4Layout w4a16_layout() { return layout_ref(); }
void w4a16_set_layout(W4Layout l) { layout_ref() = l; }
const char* w4a16_layout_name(W4Layout l) { return l == W4Layout::Gptq ? "gptq" : "tiled"; }

int w4a16_variant() { return variant_ref(); }
void w4a16_set_variant(int v) {
  if (v < 1 || v > kW4Variants) throw RuntimeError("w4a16_set_variant: " + std::to_string(v) + " is not a variant");
  variant_ref() = v;
}
const char* w4a16_variant_name(int v) {
  switch (v) {
    case 1: return "v1 (warp per 32 columns, split-K to 16 warps/SM, double buffer in registers)";
    case 2: return "v2 (block of 4 warps per 32 columns, 8-stage cp.async ring per warp, smem reduction)";
    case 3: return "v3 (block of 8 warps per 32 columns, 4-stage cp.async ring per warp, smem reduction)";
    case 4: return "v4 (v2 + L2::256B prefetch hint)";
    case 5: return "v5 (v3 with W as the MMA's A operand, x as B, at M <= 8: 3 MMAs per 4 tiles instead of 5)";
    case 6: return "v6 (v2 with W as the MMA's A operand, x as B, at M <= 8)";
    case 7: return "v7 (x quantized to int8 per 128-k group, dp4a on the codes, at M <= 2; v5 above)";
  }
  return "?";
}

bool w4a16_quantizes_x(int64_t M) { return w4a16_variant() == 7 && M <= kW4Dp4aMaxM; }
bool w4a16_fuses_act(int64_t M, int64_t n) { return M >= 1 && w4a16_quantizes_x(M) && n > 0 && n % 32 == 0; }

int w4a16_splits(int64_t M, int64_t n, int64_t k, int sm_count) {
  int v = w4a16_variant();
  if (w4a16_quantizes_x(M)) return dp4a_splits(M, n, k, sm_count);
  if (v == 7) v = 5;  // v7 runs v5 above kW4Dp4aMaxM
  return v == 1 ? v1_splits(n, k, sm_count) : v2_splits(n, k, sm_count, v2_cfg(v).kw);
}

size_t w4a16_workspace_bytes(int64_t M, int64_t n, int64_t k, int sm_count) {
  const int s = w4a16_splits(M, n, k, sm_count);
  if (s <= 1) return 0;
  // v7's partials are summed in place by atomics ([M][n]); the others keep one slice per split.
  const size_t slices = w4a16_quantizes_x(M) ? 1 : size_t(s);
  return (size_t(kCounterFloats) + slices * size_t(M) * size_t(n)) * sizeof(float);
}

void w4a16_gemm(const W4A16Gemm& args, int sm_count, cudaStream_t stream) {
  W4A16Gemm a = args;
  a.w_row = w4_row_stride(w4a16_layout(), a.k);
  a.w_chunk = w4_chunk_stride(w4a16_layout());
  check_shape(a.n, a.k, "w4a16_gemm");
  if (a.M > kW4GemvMaxM)
    throw RuntimeError("w4a16_gemm: M = " + std::to_string(a.M) + " > " + std::to_string(kW4GemvMaxM) +
                       " (larger M runs dequantise + cuBLASLt: profiler/gpu/gemm_quant.hpp)");
  if (a.act && !w4a16_fuses_act(a.M, a.n))
    throw RuntimeError("w4a16_gemm: the activation in the epilogue (act) runs on v7 at M <= " +
                       std::to_string(kW4Dp4aMaxM) + " with n a multiple of 32; found M = " + std::to_string(a.M) +
                       ", n = " + std::to_string(a.n) + ", variant " + std::to_string(w4a16_variant()));
  if (a.M <= 0) return;
  const int splits = w4a16_splits(a.M, a.n, a.k, sm_count);
  if (splits > 1 && !a.workspace)
    throw RuntimeError("w4a16_gemm: split-K needs the workspace (w4a16_workspace_bytes, zeroed once)");
  if ((a.n + kCols - 1) / kCols > kCounterFloats) throw RuntimeError("w4a16_gemm: n too large for the split-K counters");
  const int64_t chunks = a.k / kW4Group;
  const int per = int((chunks + splits - 1) / splits);
  int v = w4a16_variant();
  if (w4a16_quantizes_x(a.M)) {
    if (a.n * (a.k / 8) >= (int64_t(1) << 32))
      throw RuntimeError("w4a16_gemm: v7 addresses a weight of < 2^32 words; n = " + std::to_string(a.n) +
                         ", k = " + std::to_string(a.k) + " (PEERPLAN_W4A16=v5 runs it)");
    const int span = dp4a_span(a.M, a.n, a.k, per);
    const int64_t rows = 8 * dp4a_tiles(a.M), warps = (a.n + rows - 1) / rows * splits;
    const unsigned blocks = unsigned((warps + kDpWarps - 1) / kDpWarps);
    if (a.act) {
      if (a.M == 1) launch_dp4a<1, true>(a, splits, per, span, blocks, stream);
      else launch_dp4a<2, true>(a, splits, per, span, blocks, stream);
    } else if (a.M == 1) {
      launch_dp4a<1, false>(a, splits, per, span, blocks, stream);
    } else {
      launch_dp4a<2, false>(a, splits, per, span, blocks, stream);  // M = 2 (kW4Dp4aMaxM)
    }
    CUDA_CHECK_LAUNCH("w4a16_dp4a_kernel");
    return;
  }
  if (v == 7) v = 5;
  if (v != 1) {
    if (a.M <= 16) launch_v2_variant<1>(v, a, splits, per, stream);
    else if (a.M <= 32) launch_v2_variant<2>(v, a, splits, per, stream);
    else launch_v2_variant<4>(v, a, splits, per, stream);
    CUDA_CHECK_LAUNCH("w4a16_v2_kernel");
    return;
  }
  const int64_t warps = (a.n + kCols - 1) / kCols * splits;
  const unsigned blocks = unsigned((warps + kWarps - 1) / kWarps);
  if (a.M <= 16) w4a16_kernel<1><<<blocks, kWarps * 32, 0, stream>>>(a, splits, per);
  else if (a.M <= 32) w4a16_kernel<2><<<blocks, kWarps * 32, 0, stream>>>(a, splits, per);
  else w4a16_kernel<4><<<blocks, kWarps * 32, 0, stream>>>(a, splits, per);
  CUDA_CHECK_LAUNCH("w4a16_kernel");
}

void w4a16_dequant(const uint32_t* w, const bf16* scales, bf16* out, int64_t row0, int64_t rows, int64_t k,
                   cudaStream_t stream) {
  check_shape(8, k, "w4a16_dequant");
  if (rows <= 0) return;
  const int64_t words = rows * (k / 8);
  const int grid = int(std::min<int64_t>((words + 255) / 256, 132 * 16));
  w4a16_dequant_kernel<<<grid, 256, 0, stream>>>(w, scales, out, row0, rows, k, w4a16_layout());
  CUDA_CHECK_LAUNCH("w4a16_dequant");
}

}  // namespace peerplan::kernels
