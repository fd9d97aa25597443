#pragma once
// Fuzz target "model_config": a HuggingFace config.json through load + derive_figures + the JSON
// report. Invariants of an accepted config: the sizes the planner divides by are positive, the
// derived figures are positive and consistent (UBSan catches any int64 overflow on the way).
#include <string>

#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace peerplan::fuzz {

inline bool fuzz_model_config(const std::string& data) {
  const std::string origin = "fuzz/config.json";
  return accepts(origin, [&] {
    ModelConfig cfg = parse_model_config(data, origin);
    FUZZ_CHECK(cfg.layers > 0 && cfg.hidden > 0 && cfg.heads > 0 && cfg.kv_heads > 0 && cfg.head_dim > 0,
               "accepted a config with a non-positive size");
    FUZZ_CHECK(cfg.heads % cfg.kv_heads == 0, "kv heads must divide heads");
    FUZZ_CHECK(cfg.vocab > 0 && cfg.dtype_bytes > 0, "accepted a config with no vocabulary or dtype size");
    FUZZ_CHECK(cfg.experts_per_token <= cfg.experts, "top-k above the expert count");
    ModelFigures f = derive_figures(cfg);
    FUZZ_CHECK(int64_t(f.layers.size()) == cfg.layers, "one LayerFigures per layer");
    FUZZ_CHECK(f.params_total > 0 && f.params_active > 0 && f.params_active <= f.params_total,
               "params_total " + std::to_string(f.params_total) + ", active " + std::to_string(f.params_active));
    // 4-bit formats (int4, mxfp4) store half a byte per weight plus scales: at least params / 2 bytes.
    FUZZ_CHECK(2 * f.weight_bytes >= f.params_total, "weight bytes below half a byte per parameter");
    FUZZ_CHECK(f.kv_bytes_per_token > 0 && f.flops_per_token > 0, "a model that costs nothing per token");
    (void)figures_to_json(cfg, f).dump();
  });
}

}  // namespace peerplan::fuzz
