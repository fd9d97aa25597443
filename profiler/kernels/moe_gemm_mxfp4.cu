// Grouped expert GEMMs over MXFP4 expert weights (gpt-oss; moe_gemm.hpp, MoeGemmArgs::w_mxfp4): e2m1 codes
// with one e8m0 scale per expert row and 32 k, in the packed order of profiler/common/mxfp4_expert_layout.hpp.
// W4A16 as engines run these experts on Hopper (Marlin's MXFP4 MoE, triton's matmul_ogs: the codes upcast to
// bf16 in registers, bf16 tensor cores), in the int4 experts' two kernels (moe_gemm_int4.cu) with 64-k chunks:
//   stream: decode-sized groups (<= 32 rows an expert; 16-row tiles). A warp streams 16 weight rows, one 64-k
//           chunk (512 bytes, contiguous) per load, 8 chunks in flight.
//   tiled:  prefill-sized groups, each thread's 16 codes decoded and scaled to bf16 on their way into shared
//           memory (one 32-k stage is one scale block).
// A code pair becomes bf16 by byte permutes from two 8-entry tables (mxfp4_pair), then takes its block's
// scale by one bf16x2 multiply, exact (a power of two). The scale varies between the lanes that feed one MMA
// (lanes t = 0, 1 read one 32-k block, t = 2, 3 the next), so it multiplies before the MMA, not after.
// The tiled kernel's MMA loop and the stream kernel's split-K merge repeat the int4 kernels' (as
// moe_gemm_fp8.cu says why: a shared inline stage renumbered a timed kernel's PTX registers).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "profiler/common/mxfp4_expert_layout.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/mma_ptx.cuh"
#include "profiler/kernels/moe_gemm_tile.cuh"
#include "profiler/kernels/pdl.cuh"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;
using namespace moe_tile;

__device__ __forceinline__ __nv_bfloat162 scale2(uint8_t e) {
  const uint16_t b = e8m0_bf16_bits(e);
  const __nv_bfloat16 s = *reinterpret_cast<const __nv_bfloat16*>(&b);
  return __bfloat162bfloat162(s);
}

// Codes (2p, 2p + 1) of word w times the block scale, exact.
__device__ __forceinline__ uint32_t mx_pair_scaled(uint32_t w, int p, __nv_bfloat162 s) {
  const uint32_t q = mxfp4_pair(w, p);
  const __nv_bfloat162 d = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&q), s);
  return *reinterpret_cast<const uint32_t*>(&d);
}

// ---- stream: 16 weight rows per warp (MMA M), NT x 8 routed rows (MMA N), one 64-k chunk per step.
// Lane (g, t) holds rows g and g + 8, codes 16t .. 16t + 15 of the chunk (2 words each); pairs 2s and 2s + 1
// feed k16 MMA s, whose tokens' operands are the same 4 columns of x (k 16t + 4s .. +3), so no shuffle.
constexpr int kStreamWarps = 4;
constexpr int kSplitK = 4;

template <int NT, int U, int R, int S>
__global__ void __launch_bounds__(R * S * 32) stream_mxfp4_kernel(MoeGemmArgs a, const int* tiles, const int* num_tiles,
                                                                  const int* offsets) {
  pdl::wait();
  pdl::launch_dependents();
  TileRef tl;
  if (!tile_of(tiles, num_tiles, offsets, blockIdx.x, NT * 8, tl)) return;  // CTA-uniform
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int rg = warp % R, split = warp / R;
  const int64_t tile16 = int64_t(blockIdx.y) * R + rg;
  const int64_t n0 = tile16 * 16;
  const bool active = n0 < a.n;  // n % 16 == 0 (checked): a tile is whole; no early return (barrier below)
  const int64_t K = a.k, chunks = K / kMxChunk, per = (chunks + S - 1) / S;
  const int64_t cbeg = std::min(chunks, split * per), cend = std::min(chunks, (split + 1) * per);
  const uint32_t* wp = a.w_mxfp4 + ((int64_t(tl.expert) * (a.n / 16) + (active ? tile16 : 0)) * chunks) * kMxChunkWords +
                       lane * 2;  // row g; row g + 8 is 64 words on
  const uint8_t* sp = a.w_mxfp4_scale + int64_t(tl.expert) * (K / kMxBlock) * a.n + (t / 2) * a.n + (active ? n0 : 0) + g;
  const int nt_used = (tl.row_end - tl.row0 + 7) / 8;
  const bf16* xb[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int row = tl.row0 + j * 8 + g;
    const int src = row < tl.row_end ? (a.gather ? a.gather[row] : row) : (a.gather ? a.gather[tl.row0] : tl.row0);
    xb[j] = a.x + int64_t(src) * K + 16 * t;
  }
  float acc[NT][4] = {};
  auto chunk = [&](int64_t ci, const uint2& A0, const uint2& A1, uint8_t e0, uint8_t e1) {
    uint4 B[2][NT];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < NT; ++j)
        B[h][j] = j < nt_used ? __ldg(reinterpret_cast<const uint4*>(xb[j] + ci * kMxChunk + 8 * h)) : make_uint4(0, 0, 0, 0);
    const __nv_bfloat162 s0 = scale2(e0), s1 = scale2(e1);
    const uint32_t w0[2] = {A0.x, A0.y}, w1[2] = {A1.x, A1.y};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t a00 = mx_pair_scaled(w0[h], 0, s0), a10 = mx_pair_scaled(w1[h], 0, s1),
                     a01 = mx_pair_scaled(w0[h], 1, s0), a11 = mx_pair_scaled(w1[h], 1, s1),
                     a02 = mx_pair_scaled(w0[h], 2, s0), a12 = mx_pair_scaled(w1[h], 2, s1),
                     a03 = mx_pair_scaled(w0[h], 3, s0), a13 = mx_pair_scaled(w1[h], 3, s1);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if (j >= nt_used) continue;
        ptx::mma_bf16(acc[j], a00, a10, a01, a11, B[h][j].x, B[h][j].y);
        ptx::mma_bf16(acc[j], a02, a12, a03, a13, B[h][j].z, B[h][j].w);
      }
    }
  };
  // U chunks' loads in flight (the last batch predicated, warp-uniform), their scale bytes with them: a
  // decode step reads every layer's scales cold (moe_gemm_int4.cu says what loading them late cost).
  for (int64_t ci = active ? cbeg : cend; ci < cend; ci += U) {
    uint2 A0[U], A1[U];
    uint8_t E0[U], E1[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (ci + u < cend) {
        const uint32_t* p = wp + (ci + u) * kMxChunkWords;
        A0[u] = ptx::ld_stream8(p);
        A1[u] = ptx::ld_stream8(p + 64);
        E0[u] = __ldg(sp + 2 * (ci + u) * a.n);
        E1[u] = __ldg(sp + 2 * (ci + u) * a.n + 8);
      }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (ci + u < cend) chunk(ci + u, A0[u], A1[u], E0[u], E1[u]);
  }
  if constexpr (S > 1) {
    __shared__ float part[S - 1][R][NT * 4][32];  // [split][row group][value][lane]: conflict-free
    if (split > 0)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) part[split - 1][rg][j * 4 + q][lane] = acc[j][q];
    __syncthreads();
    if (split > 0) return;
#pragma unroll
    for (int s = 0; s < S - 1; ++s)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[j][q] += part[s][rg][j * 4 + q][lane];
  }
  if (!active) return;
  // D[weight row][token]: c0, c1 = (g, tokens 2t, 2t + 1), c2, c3 = (g + 8, same tokens).
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int row = tl.row0 + j * 8 + 2 * t + (q & 1);
      if (row < tl.row_end) a.y[int64_t(row) * a.n + n0 + g + (q >= 2 ? 8 : 0)] = __float2bfloat16(acc[j][q]);
    }
}

// ---- tiled: 128 weight rows x 64 routed rows per CTA, 3-stage shared-memory pipeline, ldmatrix (the int4
// tiled kernel's loop). Thread tid holds row tid / 2's codes k 16 (tid % 2) .. +15 of each 32-k stage (one
// scale block): two words, loaded two stages ahead, decoded and scaled to 16 bf16 and stored as the row's
// bf16 chunks 2 (tid % 2) and 2 (tid % 2) + 1 after the stage they overwrite was consumed.
__global__ void __launch_bounds__(kTiledThreads) tiled_mxfp4_kernel(MoeGemmArgs a, const int* tiles,
                                                                    const int* num_tiles, const int* offsets) {
  __shared__ __align__(128) bf16 sa[kStages][kTM * kTK];
  __shared__ __align__(128) bf16 sb[kStages][kTN * kTK];
  TileRef tl;
  if (!tile_of(tiles, num_tiles, offsets, blockIdx.x, kTN, tl)) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int64_t n0 = int64_t(blockIdx.y) * kTM;
  const int64_t K = a.k;
  const int arow = tid / 2, ahalf = tid % 2;
  const int64_t wrow = n0 + arow;
  const bool pa = wrow < a.n;
  const int64_t e = tl.expert, rowc = pa ? wrow : 0;
  const uint32_t* ga = a.w_mxfp4 + mxe_word(a.n, K, e, rowc, 16 * ahalf);  // stage kt: + chunk and half
  const uint8_t* gs = a.w_mxfp4_scale + mxe_scale(a.n, K, e, rowc, 0);
  const int sa_lo = swz(arow, 2 * ahalf), sa_hi = swz(arow, 2 * ahalf + 1);
  struct Codes {
    uint2 w;
    uint8_t e;
  };
  auto load_a = [&](int kt) {
    Codes c{make_uint2(0, 0), 0};
    if (!pa) return c;
    c.w = __ldg(reinterpret_cast<const uint2*>(ga + (kt / 2) * kMxChunkWords + (kt % 2) * 4));
    c.e = gs[int64_t(kt) * a.n];
    return c;
  };
  auto store_a = [&](int stage, const Codes& c) {
    const __nv_bfloat162 s2 = scale2(c.e);
    uint4 lo, hi;
    lo.x = mx_pair_scaled(c.w.x, 0, s2), lo.y = mx_pair_scaled(c.w.x, 1, s2);
    lo.z = mx_pair_scaled(c.w.x, 2, s2), lo.w = mx_pair_scaled(c.w.x, 3, s2);
    hi.x = mx_pair_scaled(c.w.y, 0, s2), hi.y = mx_pair_scaled(c.w.y, 1, s2);
    hi.z = mx_pair_scaled(c.w.y, 2, s2), hi.w = mx_pair_scaled(c.w.y, 3, s2);
    *reinterpret_cast<uint4*>(&sa[stage][sa_lo]) = lo;
    *reinterpret_cast<uint4*>(&sa[stage][sa_hi]) = hi;
  };
  const int brow = tid / 4, bch = tid % 4;
  const int xr = tl.row0 + brow;
  const bool pb = xr < tl.row_end;
  const int src = pb ? (a.gather ? a.gather[xr] : xr) : 0;
  const bf16* gb = a.x + int64_t(src) * K + bch * 8;
  const int sb_off = swz(brow, bch);
  const int ktiles = int(K / kTK);
  auto load_b = [&](int stage, int kt) { ptx::cp_async16(&sb[stage][sb_off], gb + int64_t(kt) * kTK, pb); };
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) store_a(s, load_a(s)), load_b(s, s);
    ptx::cp_async_commit();
  }
  const int wm = (warp % 4) * 32, wn = (warp / 4) * 32;
  float acc[2][4][4] = {};
  for (int kt = 0; kt < ktiles; ++kt) {
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();  // stage kt complete (tokens by cp.async, weights by the stores two steps back)
    const int nxt = kt + kStages - 1;
    Codes areg{make_uint2(0, 0), 0};
    if (nxt < ktiles) areg = load_a(nxt), load_b(nxt % kStages, nxt);
    ptx::cp_async_commit();
    const bf16* A = sa[kt % kStages];
    const bf16* B = sb[kt % kStages];
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      uint32_t af[2][4], bfr[4][2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int row = wm + mt * 16 + (lane % 16), ch = ks * 2 + lane / 16;
        ptx::ldmatrix_x4(af[mt][0], af[mt][1], af[mt][2], af[mt][3], ptx::smem_u32(A + swz(row, ch)));
      }
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        const int m = lane / 8, row = wn + np * 16 + (m / 2) * 8 + lane % 8, ch = ks * 2 + (m % 2);
        ptx::ldmatrix_x4(bfr[2 * np][0], bfr[2 * np][1], bfr[2 * np + 1][0], bfr[2 * np + 1][1],
                         ptx::smem_u32(B + swz(row, ch)));
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
          ptx::mma_bf16(acc[mt][nt], af[mt][0], af[mt][1], af[mt][2], af[mt][3], bfr[nt][0], bfr[nt][1]);
    }
    // Stage nxt % kStages was read in step kt - 1, which every thread finished before this step's barrier.
    if (nxt < ktiles) store_a(nxt % kStages, areg);
  }
  ptx::cp_async_wait<0>();
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int row = tl.row0 + wn + nt * 8 + 2 * t + (q & 1);
        const int64_t col = n0 + wm + mt * 16 + g + (q >= 2 ? 8 : 0);
        if (row < tl.row_end && col < a.n) a.y[int64_t(row) * a.n + col] = __float2bfloat16(acc[mt][nt][q]);
      }
}

// One packed word (8 codes of a row) per thread -> 8 bf16 code * scale in k order: rows [row0, row0 + rows)
// of expert e into out[rows][k] (the eager cuBLAS path's slabs).
__global__ void dequant_mxfp4_kernel(MoeGemmArgs a, int e, int64_t row0, int64_t rows, bf16* out) {
  const int64_t K = a.k, words = rows * (K / 8);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < words; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = row0 + i / (K / 8), kk = (i % (K / 8)) * 8;
    const uint32_t w = a.w_mxfp4[mxe_word(a.n, K, e, r, kk)];
    const __nv_bfloat162 s2 = scale2(a.w_mxfp4_scale[mxe_scale(a.n, K, e, r, kk)]);
    reinterpret_cast<uint4*>(out)[i] = make_uint4(mx_pair_scaled(w, 0, s2), mx_pair_scaled(w, 1, s2),
                                                  mx_pair_scaled(w, 2, s2), mx_pair_scaled(w, 3, s2));
  }
}

}  // namespace

void moe_mxfp4_dequant(const MoeGemmArgs& a, int expert, int64_t row0, int64_t rows, __nv_bfloat16* out,
                       cudaStream_t stream) {
  if (!a.w_mxfp4 || !a.w_mxfp4_scale || !mxe_shape_ok(a.n, a.k) || row0 < 0 || rows < 0 || row0 + rows > a.n)
    throw std::invalid_argument("moe_mxfp4_dequant: MXFP4 experts (n % 16, k % 64) and rows inside [0, n) are required");
  if (rows == 0) return;
  const int64_t words = rows * (a.k / 8);
  const unsigned grid = unsigned(std::min<int64_t>((words + 255) / 256, 132 * 16));
  dequant_mxfp4_kernel<<<grid, 256, 0, stream>>>(a, expert, row0, rows, out);
  CUDA_CHECK_LAUNCH("moe_mxfp4_dequant");
}

void moe_grouped_gemm_mxfp4(const MoeGemmArgs& a, const MoeRouting& r, int kind, cudaStream_t stream) {
  if (!mxe_shape_ok(a.n, a.k))
    throw std::invalid_argument("moe_grouped_gemm: MXFP4 experts need n a multiple of 16 and k of 64; found n " +
                                std::to_string(a.n) + ", k " + std::to_string(a.k));
  if (kind == 2) {
    const int64_t tiles = moe_max_tiles(a.entries, r.local_experts, moe_tile_rows(2));
    const dim3 grid(unsigned(tiles), unsigned((a.n + kTM - 1) / kTM));
    tiled_mxfp4_kernel<<<grid, kTiledThreads, 0, stream>>>(a, r.tiles[2], r.num_tiles + 2, r.offsets);
    CUDA_CHECK_LAUNCH("moe_grouped_gemm (MXFP4 experts, tiled)");
    return;
  }
  // Both stream kinds on the 16-row tile list, as the int4 experts (moe_gemm_int4.cu says why).
  const int64_t tiles = moe_max_tiles(a.entries, r.local_experts, moe_tile_rows(0));
  if (moe_stream_split(a.n, a.touched)) {
    const dim3 grid(unsigned(tiles), unsigned(a.n / 32 + (a.n % 32 != 0)));
    pdl::launch(stream_mxfp4_kernel<2, 8, 2, kSplitK>, grid, dim3(2 * kSplitK * 32), 0, stream, a, r.tiles[0],
                r.num_tiles, r.offsets);
  } else {
    const dim3 grid(unsigned(tiles), unsigned((a.n + 16 * kStreamWarps - 1) / (16 * kStreamWarps)));
    pdl::launch(stream_mxfp4_kernel<2, 8, kStreamWarps, 1>, grid, dim3(kStreamWarps * 32), 0, stream, a, r.tiles[0],
                r.num_tiles, r.offsets);
  }
  CUDA_CHECK_LAUNCH("moe_grouped_gemm (MXFP4 experts)");
}

}  // namespace peerplan::kernels
