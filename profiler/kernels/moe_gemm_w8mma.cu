// The tiled grouped GEMM of 8-bit experts (FP8 e4m3 or int8 codes, per-channel scales) on 8-bit tensor
// cores: mma.sync m16n8k32 e4m3 x e4m3 -> f32, or s8 x s8 -> s32 (moe_gemm.hpp, moe_grouped_gemm_w8mma).
// The other tiled 8-bit kernel (moe_gemm_fp8.cu, tiled_w8_kernel) converts the codes to bf16 on their
// way into shared memory and multiplies on bf16 tensor cores, where engines' W8A8 fused-MoE kernels
// (vLLM's Triton fused_moe with fp8_w8a8 / int8_w8a8, DeepGEMM) quantize the tokens and multiply 8-bit
// by 8-bit: twice the k per instruction, and the weights go to shared memory as they are (cp.async).
//
// Same tile as the bf16 kernel (128 weight rows x 64 routed rows, 3 stages, ldmatrix, the swizzle of
// moe_gemm_tile.cuh): a stage's 64-byte shared rows hold 64 k of 8-bit codes where they held 32 of bf16,
// and an m16n8k32 8-bit fragment is byte for byte the m16n8k16 bf16 one, so the addressing is unchanged.
// The tokens are quantized inside the kernel, dynamically per (row, 64-k stage): both operands arrive by
// cp.async (the tokens as bf16 into a staging tile, 3 stages ahead like the weights); each thread then
// turns the 16 values it copied itself into codes (no barrier between), a row's 4 threads reducing its
// absmax by two shuffles: scale = absmax / 448 (e4m3) or / 127 (int8, round to nearest even), as
// DeepSeek-V3-style 1 x 128 activation blocks but on the stage's 64 k (finer; no pass over x before the
// GEMM: no scratch, capturable). Each stage's product is taken in its own accumulators and added into the
// running sum times the row's stage scale (DeepGEMM's promotion); the weight channel scale multiplies once
// at the end. A first version loaded the tokens into registers one stage ahead (as the bf16-core 8-bit
// kernel stages its weights): no faster than that kernel (H100, session 27 A), the load latency exposed.
// Kept in a file of its own so the other kernels' register allocation, which the profiles timed,
// does not move (moe_gemm_fp8.cu says why).
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <cuda_fp8.h>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/device_caps.hpp"
#include "profiler/kernels/mma_ptx.cuh"
#include "profiler/kernels/moe_gemm_tile.cuh"

namespace peerplan::kernels {
namespace {

using bf16 = __nv_bfloat16;
using namespace moe_tile;

constexpr int kTK8 = 2 * kTK;  // 8-bit k per stage (64-byte shared rows)
constexpr bool kMoeW8MmaDefault = false;  // PEERPLAN_MOE_W8_MMA unset

// d += A * B, m16n8k32, e4m3 inputs, f32 accumulators: sm_89+ (the sm_80 build traps; moe_w8mma_takes
// never sends FP8 experts there on such a GPU).
__device__ __forceinline__ void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}
// d += A * B, m16n8k32, s8 inputs, s32 accumulators.
__device__ __forceinline__ void mma_s8(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The two 8-bit formats: where the weight codes are, the tokens' code range, how 4 values become 4
// codes (one word, k order kept), the MMA and its accumulator type.
struct E4m3Mma {
  using Acc = float;
  static constexpr float kMax = 448.f;
  static __device__ __forceinline__ const uint8_t* codes(const MoeGemmArgs& a) { return a.w_fp8; }
  static __device__ __forceinline__ uint32_t quant4(float a, float b, float c, float d) {
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
    return lo | (hi << 16);
  }
  static __device__ __forceinline__ void mma(Acc (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_e4m3(d, a, b0, b1);
  }
};
struct Int8Mma {
  using Acc = int;
  static constexpr float kMax = 127.f;
  static __device__ __forceinline__ const uint8_t* codes(const MoeGemmArgs& a) {
    return reinterpret_cast<const uint8_t*>(a.w_int8);
  }
  static __device__ __forceinline__ uint32_t q8(float v) {
    return uint32_t(min(127, max(-127, __float2int_rn(v)))) & 0xFFu;
  }
  static __device__ __forceinline__ uint32_t quant4(float a, float b, float c, float d) {
    return q8(a) | (q8(b) << 8) | (q8(c) << 16) | (q8(d) << 24);
  }
  static __device__ __forceinline__ void mma(Acc (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_s8(d, a, b0, b1);
  }
};

// 8 bf16 (one uint4) as floats.
__device__ __forceinline__ void bf16x8_to_float(const uint4& v, float* f) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
    f[2 * i] = p.x, f[2 * i + 1] = p.y;
  }
}

// Dynamic shared memory of the kernel: the weights' stages (8-bit, the bf16 kernel's byte tiles), the tokens'
// bf16 stages (cp.async'd, 128-byte rows), the tokens' 8-bit tile and its row scales (two buffers).
constexpr int kSaBytes = kStages * kTM * kTK * 2;
constexpr int kSbfBytes = kStages * kTN * kTK8 * 2;
constexpr int kSb8Bytes = 2 * kTN * kTK * 2;
constexpr int kSmemBytes = kSaBytes + kSbfBytes + kSb8Bytes + 2 * kTN * 4;

template <class C>
__global__ void __launch_bounds__(kTiledThreads, 2) tiled_w8mma_kernel(MoeGemmArgs a, const int* tiles,
                                                                        const int* num_tiles, const int* offsets) {
  extern __shared__ __align__(128) unsigned char smem[];
  // Byte tiles viewed as the bf16 kernel's (same size, same swizzle): a bf16 "row" of kTK is 64 codes.
  auto sa = reinterpret_cast<bf16(*)[kTM * kTK]>(smem);
  auto sbf = reinterpret_cast<bf16(*)[kTN * kTK8]>(smem + kSaBytes);
  auto sb = reinterpret_cast<bf16(*)[kTN * kTK]>(smem + kSaBytes + kSbfBytes);
  auto sxs = reinterpret_cast<float(*)[kTN]>(smem + kSaBytes + kSbfBytes + kSb8Bytes);
  TileRef tl;
  if (!tile_of(tiles, num_tiles, offsets, blockIdx.x, kTN, tl)) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int64_t n0 = int64_t(blockIdx.y) * kTM;
  const int64_t K = a.k;
  // Weights: thread tid copies row tid / 2's 16-byte chunks 2 (tid % 2) and 2 (tid % 2) + 1 of a stage.
  const int arow = tid / 2, ahalf = tid % 2;
  const bool pa = n0 + arow < a.n;
  const uint8_t* ga = C::codes(a) + (int64_t(tl.expert) * a.n + (pa ? n0 + arow : 0)) * K + ahalf * 32;
  const int sa_lo = swz(arow, 2 * ahalf), sa_hi = swz(arow, 2 * ahalf + 1);
  // Tokens: thread tid copies row tid / 4's 16 values k 16 (tid % 4) .. +15 of a stage (two 16-byte
  // chunks), and later quantizes exactly those (its own copies: no barrier between) into chunk tid % 4.
  const int brow = tid / 4, bch = tid % 4;
  const int xr = tl.row0 + brow;
  const bool pb = xr < tl.row_end;
  const int src = pb ? (a.gather ? a.gather[xr] : xr) : 0;
  const bf16* gb = a.x + int64_t(src) * K + bch * 16;
  const int sbf_off = brow * kTK8 + bch * 16, sb_off = swz(brow, bch);
  const int ktiles = int(K / kTK8);
  auto load = [&](int stage, int kt) {
    ptx::cp_async16(&sa[stage][sa_lo], ga + int64_t(kt) * kTK8, pa);
    ptx::cp_async16(&sa[stage][sa_hi], ga + int64_t(kt) * kTK8 + 16, pa);
    ptx::cp_async16(&sbf[stage][sbf_off], gb + int64_t(kt) * kTK8, pb);
    ptx::cp_async16(&sbf[stage][sbf_off + 8], gb + int64_t(kt) * kTK8 + 8, pb);
  };
  // Stage `stage`'s 16 values of this thread -> 16 codes in 8-bit buffer `buf` and the row's scale.
  auto quantize = [&](int stage, int buf) {
    float f[16];
    bf16x8_to_float(*reinterpret_cast<const uint4*>(&sbf[stage][sbf_off]), f);
    bf16x8_to_float(*reinterpret_cast<const uint4*>(&sbf[stage][sbf_off + 8]), f + 8);
    float amax = 0.f;
#pragma unroll
    for (int i = 0; i < 16; ++i) amax = fmaxf(amax, fabsf(f[i]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));  // the row's 4 threads are lanes 4j .. 4j + 3
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    const float s = amax > 0.f ? amax / C::kMax : 1.f, inv = 1.f / s;
    uint4 q;
    q.x = C::quant4(f[0] * inv, f[1] * inv, f[2] * inv, f[3] * inv);
    q.y = C::quant4(f[4] * inv, f[5] * inv, f[6] * inv, f[7] * inv);
    q.z = C::quant4(f[8] * inv, f[9] * inv, f[10] * inv, f[11] * inv);
    q.w = C::quant4(f[12] * inv, f[13] * inv, f[14] * inv, f[15] * inv);
    *reinterpret_cast<uint4*>(&sb[buf][sb_off]) = q;
    if (bch == 0) sxs[buf][brow] = s;
  };
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    ptx::cp_async_commit();
  }
  const int wm = (warp % 4) * 32, wn = (warp / 4) * 32;
  float acc[2][4][4] = {};
  for (int kt = 0; kt < ktiles; ++kt) {
    const int st = kt % kStages, buf = kt % 2;
    ptx::cp_async_wait<kStages - 2>();  // this thread's copies of stage kt landed
    quantize(st, buf);  // buffer buf was last read in step kt - 2, which every thread finished before step kt - 1's barrier
    __syncthreads();  // stage kt's weights (other threads' copies) and 8-bit tokens visible; step kt - 1 done everywhere
    const int nxt = kt + kStages - 1;
    if (nxt < ktiles) load(nxt % kStages, nxt);  // the slot step kt - 1 read
    ptx::cp_async_commit();
    const bf16* A = sa[st];
    const bf16* B = sb[buf];
    typename C::Acc part[2][4][4] = {};
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
        for (int nt = 0; nt < 4; ++nt) C::mma(part[mt][nt], af[mt], bfr[nt][0], bfr[nt][1]);
    }
    // D[weight row][token]: c0, c1 = tokens 2t, 2t + 1 of the n-tile; c2, c3 the same tokens.
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const float s0 = sxs[buf][wn + nt * 8 + 2 * t], s1 = sxs[buf][wn + nt * 8 + 2 * t + 1];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        acc[mt][nt][0] = fmaf(float(part[mt][nt][0]), s0, acc[mt][nt][0]);
        acc[mt][nt][1] = fmaf(float(part[mt][nt][1]), s1, acc[mt][nt][1]);
        acc[mt][nt][2] = fmaf(float(part[mt][nt][2]), s0, acc[mt][nt][2]);
        acc[mt][nt][3] = fmaf(float(part[mt][nt][3]), s1, acc[mt][nt][3]);
      }
    }
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

bool moe_w8mma_on() {
  // PEERPLAN_MOE_W8_MMA=1 sends 8-bit experts' tiled groups here, 0 keeps them on the bf16 tensor-core kernel
  // (moe_gemm_fp8.cu). Off by default until it is measured faster (docs/quantization.md, "8-bit tensor cores").
  static const bool on = [] {
    const char* e = std::getenv("PEERPLAN_MOE_W8_MMA");
    if (!e || !*e) return kMoeW8MmaDefault;
    if (std::string(e) != "0" && std::string(e) != "1")
      throw std::invalid_argument(std::string("PEERPLAN_MOE_W8_MMA: expected 0 or 1; found ") + e);
    return std::string(e) == "1";
  }();
  return on;
}

bool moe_w8mma_supported(const MoeGemmArgs& a) {
  // FP8 MMA needs compute capability 8.9 (Ada, Hopper and later); int8's runs on 8.0.
  return a.w_scale && (a.w_int8 || (a.w_fp8 && gpu::current_compute_capability() >= 89)) && a.k % kTK8 == 0;
}

bool moe_w8mma_takes(const MoeGemmArgs& a, int kind) { return kind == 2 && moe_w8mma_on() && moe_w8mma_supported(a); }

void moe_grouped_gemm_w8mma(const MoeGemmArgs& a, const MoeRouting& r, cudaStream_t stream) {
  if (!moe_w8mma_supported(a))
    throw std::invalid_argument("moe_grouped_gemm_w8mma: int8 experts, or FP8 ones on a GPU of compute capability 8.9 "
                                "or later, with channel scales and k a multiple of 64 are required; found k " +
                                std::to_string(a.k));
  const int64_t tiles = moe_max_tiles(a.entries, r.local_experts, moe_tile_rows(2));
  const dim3 grid(unsigned(tiles), unsigned((a.n + kTM - 1) / kTM));
  // Over the 48 KB a kernel gets without asking: set once per kernel (and device: the attribute is per device).
  static thread_local int asked_on = -1;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (asked_on != dev) {
    CUDA_CHECK(cudaFuncSetAttribute(tiled_w8mma_kernel<Int8Mma>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    CUDA_CHECK(cudaFuncSetAttribute(tiled_w8mma_kernel<E4m3Mma>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    asked_on = dev;
  }
  if (a.w_int8) tiled_w8mma_kernel<Int8Mma><<<grid, kTiledThreads, kSmemBytes, stream>>>(a, r.tiles[2], r.num_tiles + 2, r.offsets);
  else tiled_w8mma_kernel<E4m3Mma><<<grid, kTiledThreads, kSmemBytes, stream>>>(a, r.tiles[2], r.num_tiles + 2, r.offsets);
  CUDA_CHECK_LAUNCH("moe_grouped_gemm (8-bit experts, 8-bit tensor cores)");
}

}  // namespace peerplan::kernels
