#include "planner/model/expert_format.hpp"

#include "planner/model/quantization.hpp"

namespace peerplan {

std::optional<DType> routed_expert_format(const ModelConfig& cfg) {
  for (int64_t l = 0; l < cfg.layers; ++l)
    if (cfg.is_moe_layer(l)) return matrix_format(cfg.quant, "expert.gate_up", l, cfg.model_type, cfg.dense_dtype()).dtype;
  return std::nullopt;
}

}  // namespace peerplan
