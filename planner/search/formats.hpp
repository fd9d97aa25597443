#pragma once
// Number formats in the search space (issue 16): `plan --dtypes bf16,fp8 --kv-dtypes bf16,fp8`
// ranks candidates of every (weights, KV cache) pair together. Each format is the model config with
// the format applied by apply_precision (planner/model/model_config.hpp, the one path --weights and
// --kv-dtype take), so its memory fit, KV capacity and op prices are those a `--weights X
// --kv-dtype Y` search would use.
//
// What a checkpoint can take: its own weight format, or one with fewer bits per weight (quantizing
// further is what users do with a checkpoint; asking bf16 of an FP8 or INT4 checkpoint would plan
// weights that do not exist). Any KV-cache format is allowed: it is a serving-time choice.
#include <optional>
#include <string>
#include <vector>

#include "planner/core/dtype.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"

namespace peerplan {

struct SearchFormat {
  Precision precision;  // what was applied (weights nullopt: the checkpoint's own; kv nullopt: the config's)
  std::string weights;  // "bf16", "fp8", "int8", "int4", or the checkpoint's own ("mxfp4", "gguf")
  std::string kv;       // "bf16", "fp16" (the model's dense dtype) or "fp8"
  ModelConfig cfg;
  ModelFigures fig;
  std::string label() const { return weights + "/" + kv; }  // the table's "w/kv" cell: "fp8/bf16"
  // "fp8 weights, bf16 KV": for verdicts
  std::string words() const { return weights + " weights, " + kv + " KV"; }
};

// The checkpoint's weight format as a name ("bf16" for a dense model, "fp8", "int4", ...; "gguf" for
// a file with per-tensor formats) and its bits per weight (the widest tensor for GGUF).
std::string checkpoint_weights_name(const ModelConfig& cfg);
double checkpoint_weight_bits(const ModelConfig& cfg);

// Every (weights, kv) pair, weights outermost, in the order given (duplicates dropped). An empty
// list keeps the config's own for that part. Throws InputError naming --dtypes for a weight format
// the checkpoint cannot take, and --dtypes / --kv-dtypes for a value the options do not offer.
std::vector<SearchFormat> search_formats(const ModelConfig& base, const std::vector<DType>& weights,
                                         const std::vector<DType>& kv);

// Parses "bf16,fp8" as --dtypes (option = "--dtypes") or --kv-dtypes takes it: each value one of
// `choices`; throws InputError naming the option and the value otherwise.
std::vector<DType> parse_dtype_list(const std::string& option, const std::vector<std::string>& values,
                                    const std::vector<std::string>& choices);

}  // namespace peerplan
