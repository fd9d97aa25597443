#include "planner/model/expert_format.hpp"

#include "planner/model/quantization.hpp"

namespace peerplan {

std::optional<DType> unrunnable_expert_format(const ModelConfig& cfg) {
  for (int64_t l = 0; l < cfg.layers; ++l) {
    if (!cfg.is_moe_layer(l)) continue;
    const DType d = matrix_format(cfg.quant, "expert.gate_up", l, cfg.model_type, cfg.dense_dtype()).dtype;
    if (d == DType::BF16 || d == DType::FP16 || d == DType::FP8_E4M3 || d == DType::INT8 || d == DType::INT4)
      return std::nullopt;
    return d;
  }
  return std::nullopt;
}

}  // namespace peerplan
