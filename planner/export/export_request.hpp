#pragma once
// Building an ExportRequest from what the commands have: a plan's JSON (a `plan --best-out` file,
// or the search's ranked plan), the model, the workload and, when given, the machine.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/export/engine_export.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/workload.hpp"
#include "planner/topology/machine.hpp"

namespace peerplan {

struct ExportSources {
  std::string model_arg;      // --model as typed (a shipped name, an HF id, a path)
  std::string engine_model;   // --engine-model: what the engine loads ("" : derived from model_arg)
  std::optional<DType> weights, kv_dtype;  // --weights / --kv-dtype; else the plan's, else bf16
  std::string host = "0.0.0.0";
  int port = 8000;
};

// What the engine is told to load: --engine-model; an HF id as typed; the HF cache id of a
// snapshot; a .gguf file; the directory of a config.json; a shipped model's hub id. InputError
// (naming --engine-model) when none applies.
std::string engine_model_ref(const std::string& model_arg, const ModelConfig& cfg, const std::string& engine_model);

// The weight and KV-cache formats a plan JSON carries ("weights"/"weight_dtype" and
// "kv_dtype"/"kv_cache_dtype", top level or under "dtypes"); nullopt when absent. InputError
// naming `origin` and the key for an unknown format.
std::optional<DType> plan_json_dtype(const nlohmann::json& plan, const std::string& origin, bool kv);

// Parses and checks the plan against the model (and the machine when given: GPU ids exist, the
// plan fits in memory, which also bounds llama.cpp's slots), and fills the serving limits from
// the workload. InputError naming `origin` for a bad plan or one that does not fit.
ExportRequest make_export_request(const nlohmann::json& plan_json, const std::string& origin, const ModelConfig& cfg,
                                  const Workload& w, const ExportSources& src, const Machine* machine);

}  // namespace peerplan
