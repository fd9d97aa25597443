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
    const double weights = double(op.k) * double(op.n) * double(std::max<int64_t>(op.batch_count, 1));
    // mem_bytes holds activations plus the stored weights (scales included, a few %); swap the
    // packed weight bytes for bf16 ones.
    b.mem_bytes = std::max(0.0, op.mem_bytes - weights * dtype_bits(op.wdtype) / 8.0) + weights * 2.0;
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
