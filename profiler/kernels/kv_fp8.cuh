#pragma once
// FP8 e4m3 KV cache element access for the attention kernels (issue 15): a kernel templated on its
// KV element type (bf16 or uint8_t e4m3 codes) loads 8 consecutive elements as 8 bf16 either way.
//
// e4m3 -> bf16 without a conversion instruction: byte s.eeee.mmm shifted into a bf16's bits as
// s.0000eeee.mmm0000 is exactly value * 2^-120 (normals: the exponent bias goes 7 -> 127;
// subnormals land on bf16 subnormals of the same scale), so one multiply by 2^120 (exact, a power
// of two) gives the value. The per-tensor scale is not applied here: the kernels fold the K scale
// into the softmax scale and the V scale into the output (both linear), in fp32.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace peerplan::kernels {

// Two e4m3 codes (bytes 0, 1 of the low 16 bits of v) -> bf16x2 in a 32-bit word.
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t v16) {
  const uint32_t b = __byte_perm(v16, 0u, 0x1404u);  // [0, b0, 0, b1]: each code in a lane's high byte
  const uint32_t w = (b & 0x80008000u) | ((b & 0x7F007F00u) >> 4);
  __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&w);
  const uint32_t two120 = 0x7B807B80u;  // bf16 2^120 (exponent 247) in both halves
  h = __hmul2(h, *reinterpret_cast<const __nv_bfloat162*>(&two120));
  return *reinterpret_cast<uint32_t*>(&h);
}

// 8 e4m3 codes (8 bytes) -> 8 bf16 (16 bytes), element order kept.
__device__ __forceinline__ uint4 e4m3x8_to_bf16x8(uint2 c) {
  return make_uint4(e4m3x2_to_bf16x2(c.x & 0xFFFFu), e4m3x2_to_bf16x2(c.x >> 16), e4m3x2_to_bf16x2(c.y & 0xFFFFu),
                    e4m3x2_to_bf16x2(c.y >> 16));
}

// 8 consecutive KV elements at p (16-byte aligned for bf16, 8-byte for fp8) as 8 bf16.
__device__ __forceinline__ uint4 ld_kv8(const __nv_bfloat16* p) { return *reinterpret_cast<const uint4*>(p); }
__device__ __forceinline__ uint4 ld_kv8(const uint8_t* p) {
  return e4m3x8_to_bf16x8(*reinterpret_cast<const uint2*>(p));
}

// 8 bf16 (16 bytes) -> 8 e4m3 codes of value * inv_scale (saturating to +-448), element order kept.
__device__ __forceinline__ uint2 bf16x8_to_e4m3(uint4 v, float inv_scale) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __bfloat1622float2(h[i]);
    f.x *= inv_scale;
    f.y *= inv_scale;
    w[i] = __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3);
  }
  return make_uint2(w[0] | (w[1] << 16), w[2] | (w[3] << 16));
}

// Scale folded into the kernels for an element type: 1 for bf16.
template <class KV>
constexpr bool kv_is_fp8() {
  return sizeof(KV) == 1;
}

}  // namespace peerplan::kernels
