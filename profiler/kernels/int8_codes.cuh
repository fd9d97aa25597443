#pragma once
// int8 weight codes -> bf16 in registers, exactly: byte b ^ 0x80 (b + 128, unsigned) as the low mantissa
// byte of the float 2^23 is 2^23 + b + 128; subtracting 2^23 + 128 leaves b, and |b| <= 128 has 8
// significant bits, so the float's high half is b's bf16 (no rounding). 11 integer / float ops per 4
// codes, as e4m3's shifts (kv_fp8.cuh). Shared by the int8 expert kernels (moe_gemm_fp8.cu) and the
// dense decode GEMV (dense_gemv.cu).
#include <cuda_runtime.h>

#include <cstdint>

namespace peerplan::kernels {

__device__ __forceinline__ uint32_t int8x2_to_bf16x2(uint32_t u, uint32_t sel0, uint32_t sel1) {
  const float f0 = __uint_as_float(__byte_perm(u, 0x4B000000u, sel0)) - 8388736.f;
  const float f1 = __uint_as_float(__byte_perm(u, 0x4B000000u, sel1)) - 8388736.f;
  return __byte_perm(__float_as_uint(f0), __float_as_uint(f1), 0x7632u);
}

// 8 int8 codes (k order) -> 8 bf16.
__device__ __forceinline__ uint4 int8x8_to_bf16x8(uint2 c) {
  const uint32_t x = c.x ^ 0x80808080u, y = c.y ^ 0x80808080u;
  return make_uint4(int8x2_to_bf16x2(x, 0x7650u, 0x7651u), int8x2_to_bf16x2(x, 0x7652u, 0x7653u),
                    int8x2_to_bf16x2(y, 0x7650u, 0x7651u), int8x2_to_bf16x2(y, 0x7652u, 0x7653u));
}

}  // namespace peerplan::kernels
