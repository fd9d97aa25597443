#pragma once
// Fuzz target "gguf": a GGUF file's header through the reader and the mapping to a model config.
// Invariants of an accepted header: every tensor's byte count is its block count times the
// type's block size, tensors lie after an aligned data offset, and a mapped config is usable.
#include <sstream>
#include <string>

#include "planner/model/gguf.hpp"
#include "planner/model/model_figures.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace peerplan::fuzz {

inline bool fuzz_gguf(const std::string& data) {
  const std::string origin = "fuzz/model.gguf";
  return accepts(
      origin,
      [&] {
        std::istringstream in(data);
        GgufFile f = parse_gguf(in, data.size(), origin, {.allow_missing_data = true});
        FUZZ_CHECK(f.version == 2 || f.version == 3, "accepted version " + std::to_string(f.version));
        FUZZ_CHECK(f.data_offset % f.alignment == 0, "data section not aligned");
        for (const auto& t : f.tensors) {
          GgmlTypeInfo i = ggml_type_info(t.ggml_type);
          FUZZ_CHECK(i.block_elems > 0 && t.elements % i.block_elems == 0, "tensor '" + t.name + "' of a partial block");
          FUZZ_CHECK(t.bytes == t.elements / i.block_elems * i.block_bytes, "tensor '" + t.name + "' bytes");
        }
        (void)gguf_weights(f).bits_per_weight();
        if (!f.find("general.architecture")) return;
        ModelConfig cfg = gguf_model_config(f);
        FUZZ_CHECK(cfg.layers > 0 && cfg.hidden > 0 && cfg.heads > 0 && cfg.vocab > 0, "a mapped config with a zero size");
        (void)derive_figures(cfg);
      },
      /*qualified=*/true);  // the config reader names "<origin>: metadata read as config.json"
}

}  // namespace peerplan::fuzz
