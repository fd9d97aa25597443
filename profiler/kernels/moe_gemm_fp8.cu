// Grouped expert GEMMs over 8-bit expert weights with per-channel scales (moe_gemm.hpp): FP8 (e4m3,
// MoeGemmArgs::w_fp8) and int8 (MoeGemmArgs::w_int8, vLLM's int8_w8a16 fused-MoE format) codes. The bf16
// kernels' gemv and stream shapes, reading a byte per weight and converting it to bf16 in registers
// (an exact shift for e4m3, kv_fp8.cuh; an exact float trick for int8, int8_codes.cuh; the channel scale
// multiplies the fp32 sum once). At decode the time is the weight bytes, so this reads what an
// engine's fused-MoE kernel reads (vLLM's W8A8 quantizes the tokens and runs 8-bit tensor cores; at a
// few rows per expert both stream the same bytes); prefill-sized groups go through a tiled kernel with
// the codes converted on their way into shared memory. The two code formats are one template (Codes
// below) so each kernel is written once. Kept apart from the bf16 kernels, whose MMA
// loops, split-K merge and epilogues they repeat, so the bf16 kernels' register allocation, which the
// profiles timed, does not move: factoring the tiled MMA stage into a shared inline function renumbered
// the bf16 kernel's PTX registers (session 23), which ptxas may allocate differently, unmeasured.
#include <algorithm>
#include <cstdint>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/int8_codes.cuh"
#include "profiler/kernels/kv_fp8.cuh"
#include "profiler/kernels/mma_ptx.cuh"
#include "profiler/kernels/moe_gemm_tile.cuh"
#include "profiler/kernels/pdl.cuh"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;
using namespace moe_tile;

// The code formats: where the codes are and how 8 of them become 8 bf16 (k order kept).
struct E4m3Codes {
  static __device__ __forceinline__ const uint8_t* codes(const MoeGemmArgs& a) { return a.w_fp8; }
  static __device__ __forceinline__ uint4 to_bf16x8(uint2 c) { return e4m3x8_to_bf16x8(c); }
};
// int8 -> bf16 exactly (int8_codes.cuh).
struct Int8Codes {
  static __device__ __forceinline__ const uint8_t* codes(const MoeGemmArgs& a) {
    return reinterpret_cast<const uint8_t*>(a.w_int8);
  }
  static __device__ __forceinline__ uint4 to_bf16x8(uint2 c) { return int8x8_to_bf16x8(c); }
};

// 16 codes -> two groups of 8 bf16 (k order kept).
template <class C>
__device__ __forceinline__ void codes16_to_bf16(const uint4& c, uint4& lo, uint4& hi) {
  lo = C::to_bf16x8(make_uint2(c.x, c.y));
  hi = C::to_bf16x8(make_uint2(c.z, c.w));
}

// ---- gemv: a warp reads RW weight rows, each 512 contiguous bytes (16 codes a lane) per load
// instruction, as the bf16 gemv does with 256 columns; MT routed rows per pass over them.
constexpr int kGvWarps = 4;

template <class C, int MT, int RW, int U>
__global__ void __launch_bounds__(kGvWarps * 32) gemv_w8_kernel(MoeGemmArgs a, const int* tiles, const int* num_tiles,
                                                                const int* offsets, int tile_rows) {
  pdl::wait();
  pdl::launch_dependents();
  TileRef tl;
  if (!tile_of(tiles, num_tiles, offsets, blockIdx.x, tile_rows, tl)) return;  // CTA-uniform
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n0 = (int64_t(blockIdx.y) * kGvWarps + warp) * RW;
  if (n0 >= a.n) return;  // warp-uniform, no barrier below
  const int64_t K = a.k;
  const uint8_t* wexp = C::codes(a) + int64_t(tl.expert) * a.n * K;
  const uint8_t* wr[RW];
#pragma unroll
  for (int r = 0; r < RW; ++r) wr[r] = wexp + std::min<int64_t>(n0 + r, a.n - 1) * K;  // past n: read, not stored
  for (int m0 = tl.row0; m0 < tl.row_end; m0 += MT) {
    const bf16* xr[MT];  // rows past the tile repeat the first (computed, never stored)
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const int row = m0 + m < tl.row_end ? m0 + m : m0;
      xr[m] = a.x + int64_t(a.gather ? a.gather[row] : row) * K;
    }
    float acc[RW][MT] = {};
    // k % 32 == 0 (checked), so a lane whose first code is inside k has all 16 inside.
    int64_t kc = int64_t(lane) * 16;
    for (; kc + 512 * (U - 1) < K; kc += 512 * U) {
      uint4 w[U][RW], xv[U][MT][2];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < RW; ++r) w[u][r] = load_stream(wr[r] + kc + 512 * u);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const uint4* xp = reinterpret_cast<const uint4*>(xr[m] + kc + 512 * u);
          xv[u][m][0] = __ldg(xp);
          xv[u][m][1] = __ldg(xp + 1);
        }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < RW; ++r) {
          uint4 lo, hi;
          codes16_to_bf16<C>(w[u][r], lo, hi);
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            ptx::dot8_bf16(acc[r][m], lo, xv[u][m][0]);
            ptx::dot8_bf16(acc[r][m], hi, xv[u][m][1]);
          }
        }
    }
    for (; kc < K; kc += 512) {  // the tail: this lane's last 16 codes
      uint4 xv[MT][2];
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const uint4* xp = reinterpret_cast<const uint4*>(xr[m] + kc);
        xv[m][0] = __ldg(xp);
        xv[m][1] = __ldg(xp + 1);
      }
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        uint4 lo, hi;
        codes16_to_bf16<C>(load_stream(wr[r] + kc), lo, hi);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          ptx::dot8_bf16(acc[r][m], lo, xv[m][0]);
          ptx::dot8_bf16(acc[r][m], hi, xv[m][1]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int off = 16; off > 0; off /= 2) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], off);
#pragma unroll
    for (int r = 0; r < RW; ++r)
      if (lane == r && n0 + r < a.n) {
        const float s = a.w_scale[int64_t(tl.expert) * a.n + n0 + r];
#pragma unroll
        for (int m = 0; m < MT; ++m)
          if (m0 + m < tl.row_end) a.y[int64_t(m0 + m) * a.n + n0 + r] = __float2bfloat16(acc[r][m] * s);
      }
  }
}

// ---- stream: the bf16 stream kernel's MMA tiles (16 weight rows per warp, NT x 8 routed rows),
// over 64 k per step: a lane's 16 codes of a row are two groups of 8 k that it feeds to two k32
// chunks of MMAs, and it reads the tokens' same 16 columns (a dot product allows the permutation).
// A k that is 32 past a multiple of 64 ends with one 8-code step, taken by the last split.
constexpr int kStreamWarps = 4;
constexpr int kSplitK = 4;

template <class C, int NT, int U, int R, int S>
__global__ void __launch_bounds__(R * S * 32) stream_w8_kernel(MoeGemmArgs a, const int* tiles, const int* num_tiles,
                                                                const int* offsets) {
  pdl::wait();
  pdl::launch_dependents();
  TileRef tl;
  if (!tile_of(tiles, num_tiles, offsets, blockIdx.x, NT * 8, tl)) return;  // CTA-uniform
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int rg = warp % R, split = warp / R;
  const int64_t n0 = (int64_t(blockIdx.y) * R + rg) * 16;
  const bool active = n0 < a.n;  // no early return: split warps meet at the barrier below
  const int64_t K = a.k;
  const int64_t steps = K / 64, per = (steps + S - 1) / S;
  const int64_t kbeg = std::min(steps, split * per) * 64, kend = std::min(steps, (split + 1) * per) * 64;
  const bool tail = split == S - 1 && K % 64 != 0;  // the last 32 columns
  const uint8_t* wexp = C::codes(a) + int64_t(tl.expert) * a.n * K;
  const bool va0 = active && n0 + g < a.n, va1 = active && n0 + g + 8 < a.n;
  const uint8_t* wa0 = wexp + (va0 ? n0 + g : 0) * K + 16 * t;
  const uint8_t* wa1 = wexp + (va1 ? n0 + g + 8 : 0) * K + 16 * t;
  const bf16* xb[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int row = tl.row0 + j * 8 + g;
    const int src = row < tl.row_end ? (a.gather ? a.gather[row] : row) : (a.gather ? a.gather[tl.row0] : tl.row0);
    xb[j] = a.x + int64_t(src) * K + 16 * t;
  }
  float acc[NT][4] = {};
  auto keep = [](const uint4& v, bool valid) { return valid ? v : make_uint4(0, 0, 0, 0); };
  auto mma_chunk = [&](const uint4& A0, const uint4& A1, const uint4 (&B)[NT]) {
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      ptx::mma_bf16(acc[j], A0.x, A1.x, A0.y, A1.y, B[j].x, B[j].y);
      ptx::mma_bf16(acc[j], A0.z, A1.z, A0.w, A1.w, B[j].z, B[j].w);
    }
  };
  auto step64 = [&](const uint4& c0, const uint4& c1, const uint4 (&Blo)[NT], const uint4 (&Bhi)[NT]) {
    uint4 lo0, hi0, lo1, hi1;
    codes16_to_bf16<C>(keep(c0, va0), lo0, hi0);
    codes16_to_bf16<C>(keep(c1, va1), lo1, hi1);
    mma_chunk(lo0, lo1, Blo);
    mma_chunk(hi0, hi1, Bhi);
  };
  int64_t kc = active ? kbeg : kend;
  for (; kc + 64 * U <= kend; kc += 64 * U) {
    uint4 A0[U], A1[U], Blo[U][NT], Bhi[U][NT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      A0[u] = load_stream(wa0 + kc + 64 * u);
      A1[u] = load_stream(wa1 + kc + 64 * u);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const uint4* xp = reinterpret_cast<const uint4*>(xb[j] + kc + 64 * u);
        Blo[u][j] = __ldg(xp);
        Bhi[u][j] = __ldg(xp + 1);
      }
#pragma unroll
    for (int u = 0; u < U; ++u) step64(A0[u], A1[u], Blo[u], Bhi[u]);
  }
  for (; kc < kend; kc += 64) {
    uint4 Blo[NT], Bhi[NT];
    const uint4 A0 = load_stream(wa0 + kc), A1 = load_stream(wa1 + kc);
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const uint4* xp = reinterpret_cast<const uint4*>(xb[j] + kc);
      Blo[j] = __ldg(xp);
      Bhi[j] = __ldg(xp + 1);
    }
    step64(A0, A1, Blo, Bhi);
  }
  if (active && tail) {  // columns K-32 .. K-1: lane t's 8 codes at K-32+8t (rows g, g+8)
    const int64_t k0 = steps * 64 - 16 * t + 8 * t;  // wa*/xb already carry +16t
    const uint2 c0 = *reinterpret_cast<const uint2*>(wa0 + k0), c1 = *reinterpret_cast<const uint2*>(wa1 + k0);
    uint4 B[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) B[j] = __ldg(reinterpret_cast<const uint4*>(xb[j] + k0));
    mma_chunk(keep(C::to_bf16x8(c0), va0), keep(C::to_bf16x8(c1), va1), B);
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
  // D[weight row][token]: c0, c1 = (g, tokens 2t, 2t+1), c2, c3 = (g + 8, same tokens).
  const float* sc = a.w_scale + int64_t(tl.expert) * a.n;
  const float s0 = va0 ? sc[n0 + g] : 0.f, s1 = va1 ? sc[n0 + g + 8] : 0.f;
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int row = tl.row0 + j * 8 + 2 * t + (q & 1);
      const int64_t col = n0 + g + (q >= 2 ? 8 : 0);
      if (row < tl.row_end && col < a.n)
        a.y[int64_t(row) * a.n + col] = __float2bfloat16(acc[j][q] * (q >= 2 ? s1 : s0));
    }
}

// ---- tiled: the bf16 tiled kernel (moe_gemm.cu: 128 weight rows x 64 routed rows per CTA, 3-stage
// shared-memory pipeline, ldmatrix) with the weights staged through registers: each thread loads one
// 16-byte piece of codes (a row's 16 k of the 32-k stage) two stages ahead, converts it to 16 bf16 and
// stores them in the swizzled layout ldmatrix reads, after the stage it overwrites was consumed. The
// tokens keep cp.async. Prefill-sized groups that stay grouped (moe_cublas_rule.hpp) run here; before it
// they ran the 32-row stream kernel, which re-reads an expert's weights per 32 rows (Qwen1.5-MoE's
// 2048-token prefill 38.1 ms against 33.7 in bf16, H100 2026-12-06).
template <class C>
__global__ void __launch_bounds__(kTiledThreads) tiled_w8_kernel(MoeGemmArgs a, const int* tiles,
                                                                  const int* num_tiles, const int* offsets) {
  __shared__ __align__(128) bf16 sa[kStages][kTM * kTK];
  __shared__ __align__(128) bf16 sb[kStages][kTN * kTK];
  TileRef tl;
  if (!tile_of(tiles, num_tiles, offsets, blockIdx.x, kTN, tl)) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int64_t n0 = int64_t(blockIdx.y) * kTM;
  const int64_t K = a.k;
  // Weights: thread tid holds row tid / 2's codes k 16 (tid % 2) .. +15 of each stage: bf16 chunks
  // 2 (tid % 2) and 2 (tid % 2) + 1 of that row.
  const int arow = tid / 2, ahalf = tid % 2;
  const bool pa = n0 + arow < a.n;
  const uint8_t* ga = C::codes(a) + (int64_t(tl.expert) * a.n + (pa ? n0 + arow : 0)) * K + ahalf * 16;
  const int sa_lo = swz(arow, 2 * ahalf), sa_hi = swz(arow, 2 * ahalf + 1);
  auto load_a = [&](int kt) { return pa ? load_stream(ga + int64_t(kt) * kTK) : make_uint4(0, 0, 0, 0); };
  auto store_a = [&](int stage, const uint4& c) {
    uint4 lo, hi;
    codes16_to_bf16<C>(c, lo, hi);
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
    uint4 areg = make_uint4(0, 0, 0, 0);
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
  const float* sc = a.w_scale + int64_t(tl.expert) * a.n;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int q2 = 0; q2 < 2; ++q2) {
      const int64_t col = n0 + wm + mt * 16 + g + 8 * q2;
      const float s = col < a.n ? sc[col] : 0.f;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int q = 2 * q2; q < 2 * q2 + 2; ++q) {
          const int row = tl.row0 + wn + nt * 8 + 2 * t + (q & 1);
          if (row < tl.row_end && col < a.n) a.y[int64_t(row) * a.n + col] = __float2bfloat16(acc[mt][nt][q] * s);
        }
    }
}

}  // namespace

namespace {
template <class C>
void launch_w8(const MoeGemmArgs& a, const MoeRouting& r, int kind, bool gemv_on, cudaStream_t stream) {
  if (kind == 2) {
    if (moe_w8mma_takes(a, kind)) return moe_grouped_gemm_w8mma(a, r, stream);
    const int64_t tiles = moe_max_tiles(a.entries, r.local_experts, moe_tile_rows(2));
    const dim3 grid(unsigned(tiles), unsigned((a.n + kTM - 1) / kTM));
    tiled_w8_kernel<C><<<grid, kTiledThreads, 0, stream>>>(a, r.tiles[2], r.num_tiles + 2, r.offsets);
    CUDA_CHECK_LAUNCH("moe_grouped_gemm (8-bit experts, tiled)");
    return;
  }
  const int64_t tiles = moe_max_tiles(a.entries, r.local_experts, moe_tile_rows(kind));
  const int* tl = r.tiles[kind];
  const int* nt = r.num_tiles + kind;
  if (gemv_on && moe_gemv_rows(a.max_rows)) {
    // Bytes in flight per warp as the bf16 gemv's 4x4 / 4x2 shapes (16 codes a lane per load).
    const dim3 grid(unsigned(tiles), unsigned((a.n + kGvWarps * 4 - 1) / (kGvWarps * 4)));
    const int rows = moe_tile_rows(kind);
    if (a.max_rows > 2) pdl::launch(gemv_w8_kernel<C, 4, 4, 1>, grid, dim3(kGvWarps * 32), 0, stream, a, tl, nt, r.offsets, rows);
    else pdl::launch(gemv_w8_kernel<C, 2, 4, 2>, grid, dim3(kGvWarps * 32), 0, stream, a, tl, nt, r.offsets, rows);
  } else if (moe_stream_split(a.n, a.touched)) {
    const dim3 grid(unsigned(tiles), unsigned((a.n + 32 - 1) / 32));
    if (kind == 0) pdl::launch(stream_w8_kernel<C, 2, 4, 2, kSplitK>, grid, dim3(2 * kSplitK * 32), 0, stream, a, tl, nt, r.offsets);
    else pdl::launch(stream_w8_kernel<C, 4, 2, 2, kSplitK>, grid, dim3(2 * kSplitK * 32), 0, stream, a, tl, nt, r.offsets);
  } else {
    const dim3 grid(unsigned(tiles), unsigned((a.n + 16 * kStreamWarps - 1) / (16 * kStreamWarps)));
    if (kind == 0) pdl::launch(stream_w8_kernel<C, 2, 4, kStreamWarps, 1>, grid, dim3(kStreamWarps * 32), 0, stream, a, tl, nt, r.offsets);
    else pdl::launch(stream_w8_kernel<C, 4, 2, kStreamWarps, 1>, grid, dim3(kStreamWarps * 32), 0, stream, a, tl, nt, r.offsets);
  }
  CUDA_CHECK_LAUNCH("moe_grouped_gemm (8-bit experts)");
}
}  // namespace

void moe_grouped_gemm_w8(const MoeGemmArgs& a, const MoeRouting& r, int kind, bool gemv_on, cudaStream_t stream) {
  if (a.w_int8) launch_w8<Int8Codes>(a, r, kind, gemv_on, stream);
  else launch_w8<E4m3Codes>(a, r, kind, gemv_on, stream);
}

}  // namespace peerplan::kernels
