#include "planner/cost/quant_cost.hpp"

#include <algorithm>
#include <cstdlib>

#include "planner/cost/compute_cost.hpp"

namespace peerplan {

const char* gemm_table_dtype(DType w) {
  return w == DType::FP16 ? "bf16" : dtype_name(w);
}

const char* attention_table_dtype(DType kv) { return kv == DType::FP8_E4M3 ? "fp8" : "bf16"; }

double tensor_rate_factor(DType w, const std::string& cc) {
  const double v = cc.empty() ? 9.0 : std::strtod(cc.c_str(), nullptr);  // unknown: assume Hopper-class
  if (w == DType::FP8_E4M3) return v >= 8.9 ? 2.0 : 1.0;
  if (w == DType::INT8) return v >= 8.0 ? 2.0 : 1.0;
  return 1.0;
}

bool is_quantized_op(const Op& op) {
  if (op.kind == OpKind::Gemm || op.kind == OpKind::GroupedGemm) return op.wdtype != DType::BF16 && op.wdtype != DType::FP16;
  if (op.kind == OpKind::Attention) return op.kv_dtype == DType::FP8_E4M3;
  return false;
}

Op bf16_equivalent(const Op& op) {
  Op b = op;
  if (op.kind == OpKind::Gemm || op.kind == OpKind::GroupedGemm) {
    const double batch = double(std::max<int64_t>(op.batch_count, 1));
    const double weights = double(op.k) * double(op.n) * batch;
    // What the bf16 kernel of this shape streams: activations in and out and the weights, 2 bytes
    // each, from the shape alone. Not op.mem_bytes minus the dtype label's bits: a GGUF Q5_K / Q6_K
    // matrix is labelled int4 but stores 5.5 / 6.56 bits, and subtracting 4 left the rest counted
    // as bf16 bytes, so the ratio to the quantized roofline came out ~15 % low. (GroupedGemm: m is
    // the rows over all touched experts; Gemm: m rows per batch entry.)
    const double rows = op.kind == OpKind::GroupedGemm ? double(op.m) : double(op.m) * batch;
    b.mem_bytes = 2.0 * (rows * (double(op.k) + double(op.n)) + weights);
    b.wdtype = DType::BF16;
  } else if (op.kind == OpKind::Attention && op.kv_dtype == DType::FP8_E4M3) {
    // The cache part of mem_bytes doubles; queries/outputs stay. The cache dominates: bound it by
    // twice the whole (an over-estimate of the bf16 bytes only by the q/o share).
    const double q_o = double(op.attn_batch) * double(std::max<int64_t>(op.attn_q_len, 1)) * double(op.attn_heads) *
                       double(op.attn_head_dim) * 2.0 * 2.0;
    const double cache = std::max(0.0, op.mem_bytes - q_o);
    b.mem_bytes = q_o + 2.0 * cache;
    b.kv_dtype = DType::BF16;
  }
  return b;
}

double quant_roofline_ratio(const Op& op, double peak_flops, double bytes_per_s, const std::string& cc) {
  const Op b = bf16_equivalent(op);
  const double rate = op.kind == OpKind::Attention ? 1.0 : tensor_rate_factor(op.wdtype, cc);
  const double q = roofline_s(op.flops, op.mem_bytes, peak_flops * rate, bytes_per_s);
  const double d = roofline_s(b.flops, b.mem_bytes, peak_flops, bytes_per_s);
  return d > 0 ? q / d : 1.0;
}

}  // namespace peerplan
