// Grouped expert GEMMs over int4 (W4A16) expert weights (moe_gemm.hpp, MoeGemmArgs::w_int4): GPTQ's
// symmetric codes, weight = (q - 8) * scale with one bf16 scale per expert row and 128 k, in the
// packed order of profiler/common/w4_expert_layout.hpp. Two kernels, both on bf16 tensor cores with
// the codes turned into bf16 in registers (as Marlin and the MoE kernels built on it do):
//   stream: decode-sized groups (<= 32 rows an expert; 16-row tiles). A warp streams 16 weight rows, one 128-k
//           group (1 KB, contiguous) per load, as the bf16 stream kernel streams its rows; the
//           group's partial sums take the group scale in fp32.
//   tiled:  prefill-sized groups. The FP8 tiled kernel's shape (moe_gemm_fp8.cu) with each thread's
//           16 codes converted and scaled to bf16 on their way into shared memory.
// A nibble pair becomes exact bf16 (q - 8) in two instructions: (w >> 4p) & 0x000F000F | 0x43004300
// is (128 + q_even, 128 + q_odd) (0x4300 = 128.0, one mantissa ulp = 1), minus 136. There is no
// gemv variant: at one to four rows an expert the MMA pads the tokens to 8, which costs issue slots
// the codes' four-times-smaller bytes leave free (about 25 warp instructions per 512 codes).
// The tiled kernel's MMA loop and the stream kernel's split-K merge repeat the FP8 / bf16 kernels' (as
// moe_gemm_fp8.cu says why: a shared inline stage renumbered a timed kernel's PTX registers).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "profiler/common/w4_expert_layout.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/mma_ptx.cuh"
#include "profiler/kernels/moe_gemm_tile.cuh"
#include "profiler/kernels/pdl.cuh"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;
using namespace moe_tile;

// Codes (2p, 2p + 1) of a packed word (w4_expert_layout.hpp) as a bf16x2 of (q - 8), exact.
__device__ __forceinline__ uint32_t int4_pair(uint32_t w, int p) {
  const uint32_t v = ((w >> (4 * p)) & 0x000F000Fu) | 0x43004300u;
  const __nv_bfloat162 d = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&v), __float2bfloat162_rn(136.f));
  return *reinterpret_cast<const uint32_t*>(&d);
}

// The same pair times the group scale, rounded once to bf16 (the tiled kernel's shared-memory operand).
__device__ __forceinline__ uint32_t int4_pair_scaled(uint32_t w, int p, __nv_bfloat162 s) {
  const uint32_t q = int4_pair(w, p);
  const __nv_bfloat162 d = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&q), s);
  return *reinterpret_cast<const uint32_t*>(&d);
}

// ---- stream: 16 weight rows per warp (MMA M), NT x 8 routed rows (MMA N), one 128-k group per step.
// Lane (g, t) holds rows g and g + 8, codes 32t .. 32t + 31 of the group (4 words each); word j's
// pairs 0, 1 and 2, 3 feed two k16 MMAs whose tokens' operands are the same 8 columns of x (k
// 32t + 8j .. +7), so no shuffle: a dot product allows the permutation of k between lanes.
constexpr int kStreamWarps = 4;
constexpr int kSplitK = 4;

template <int NT, int U, int R, int S>
__global__ void __launch_bounds__(R * S * 32) stream_int4_kernel(MoeGemmArgs a, const int* tiles, const int* num_tiles,
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
  const int64_t K = a.k, groups = K / kW4eGroup, per = (groups + S - 1) / S;
  const int64_t gbeg = std::min(groups, split * per), gend = std::min(groups, (split + 1) * per);
  const uint32_t* wp = a.w_int4 + ((int64_t(tl.expert) * (a.n / 16) + (active ? tile16 : 0)) * groups) * kW4eChunkWords +
                       g * 16 + 4 * t;  // row g; row g + 8 is 128 words on
  const bf16* sp = a.w_int4_scale + int64_t(tl.expert) * groups * a.n + (active ? n0 : 0) + g;
  // Token tiles past the CTA's rows are skipped (CTA-uniform): one row an expert uses one of NT.
  const int nt_used = (tl.row_end - tl.row0 + 7) / 8;
  const bf16* xb[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int row = tl.row0 + j * 8 + g;
    const int src = row < tl.row_end ? (a.gather ? a.gather[row] : row) : (a.gather ? a.gather[tl.row0] : tl.row0);
    xb[j] = a.x + int64_t(src) * K + 32 * t;
  }
  float acc[NT][4] = {};
  auto group = [&](int64_t gi, const uint4& A0, const uint4& A1, bf16 sc0, bf16 sc1) {
    uint4 B[4][NT];
#pragma unroll
    for (int w = 0; w < 4; ++w)
#pragma unroll
      for (int j = 0; j < NT; ++j)
        B[w][j] = j < nt_used ? __ldg(reinterpret_cast<const uint4*>(xb[j] + gi * kW4eGroup + 8 * w)) : make_uint4(0, 0, 0, 0);
    const float s0 = __bfloat162float(sc0), s1 = __bfloat162float(sc1);
    const uint32_t w0[4] = {A0.x, A0.y, A0.z, A0.w}, w1[4] = {A1.x, A1.y, A1.z, A1.w};
    float part[NT][4] = {};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t a00 = int4_pair(w0[w], 0), a10 = int4_pair(w1[w], 0), a01 = int4_pair(w0[w], 1),
                     a11 = int4_pair(w1[w], 1), a02 = int4_pair(w0[w], 2), a12 = int4_pair(w1[w], 2),
                     a03 = int4_pair(w0[w], 3), a13 = int4_pair(w1[w], 3);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if (j >= nt_used) continue;
        ptx::mma_bf16(part[j], a00, a10, a01, a11, B[w][j].x, B[w][j].y);
        ptx::mma_bf16(part[j], a02, a12, a03, a13, B[w][j].z, B[w][j].w);
      }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      acc[j][0] = fmaf(part[j][0], s0, acc[j][0]);
      acc[j][1] = fmaf(part[j][1], s0, acc[j][1]);
      acc[j][2] = fmaf(part[j][2], s1, acc[j][2]);
      acc[j][3] = fmaf(part[j][3], s1, acc[j][3]);
    }
  };
  // U groups' loads in flight, the last batch predicated (warp-uniform): a split of 3 groups (Qwen1.5-MoE's
  // down, k = 1408, over 4 splits) issues its 3 at once rather than one after another. The group scales
  // are loaded with the codes: read when a group's sums were ready, each cold scale (a decode step reads
  // every layer's once) put an HBM round trip in the warp's path, and Mixtral-8x7B's decode steps at batch
  // 2-32 ran 1.08-1.12x a price timed with the scales L2-hot (H100, session 24 K).
  for (int64_t gi = active ? gbeg : gend; gi < gend; gi += U) {
    uint4 A0[U], A1[U];
    bf16 S0[U], S1[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (gi + u < gend) {
        A0[u] = load_stream(wp + (gi + u) * kW4eChunkWords);
        A1[u] = load_stream(wp + (gi + u) * kW4eChunkWords + 128);
        S0[u] = __ldg(sp + (gi + u) * a.n);
        S1[u] = __ldg(sp + (gi + u) * a.n + 8);
      }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (gi + u < gend) group(gi + u, A0[u], A1[u], S0[u], S1[u]);
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

// ---- tiled: 128 weight rows x 64 routed rows per CTA, 3-stage shared-memory pipeline, ldmatrix (the
// FP8 tiled kernel's loop). Thread tid holds row tid / 2's codes k 16 (tid % 2) .. +15 of each 32-k
// stage: two words, loaded two stages ahead, turned into 16 bf16 (q - 8) * scale and stored as the
// row's bf16 chunks 2 (tid % 2) and 2 (tid % 2) + 1 after the stage they overwrite was consumed.
__global__ void __launch_bounds__(kTiledThreads) tiled_int4_kernel(MoeGemmArgs a, const int* tiles,
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
  const uint32_t* ga = a.w_int4 + w4e_word(a.n, K, e, rowc, 16 * ahalf);  // stage kt: + group and quarter
  const bf16* gs = a.w_int4_scale + w4e_scale(a.n, K, e, rowc, 0);
  const int sa_lo = swz(arow, 2 * ahalf), sa_hi = swz(arow, 2 * ahalf + 1);
  struct Codes {
    uint2 w;
    bf16 s;
  };
  auto load_a = [&](int kt) {
    Codes c{make_uint2(0, 0), __float2bfloat16(0.f)};
    if (!pa) return c;
    const int64_t gi = kt / 4;  // 4 stages of 32 k a group
    c.w = __ldg(reinterpret_cast<const uint2*>(ga + gi * kW4eChunkWords + (kt % 4) * 4));
    c.s = gs[gi * a.n];
    return c;
  };
  auto store_a = [&](int stage, const Codes& c) {
    const __nv_bfloat162 s2 = __bfloat162bfloat162(c.s);
    uint4 lo, hi;
    lo.x = int4_pair_scaled(c.w.x, 0, s2), lo.y = int4_pair_scaled(c.w.x, 1, s2);
    lo.z = int4_pair_scaled(c.w.x, 2, s2), lo.w = int4_pair_scaled(c.w.x, 3, s2);
    hi.x = int4_pair_scaled(c.w.y, 0, s2), hi.y = int4_pair_scaled(c.w.y, 1, s2);
    hi.z = int4_pair_scaled(c.w.y, 2, s2), hi.w = int4_pair_scaled(c.w.y, 3, s2);
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
    Codes areg{make_uint2(0, 0), __float2bfloat16(0.f)};
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

// One packed word (8 codes of a row) per thread -> 8 bf16 (q - 8) * scale in k order, rounded as the tiled
// kernel rounds them: rows [row0, row0 + rows) of expert e into out[rows][k].
__global__ void dequant_int4_kernel(MoeGemmArgs a, int e, int64_t row0, int64_t rows, bf16* out) {
  const int64_t K = a.k, words = rows * (K / 8);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < words; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = row0 + i / (K / 8), kk = (i % (K / 8)) * 8;
    const uint32_t w = a.w_int4[w4e_word(a.n, K, e, r, kk)];
    const __nv_bfloat162 s2 = __bfloat162bfloat162(a.w_int4_scale[w4e_scale(a.n, K, e, r, kk)]);
    const uint4 o = make_uint4(int4_pair_scaled(w, 0, s2), int4_pair_scaled(w, 1, s2), int4_pair_scaled(w, 2, s2),
                               int4_pair_scaled(w, 3, s2));
    reinterpret_cast<uint4*>(out)[i] = o;
  }
}

}  // namespace

void moe_int4_dequant(const MoeGemmArgs& a, int expert, int64_t row0, int64_t rows, __nv_bfloat16* out,
                      cudaStream_t stream) {
  if (!a.w_int4 || !a.w_int4_scale || !w4e_shape_ok(a.n, a.k) || row0 < 0 || rows < 0 || row0 + rows > a.n)
    throw std::invalid_argument("moe_int4_dequant: int4 experts (n % 16, k % 128) and rows inside [0, n) are required");
  if (rows == 0) return;
  const int64_t words = rows * (a.k / 8);
  const unsigned grid = unsigned(std::min<int64_t>((words + 255) / 256, 132 * 16));
  dequant_int4_kernel<<<grid, 256, 0, stream>>>(a, expert, row0, rows, out);
  CUDA_CHECK_LAUNCH("moe_int4_dequant");
}

void moe_grouped_gemm_int4(const MoeGemmArgs& a, const MoeRouting& r, int kind, cudaStream_t stream) {
  if (!w4e_shape_ok(a.n, a.k))
    throw std::invalid_argument("moe_grouped_gemm: int4 experts need n a multiple of 16 and k of 128; found n " +
                                std::to_string(a.n) + ", k " + std::to_string(a.k));
  if (kind == 2) {
    const int64_t tiles = moe_max_tiles(a.entries, r.local_experts, moe_tile_rows(2));
    const dim3 grid(unsigned(tiles), unsigned((a.n + kTM - 1) / kTM));
    tiled_int4_kernel<<<grid, kTiledThreads, 0, stream>>>(a, r.tiles[2], r.num_tiles + 2, r.offsets);
    CUDA_CHECK_LAUNCH("moe_grouped_gemm (int4 experts, tiled)");
    return;
  }
  // Both stream kinds run on the 16-row tile list: on 32-row tiles (4 token tiles a warp, half the groups in
  // flight for its registers) the kernel ran 1.3-1.5x longer at every decode size of Qwen1.5-MoE's gate_up
  // (H100, session 24 I: 4 tokens 37.2 against 24.5 us, 64 tokens 109.9 against 75.4), where the bf16 and FP8
  // kernels gain from it; so kind 1 runs kind 0's kernel here (the profile's kind1_us says so).
  const int64_t tiles = moe_max_tiles(a.entries, r.local_experts, moe_tile_rows(0));
  const int* tl = r.tiles[0];
  const int* nt = r.num_tiles;
  // PEERPLAN_INT4_SPLIT_WARPS=F splits k below F x the bf16 rule's warp count (A/B runs; default 1, what the
  // session 24 profiles timed): L's profile showed Mixtral's down at 4-8 tokens latency-bound with k whole.
  static const int64_t split_warps = [] {
    const char* e = std::getenv("PEERPLAN_INT4_SPLIT_WARPS");
    if (!e || !*e) return int64_t(1);
    const long v = std::strtol(e, nullptr, 10);
    if (v < 1 || v > 64) throw std::invalid_argument(std::string("PEERPLAN_INT4_SPLIT_WARPS: expected 1..64; found ") + e);
    return int64_t(v);
  }();
  if (moe_stream_split(a.n, a.touched, split_warps)) {
    const dim3 grid(unsigned(tiles), unsigned(a.n / 32 + (a.n % 32 != 0)));
    pdl::launch(stream_int4_kernel<2, 4, 2, kSplitK>, grid, dim3(2 * kSplitK * 32), 0, stream, a, tl, nt, r.offsets);
  } else {
    const dim3 grid(unsigned(tiles), unsigned((a.n + 16 * kStreamWarps - 1) / (16 * kStreamWarps)));
    pdl::launch(stream_int4_kernel<2, 4, kStreamWarps, 1>, grid, dim3(kStreamWarps * 32), 0, stream, a, tl, nt, r.offsets);
  }
  CUDA_CHECK_LAUNCH("moe_grouped_gemm (int4 experts)");
}

}  // namespace peerplan::kernels
