#pragma once
// Helpers of the kernel self-test (self_test.cpp) shared with its other case files
// (self_test_quant.cpp: the quantized GEMMs and the FP8 KV cache, issue 15). Internal to profiler/exec.
#include <cuda_bf16.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "planner/validate/gpu_backend.hpp"
#include "profiler/gpu/raii.hpp"

namespace peerplan::exec::selftest {

gpu::DeviceBuffer upload(int dev, const std::vector<__nv_bfloat16>& v);
gpu::DeviceBuffer upload_int(int dev, const std::vector<int>& v);
gpu::DeviceBuffer poisoned(int dev, size_t n);  // n bf16 NaNs: an unwritten element fails
// n bf16 values uniform in [lo, hi) from rng.
std::vector<__nv_bfloat16> random_bf16(size_t n, std::mt19937_64& rng, double lo, double hi);
// A bf16 value as the fp64 references see it.
inline double bf16_value(__nv_bfloat16 x) { return double(__bfloat162float(x)); }
// An e4m3 code's value (subnormals included; the NaN codes 0x7F / 0xFF read as 480).
double e4m3_value(uint8_t c);
// The e4m3 code of v (saturating to +-448, round to nearest even: cuda_fp8.h's conversion, as the kernels).
uint8_t e4m3_code(float v);
// ||out - ref|| / ||ref|| of the bf16 device buffer `out` against the fp64 reference (tolerance 1e-2).
SelfTestResult compare(const std::string& kernel, const std::string& shape, const gpu::DeviceBuffer& out,
                       const std::vector<double>& ref);
// Reference attention of one query row against keys/values [base, base + n*D) of K and V.
void ref_attend(const double* q, const std::vector<double>& K, const std::vector<double>& V, int64_t base, int n, int D,
                double scale, double* out);

// FP8 / INT8 / W4A16 GEMMs and the FP8 KV cache (decode, prefill, rotary write): self_test_quant.cpp.
void quant_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng);
// Decode over an FP8 KV cache at head_dim 192/256 (the dim tile 256's lazy-conversion kernels and
// its split-K plan: 32-token chunks, 2 blocks per SM, the group split): PEERPLAN_SELFTEST_ONLY=headdim.
void wide_head_fp8_decode_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng);
// The four storage orders of FP8 block scales (W, x: outer-dimension- or k-major), one row each:
// which one cuBLASLt reads (bench/quant prints them; not part of the self-test).
void fp8_block_layout_probe(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng);
// Routed MoE: routing, grouped GEMMs, combine (issue 14): self_test_moe.cpp.
void moe_cases(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng);
// Peer-memory one-shot / two-shot all-reduce, every rank emulated on this GPU (issue 17):
// self_test_allreduce.cpp.
void allreduce_cases(std::vector<SelfTestResult>& out, int dev);
// The activation in the gate_up GEMV's epilogue (dense bf16 / int8, W4A16 v7) against the GEMV then silu_mul:
// self_test_act.cpp (the routed experts' gemv: moe_cases).
void act_cases(std::vector<SelfTestResult>& out, int dev, int sms, std::mt19937_64& rng);
// The decode GEMV and a PDL launch chain, on a stream and in a CUDA graph: self_test_pdl.cpp.
void pdl_cases(std::vector<SelfTestResult>& out, int dev, std::mt19937_64& rng);

}  // namespace peerplan::exec::selftest
