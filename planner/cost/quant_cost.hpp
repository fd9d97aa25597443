#pragma once
// Pricing quantized GEMMs and an FP8 KV cache (issue 15) when the profile did not time that
// format: the bf16 price of the same shape (measured, fitted or roofline) scaled by the ratio of
// the two rooflines -- the quantized one on the stored weight bytes and the format's tensor-core
// rate. The bf16 kernel's measured efficiency (time / roofline) is kept, the bound moves.
#include <string>

#include "planner/compile/op_graph.hpp"
#include "planner/core/dtype.hpp"

namespace peerplan {

// The "dtype" a profile's "gemms" rows carry for ops of this weight format: "bf16" (bf16/fp16),
// "fp8", "int8", "int4", "mxfp4".
const char* gemm_table_dtype(DType w);
// The "kv_dtype" of its "attention" rows: "bf16" or "fp8".
const char* attention_table_dtype(DType kv);

// Tensor-core rate of a GEMM with weights in `w` relative to bf16 on a GPU of compute capability
// `cc` ("9.0"; empty = unknown): fp8 W8A8 2x from sm_89 (Ada, Hopper), int8 W8A8 2x from sm_80;
// 4-bit formats are weight-only (dequantized to bf16 in registers): 1x. Where the GPU has no such
// tensor cores the format runs weight-only: 1x.
double tensor_rate_factor(DType w, const std::string& cc);

// The same op as the profile's bf16 kernels would run it: bf16 weights (mem_bytes with the
// weight bytes at 2 per element) for a GEMM, a bf16 KV cache (twice the cache bytes) for attention.
Op bf16_equivalent(const Op& op);

// roofline(op) / roofline(bf16_equivalent(op)) at `peak_flops` (bf16) and `bytes_per_s`.
double quant_roofline_ratio(const Op& op, double peak_flops, double bytes_per_s, const std::string& cc);

// True when the op's format is not what the bf16 tables describe.
bool is_quantized_op(const Op& op);

}  // namespace peerplan
