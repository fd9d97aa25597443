#pragma once
// What the grouped expert GEMM kernels (moe_gemm.cu: bf16 weights, moe_gemm_fp8.cu: FP8) share:
// a CTA's (expert, row tile) from the routing's device-side tile list, the tiled kernels' tile shape.
#include <cuda_bf16.h>

#include "profiler/kernels/mma_ptx.cuh"
#include "profiler/kernels/moe_gemm.hpp"

namespace peerplan::kernels::moe_tile {

struct TileRef {
  int expert, row0, row_end;
};

// This CTA's (expert, rows) from the tile list; false when the list has fewer tiles.
// (The list is passed resolved: indexing MoeRouting::tiles by a runtime kind would copy the
// kernel parameter to local memory.)
__device__ __forceinline__ bool tile_of(const int* tiles, const int* num_tiles, const int* offsets, int tile,
                                        int rows_per_tile, TileRef& t) {
  if (tile >= *num_tiles) return false;
  const int packed = tiles[tile];
  t.expert = packed >> 20;
  t.row0 = packed & 0xFFFFF;
  t.row_end = min(t.row0 + rows_per_tile, offsets[t.expert + 1]);
  return true;
}

// Weights are read once per call: stream them past L1.
__device__ __forceinline__ uint4 load_stream(const void* p) { return ptx::ld_stream16(p); }

// The tiled kernels (64-row tiles): 128 weight rows x 64 routed rows x 32 k per stage, 8 warps.
constexpr int kTM = 128, kTN = 64, kTK = 32, kStages = 3, kTiledThreads = 256;

// Shared tile rows are 64 bytes (4 chunks of 16 B); chunk c of row r sits at c ^ ((r / 2) % 4), so
// the 8 row addresses of an ldmatrix fall in 8 different 16-byte bank groups.
__device__ __forceinline__ int swz(int r, int c) { return r * kTK + ((c ^ ((r >> 1) & 3)) * 8); }

}  // namespace peerplan::kernels::moe_tile

namespace peerplan::kernels {
// The 8-bit-weight launch of moe_grouped_gemm_kind (moe_gemm_fp8.cu: FP8 codes, or int8 when a.w_int8),
// after its argument checks: `kind` as moe_gemm_tile_kind, `gemv_on` the PEERPLAN_MOE_GEMV switch.
void moe_grouped_gemm_w8(const MoeGemmArgs& a, const MoeRouting& r, int kind, bool gemv_on, cudaStream_t stream);
// The int4-weight launch (moe_gemm_int4.cu): the stream kernel on 16-row tiles for kinds 0 and 1 (no gemv),
// tiled for 2.
void moe_grouped_gemm_int4(const MoeGemmArgs& a, const MoeRouting& r, int kind, cudaStream_t stream);
// The MXFP4-weight launch (moe_gemm_mxfp4.cu): as the int4 one.
void moe_grouped_gemm_mxfp4(const MoeGemmArgs& a, const MoeRouting& r, int kind, cudaStream_t stream);
}  // namespace peerplan::kernels
