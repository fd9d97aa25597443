#include "profiler/common/quant_shapes.hpp"

#include <fmt/format.h>

#include "profiler/common/mxfp4_expert_layout.hpp"
#include "profiler/common/w4_expert_layout.hpp"

namespace peerplan::kernels {

bool quant_gemm_shape_ok(DType d, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0) return false;
  switch (d) {
    case DType::BF16:
    case DType::FP16: return true;
    case DType::FP8_E4M3:
    case DType::INT8: return k % 16 == 0 && n % 16 == 0;
    case DType::INT4: return k % 128 == 0 && n % 8 == 0;
    default: return false;
  }
}

bool quant_grouped_shape_ok(DType d, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0) return false;
  switch (d) {
    case DType::BF16:
    case DType::FP16:
    case DType::FP8_E4M3:
    case DType::INT8: return k % 32 == 0;
    case DType::INT4: return w4e_shape_ok(n, k);
    case DType::MXFP4: return mxe_shape_ok(n, k);
    default: return false;
  }
}

std::string quant_shape_rule(DType d, bool grouped) {
  switch (d) {
    case DType::BF16:
    case DType::FP16: return grouped ? "k a multiple of 32" : "any shape";
    case DType::FP8_E4M3: return grouped ? "k a multiple of 32" : "k and n multiples of 16";
    case DType::INT8: return grouped ? "k a multiple of 32" : "k and n multiples of 16";
    case DType::INT4: return grouped ? "n a multiple of 16 and k of 128 (128-k scale groups)"
                                     : "k a multiple of 128 (the scale group) and n of 8";
    case DType::MXFP4: return grouped ? "n a multiple of 16 and k of 64 (64-k chunks of 32-k scale blocks)"
                                      : "not a dense weight format the executor runs (MXFP4 is for routed experts)";
    default: return "not a weight format the executor runs";
  }
}

std::string unrunnable_quant_op(const OpGraph& g) {
  for (const Op& o : g.ops) {
    const bool grouped = o.kind == OpKind::GroupedGemm;
    if ((o.kind != OpKind::Gemm && !grouped) || o.n <= 0 || o.k <= 0) continue;
    if (grouped ? quant_grouped_shape_ok(o.wdtype, o.n, o.k) : quant_gemm_shape_ok(o.wdtype, o.n, o.k)) continue;
    return fmt::format("{} stores [{}, {}] weights in {}, whose {} take {}", o.name, o.n, o.k, dtype_name(o.wdtype),
                       grouped ? "grouped expert kernels" : "GEMM kernels", quant_shape_rule(o.wdtype, grouped));
  }
  return "";
}

}  // namespace peerplan::kernels
