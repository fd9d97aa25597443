// Grouped expert GEMM kernels (see moe_gemm.hpp). Fragment layouts: mma_ptx.cuh.
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/mma_ptx.cuh"
#include "profiler/kernels/moe_gemm.hpp"
#include "profiler/kernels/moe_gemm_tile.cuh"
#include "profiler/kernels/pdl.cuh"
#include "profiler/kernels/silu_mul.cuh"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;
using namespace moe_tile;

// ---- stream kernel: R row groups of 16 weight rows x S splits of k per CTA (one warp each),
// NT x 8 routed rows per tile. With few touched experts (decode at small batch) the rows alone
// give too few warps to keep HBM busy (Mixtral's down at batch 1: 512 warps); S > 1 splits k
// over S warps of the CTA, whose partial sums meet in shared memory.
constexpr int kStreamWarps = 4;   // warps of a CTA without the k split (R = 4, S = 1)
constexpr int kSplitK = 4;        // the k split, when taken (R = 2, S = 4)

// NT: 8-row token sub-tiles per tile; U: 32-column chunks loaded per iteration (bytes in flight:
// each warp keeps U x 2 16-byte weight loads out).
template <int NT, int U, int R, int S>
__global__ void __launch_bounds__(R * S * 32) stream_kernel(MoeGemmArgs a, const int* tiles, const int* num_tiles,
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
  const int64_t chunks = K / 32, per = (chunks + S - 1) / S;
  const int64_t kbeg = std::min(chunks, split * per) * 32, kend = std::min(chunks, (split + 1) * per) * 32;
  const bf16* wexp = a.w + int64_t(tl.expert) * a.n * K;
  const bool va0 = active && n0 + g < a.n, va1 = active && n0 + g + 8 < a.n;
  const bf16* wa0 = wexp + (va0 ? n0 + g : 0) * K + 8 * t;
  const bf16* wa1 = wexp + (va1 ? n0 + g + 8 : 0) * K + 8 * t;
  const bf16* xb[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int row = tl.row0 + j * 8 + g;
    const int src = row < tl.row_end ? (a.gather ? a.gather[row] : row) : (a.gather ? a.gather[tl.row0] : tl.row0);
    xb[j] = a.x + int64_t(src) * K + 8 * t;
  }
  float acc[NT][4] = {};
  // Loads are unconditional (rows past n or past the tile read a valid row, see above) so they all
  // issue back to back; rows past n are zeroed here, tokens past the tile are never stored.
  auto keep = [](const uint4& v, bool valid) { return valid ? v : make_uint4(0, 0, 0, 0); };
  auto mma_chunk = [&](const uint4& A0, const uint4& A1, const uint4 (&B)[NT]) {
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      // k permuted: this thread's 8 columns 8t..8t+7 are the MMA's (2t, 2t+1, 8+2t, 8+2t+1) of
      // two k16 steps; the tokens' columns are permuted the same way.
      ptx::mma_bf16(acc[j], A0.x, A1.x, A0.y, A1.y, B[j].x, B[j].y);
      ptx::mma_bf16(acc[j], A0.z, A1.z, A0.w, A1.w, B[j].z, B[j].w);
    }
  };
  int64_t kc = active ? kbeg : kend;
  for (; kc + 32 * U <= kend; kc += 32 * U) {
    uint4 A0[U], A1[U], B[U][NT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      A0[u] = load_stream(wa0 + kc + 32 * u);
      A1[u] = load_stream(wa1 + kc + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < NT; ++j) B[u][j] = __ldg(reinterpret_cast<const uint4*>(xb[j] + kc + 32 * u));
#pragma unroll
    for (int u = 0; u < U; ++u) mma_chunk(keep(A0[u], va0), keep(A1[u], va1), B[u]);
  }
  for (; kc < kend; kc += 32) {
    uint4 B[NT];
    const uint4 A0 = load_stream(wa0 + kc), A1 = load_stream(wa1 + kc);
#pragma unroll
    for (int j = 0; j < NT; ++j) B[j] = __ldg(reinterpret_cast<const uint4*>(xb[j] + kc));
    mma_chunk(keep(A0, va0), keep(A1, va1), B);
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
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int row = tl.row0 + j * 8 + 2 * t + (q & 1);
      const int64_t col = n0 + g + (q >= 2 ? 8 : 0);
      if (row < tl.row_end && col < a.n) a.y[int64_t(row) * a.n + col] = __float2bfloat16(acc[j][q]);
    }
}

// ---- gemv kernel: one or two routed rows per expert (decode at small batch). The stream kernel's
// MMA fragments read each weight row in 64-byte pieces (8 rows per load instruction) and streamed
// the touched experts at 2.1-2.6 TB/s on H200 (docs/validation/runs/2026-12-04-session7); here a
// warp reads kGvRows weight rows, each as 512 contiguous bytes per load instruction (lanes along
// k, 16 bytes each), multiplies them with the tile's rows 2 or 4 at a time on the FP32 cores (2
// FLOPs per weight byte and row: far below their rate) and reduces across lanes once at the end.
// Measured (H200, 2026-12-04, decode steps, context 1024): Mixtral-8x7B batch 1 / 2 / 4 11.17 /
// 17.63 / 26.78 -> 8.28 / 12.71 / 20.05 ms; Qwen1.5-MoE 2.74 / 3.66 / 4.89 / 6.58 (batch 8) ->
// 2.67 / 3.24 / 4.17 / 6.04 ms.
constexpr int kGvWarps = 4;  // rows per warp (RW) and 256-column steps per iteration (U): template

// MT: routed rows multiplied per pass over the weights (2 when the busiest expert holds <= 2 rows,
// 4 when it holds 3-4); a tile with more rows takes them MT at a time (correct, slower).
// ACT (a.act set, gate_up only): the warp's rows are kGvRows / 2 gate rows and their up rows (n / 2 on),
// and SiLU(gate) * up goes to a.act [rows][n / 2] instead of y (moe_gemm.hpp).
template <int MT, int kGvRows = 4, int kGvUnroll = 2, bool ACT = false>
__global__ void __launch_bounds__(kGvWarps * 32) gemv_kernel(MoeGemmArgs a, const int* tiles, const int* num_tiles,
                                                            const int* offsets, int tile_rows) {
  pdl::wait();
  pdl::launch_dependents();
  TileRef tl;
  if (!tile_of(tiles, num_tiles, offsets, blockIdx.x, tile_rows, tl)) return;  // CTA-uniform
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kOut = ACT ? kGvRows / 2 : kGvRows;  // output columns per warp
  const int64_t n_out = ACT ? a.n / 2 : a.n;
  const int64_t n0 = (int64_t(blockIdx.y) * kGvWarps + warp) * kOut;
  if (n0 >= n_out) return;  // warp-uniform, and no barrier below
  const int64_t K = a.k;
  const bf16* wexp = a.w + int64_t(tl.expert) * a.n * K;
  const bf16* wr[kGvRows];
#pragma unroll
  for (int r = 0; r < kGvRows; ++r) {  // past n (or its half): a valid row, not stored
    const int64_t row = ACT ? (r < kOut ? 0 : n_out) + std::min<int64_t>(n0 + r % kOut, n_out - 1)
                            : std::min<int64_t>(n0 + r, a.n - 1);
    wr[r] = wexp + row * K;
  }
  for (int m0 = tl.row0; m0 < tl.row_end; m0 += MT) {
    const bf16* xr[MT];  // rows past the tile repeat the first (computed, never stored)
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const int row = m0 + m < tl.row_end ? m0 + m : m0;
      xr[m] = a.x + int64_t(a.gather ? a.gather[row] : row) * K;
    }
    float acc[kGvRows][MT] = {};
    int64_t kc = int64_t(lane) * 8;
    for (; kc + 256 * (kGvUnroll - 1) < K; kc += 256 * kGvUnroll) {
      uint4 w[kGvUnroll][kGvRows], xv[kGvUnroll][MT];
#pragma unroll
      for (int u = 0; u < kGvUnroll; ++u)
#pragma unroll
        for (int r = 0; r < kGvRows; ++r) w[u][r] = load_stream(wr[r] + kc + 256 * u);
#pragma unroll
      for (int u = 0; u < kGvUnroll; ++u)
#pragma unroll
        for (int m = 0; m < MT; ++m) xv[u][m] = __ldg(reinterpret_cast<const uint4*>(xr[m] + kc + 256 * u));
#pragma unroll
      for (int u = 0; u < kGvUnroll; ++u)
#pragma unroll
        for (int r = 0; r < kGvRows; ++r)
#pragma unroll
          for (int m = 0; m < MT; ++m) ptx::dot8_bf16(acc[r][m], w[u][r], xv[u][m]);
    }
    for (; kc < K; kc += 256) {  // the tail: this lane's last 16-byte pieces
      uint4 xv[MT];
#pragma unroll
      for (int m = 0; m < MT; ++m) xv[m] = __ldg(reinterpret_cast<const uint4*>(xr[m] + kc));
#pragma unroll
      for (int r = 0; r < kGvRows; ++r) {
        const uint4 w = load_stream(wr[r] + kc);
#pragma unroll
        for (int m = 0; m < MT; ++m) ptx::dot8_bf16(acc[r][m], w, xv[m]);
      }
    }
#pragma unroll
    for (int r = 0; r < kGvRows; ++r)
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int off = 16; off > 0; off /= 2) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], off);
    // lane r writes weight row n0 + r of the pass's routed rows (ACT: its activation, gate row r and up
    // row r + kOut)
#pragma unroll
    for (int r = 0; r < kOut; ++r)
      if (lane == r && n0 + r < n_out)
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          if (m0 + m >= tl.row_end) continue;
          if constexpr (ACT) a.act[int64_t(m0 + m) * n_out + n0 + r] = silu_mul_rounded(acc[r][m], acc[r + kOut][m]);
          else a.y[int64_t(m0 + m) * a.n + n0 + r] = __float2bfloat16(acc[r][m]);
        }
  }
}

// ---- tiled kernel: 128 weight rows x 64 routed rows per CTA, 8 warps (4 x 2) of 32 x 32 (tile
// sizes and the shared-memory swizzle: moe_gemm_tile.cuh) ----

__global__ void __launch_bounds__(kTiledThreads) tiled_kernel(MoeGemmArgs a, const int* tiles, const int* num_tiles,
                                                              const int* offsets) {
  __shared__ __align__(128) bf16 sa[kStages][kTM * kTK];
  __shared__ __align__(128) bf16 sb[kStages][kTN * kTK];
  TileRef tl;
  if (!tile_of(tiles, num_tiles, offsets, blockIdx.x, kTN, tl)) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int64_t n0 = int64_t(blockIdx.y) * kTM;
  const int64_t K = a.k;
  const bf16* wexp = a.w + int64_t(tl.expert) * a.n * K;
  // Loader: A 128 rows x 4 chunks (2 per thread), B 64 rows x 4 chunks (1 per thread).
  const bf16* ga[2];
  bool pa[2];
  int sa_off[2];
  for (int i = 0; i < 2; ++i) {
    const int c = tid + i * kTiledThreads, row = c / 4, ch = c % 4;
    pa[i] = n0 + row < a.n;
    ga[i] = wexp + (pa[i] ? n0 + row : 0) * K + ch * 8;
    sa_off[i] = swz(row, ch);
  }
  const int brow = tid / 4, bch = tid % 4;
  const int xr = tl.row0 + brow;
  const bool pb = xr < tl.row_end;
  const int src = pb ? (a.gather ? a.gather[xr] : xr) : 0;
  const bf16* gb = a.x + int64_t(src) * K + bch * 8;
  const int sb_off = swz(brow, bch);
  const int ktiles = int(K / kTK);
  auto load = [&](int stage, int kt) {
    const int64_t ko = int64_t(kt) * kTK;
    for (int i = 0; i < 2; ++i) ptx::cp_async16(&sa[stage][sa_off[i]], ga[i] + ko, pa[i]);
    ptx::cp_async16(&sb[stage][sb_off], gb + ko, pb);
  };
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    ptx::cp_async_commit();
  }
  const int wm = (warp % 4) * 32, wn = (warp / 4) * 32;
  float acc[2][4][4] = {};
  for (int kt = 0; kt < ktiles; ++kt) {
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();
    const int nxt = kt + kStages - 1;
    if (nxt < ktiles) load(nxt % kStages, nxt);
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

// The gemv kernel of `shape` (moe_grouped_gemm_kind), ACT with the activation in its epilogue. Under ACT a warp
// keeps rw rows (rw / 2 output columns), so the grid is the same for an even n.
template <bool ACT>
void launch_gemv(const MoeGemmArgs& a, const MoeRouting& r, int kind, int shape, dim3 grid, cudaStream_t stream) {
  const int* tl = r.tiles[kind];
  const int* nt = r.num_tiles + kind;
  const int rows = moe_tile_rows(kind);
  const dim3 block(kGvWarps * 32);
  if (a.max_rows > 2) pdl::launch(gemv_kernel<4, 4, 2, ACT>, grid, block, 0, stream, a, tl, nt, r.offsets, rows);
  else if (shape == 0) pdl::launch(gemv_kernel<2, 4, 2, ACT>, grid, block, 0, stream, a, tl, nt, r.offsets, rows);
  else if (shape == 1) pdl::launch(gemv_kernel<2, 4, 4, ACT>, grid, block, 0, stream, a, tl, nt, r.offsets, rows);
  else if (shape == 2) pdl::launch(gemv_kernel<2, 2, 4, ACT>, grid, block, 0, stream, a, tl, nt, r.offsets, rows);
  else if (shape == 3) pdl::launch(gemv_kernel<2, 8, 2, ACT>, grid, block, 0, stream, a, tl, nt, r.offsets, rows);
  else pdl::launch(gemv_kernel<2, 2, 8, ACT>, grid, block, 0, stream, a, tl, nt, r.offsets, rows);
}

}  // namespace

bool moe_gemv_on() {
  static const bool on = [] {
    const char* e = std::getenv("PEERPLAN_MOE_GEMV");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

bool moe_gemm_act_takes(const MoeGemmArgs& a, int kind) {
  return a.w && !a.w_fp8 && !a.w_int8 && !a.w_int4 && !a.w_mxfp4 && kind >= 0 && kind < 2 && moe_gemv_on() &&
         moe_gemv_rows(a.max_rows) && a.n > 0 && a.n % 2 == 0;
}

void moe_grouped_gemm_kind(const MoeGemmArgs& a, const MoeRouting& r, int kind, cudaStream_t stream) {
  const bool w8 = a.w_fp8 != nullptr || a.w_int8 != nullptr, int4 = a.w_int4 != nullptr, mx = a.w_mxfp4 != nullptr;
  const bool weights_ok =
      int(a.w != nullptr) + int(a.w_fp8 != nullptr) + int(a.w_int8 != nullptr) + int(int4) + int(mx) == 1 &&
      (!w8 || a.w_scale) && (!int4 || a.w_int4_scale) && (!mx || a.w_mxfp4_scale);
  if (a.k % 32 != 0 || a.k <= 0 || a.n <= 0 || !a.x || !a.y || !weights_ok || kind < 0 || kind >= kMoeTileKinds)
    throw std::invalid_argument("moe_grouped_gemm: k " + std::to_string(a.k) + " must be a positive multiple of 32, n " +
                                std::to_string(a.n) + " positive, x, y and one of w / w_fp8 or w_int8 (with w_scale) / "
                                "w_int4 (with w_int4_scale) / w_mxfp4 (with w_mxfp4_scale) set, tile kind " + std::to_string(kind));
  if (a.entries > r.cap_entries)
    throw std::invalid_argument("moe_grouped_gemm: " + std::to_string(a.entries) + " routed entries exceed the routing's " +
                                std::to_string(r.cap_entries));
  if (a.act && !moe_gemm_act_takes(a, kind))
    throw std::invalid_argument("moe_grouped_gemm: the activation in the epilogue (act set) needs bf16 experts on the "
                                "gemv kernel (busiest expert 1..4 rows, tile kind 0 or 1, PEERPLAN_MOE_GEMV not 0) "
                                "and an even n; found max_rows " + std::to_string(a.max_rows) + ", kind " +
                                std::to_string(kind) + ", n " + std::to_string(a.n) + " (moe_gemm_act_takes)");
  if (a.entries <= 0) return;
  const bool gemv_on = moe_gemv_on();
  if (w8) return moe_grouped_gemm_w8(a, r, kind, gemv_on, stream);
  if (int4) return moe_grouped_gemm_int4(a, r, kind, stream);
  if (mx) return moe_grouped_gemm_mxfp4(a, r, kind, stream);
  const int64_t tiles = moe_max_tiles(a.entries, r.local_experts, moe_tile_rows(kind));
  if (kind < 2 && gemv_on && moe_gemv_rows(a.max_rows)) {
    // PEERPLAN_MOE_GEMV_SHAPE=RWxU (4x2, 4x4, 2x4, 8x2, 2x8) forces the 2-rows-per-pass variant's
    // weight rows per warp and unroll, for tuning runs on a new GPU. Unset: 4x4 when the busiest
    // expert has one row, 8x2 for two (the fastest on Mixtral's decode steps, H200 2026-12-04:
    // batch 1 4x4 7.68 / 8x2 7.76 / 4x2 8.33 ms; batch 2 11.99 / 11.62 / 12.83 ms).
    static const int env_shape = [] {
      const char* e = std::getenv("PEERPLAN_MOE_GEMV_SHAPE");
      if (!e || !*e) return -1;
      const std::string v = e;
      const char* names[] = {"4x2", "4x4", "2x4", "8x2", "2x8"};
      for (int i = 0; i < 5; ++i)
        if (v == names[i]) return i;
      throw std::invalid_argument("PEERPLAN_MOE_GEMV_SHAPE: expected 4x2, 4x4, 2x4, 8x2 or 2x8; found " + v);
    }();
    if (a.gemv_shape > 4) throw std::invalid_argument("moe_grouped_gemm: gemv_shape " + std::to_string(a.gemv_shape) + " (0..4)");
    const int shape = a.gemv_shape >= 0 ? a.gemv_shape : env_shape >= 0 ? env_shape : a.max_rows <= 1 ? 1 : 3;
    const int rw = a.max_rows > 2 ? 4 : shape == 3 ? 8 : shape == 2 || shape == 4 ? 2 : 4;
    const dim3 grid(unsigned(tiles), unsigned((a.n + kGvWarps * rw - 1) / (kGvWarps * rw)));
    if (a.act) launch_gemv<true>(a, r, kind, shape, grid, stream);
    else launch_gemv<false>(a, r, kind, shape, grid, stream);
  } else if (kind == 2) {
    const dim3 grid(unsigned(tiles), unsigned((a.n + kTM - 1) / kTM));
    tiled_kernel<<<grid, kTiledThreads, 0, stream>>>(a, r.tiles[2], r.num_tiles + 2, r.offsets);
  } else if (moe_stream_split(a.n, a.touched)) {
    const dim3 grid(unsigned(tiles), unsigned((a.n + 32 - 1) / 32));
    if (kind == 0) pdl::launch(stream_kernel<2, 8, 2, kSplitK>, grid, dim3(2 * kSplitK * 32), 0, stream, a, r.tiles[0], r.num_tiles, r.offsets);
    else pdl::launch(stream_kernel<4, 4, 2, kSplitK>, grid, dim3(2 * kSplitK * 32), 0, stream, a, r.tiles[1], r.num_tiles + 1, r.offsets);
  } else {
    const dim3 grid(unsigned(tiles), unsigned((a.n + 16 * kStreamWarps - 1) / (16 * kStreamWarps)));
    if (kind == 0) pdl::launch(stream_kernel<2, 8, kStreamWarps, 1>, grid, dim3(kStreamWarps * 32), 0, stream, a, r.tiles[0], r.num_tiles, r.offsets);
    else pdl::launch(stream_kernel<4, 4, kStreamWarps, 1>, grid, dim3(kStreamWarps * 32), 0, stream, a, r.tiles[1], r.num_tiles + 1, r.offsets);
  }
  CUDA_CHECK_LAUNCH("moe_grouped_gemm");
}

void moe_grouped_gemm(const MoeGemmArgs& a, const MoeRouting& r, cudaStream_t stream) {
  moe_grouped_gemm_kind(a, r, moe_gemm_tile_kind(a.max_rows, a.gather != nullptr), stream);
}

}  // namespace peerplan::kernels
