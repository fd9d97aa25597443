#include "planner/export/export_request.hpp"

#include <algorithm>
#include <filesystem>
#include <initializer_list>

#include <fmt/format.h>

#include "planner/compile/compiler.hpp"
#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "planner/model/gguf.hpp"
#include "planner/model/hf_cache.hpp"
#include "planner/model/model_figures.hpp"

namespace peerplan {

namespace fs = std::filesystem;

namespace {

// The hub repositories the shipped model cards were copied from (models/llm/<name>/config.json):
// the instruct variants, which share their base model's config and are what one serves.
constexpr std::pair<const char*, const char*> kShippedHubIds[] = {
    {"llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct"},
    {"llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct"},
    {"mistral-7b", "mistralai/Mistral-7B-Instruct-v0.1"},
    {"mixtral-8x7b", "mistralai/Mixtral-8x7B-Instruct-v0.1"},
    {"qwen1.5-moe-a2.7b", "Qwen/Qwen1.5-MoE-A2.7B-Chat"},
    {"deepseek-v2-lite", "deepseek-ai/DeepSeek-V2-Lite-Chat"},
    // Quantized cards (docs/model.md names the checkpoints they describe).
    {"llama-3.1-8b-fp8", "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8"},
    {"llama-3.1-70b-fp8", "RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8"},
    {"llama-3.1-70b-awq", "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4"},
    {"gpt-oss-20b", "openai/gpt-oss-20b"},
    {"gpt-oss-120b", "openai/gpt-oss-120b"},
};

// quantization_config.quant_method of the config.json the model was read from ("gguf" for a GGUF
// file, "" when unquantized). Read here rather than from ModelConfig so the export states what the
// checkpoint itself declares, whatever --weights asked the planner.
std::string checkpoint_quant_method(const ModelConfig& cfg) {
  if (is_gguf_path(cfg.source_file)) return "gguf";
  if (!path_present(cfg.source_file)) return "";
  nlohmann::json j = load_json_file(cfg.source_file, file_kind::kModelConfig);
  auto q = j.find("quantization_config");
  if (q == j.end() || !q->is_object()) return "";
  auto m = q->find("quant_method");
  return m != q->end() && m->is_string() ? m->get<std::string>() : std::string("unknown");
}

}  // namespace

std::string engine_model_ref(const std::string& model_arg, const ModelConfig& cfg, const std::string& engine_model) {
  if (!engine_model.empty()) return engine_model;
  std::error_code ec;
  const bool on_disk = path_present(model_arg);
  if (!on_disk && looks_like_hf_repo_id(model_arg)) return model_arg;  // resolved from the HF cache: the engine does too
  if (std::string id = hf_repo_id_of_path(cfg.source_file); !id.empty()) return id;
  if (on_disk) {
    if (is_gguf_path(model_arg) || fs::is_directory(model_arg, ec)) return model_arg;
    fs::path dir = fs::path(model_arg).parent_path();
    return dir.empty() ? std::string(".") : dir.string();  // the checkpoint directory holding config.json
  }
  for (const auto& [name, id] : kShippedHubIds)
    if (model_arg == name) return id;
  throw InputError("", "--engine-model",
                   fmt::format("the model the engine should load (an HF id, a checkpoint directory or a .gguf file): "
                               "'{}' is a shipped model card without a known hub repository",
                               model_arg));
}

std::optional<DType> plan_json_dtype(const nlohmann::json& plan, const std::string& origin, bool kv) {
  if (!plan.is_object()) return std::nullopt;
  auto read = [&](const nlohmann::json& obj, const std::string& prefix,
                  std::initializer_list<const char*> keys) -> std::optional<DType> {
    for (const char* k : keys) {
      auto it = obj.find(k);
      if (it == obj.end()) continue;
      std::optional<DType> d = it->is_string() ? parse_dtype(it->get<std::string>()) : std::nullopt;
      if (!d) throw InputError(origin, prefix + k, "a number format: bf16, fp16, fp8, int8, int4 or mxfp4; got " + it->dump());
      return d;
    }
    return std::nullopt;
  };
  std::optional<DType> d = kv ? read(plan, "", {"kv_dtype", "kv_cache_dtype"}) : read(plan, "", {"weights", "weight_dtype", "wdtype"});
  if (d) return d;
  auto it = plan.find("dtypes");
  if (it == plan.end() || !it->is_object()) return std::nullopt;
  return kv ? read(*it, "dtypes/", {"kv", "kv_cache", "kv_dtype"}) : read(*it, "dtypes/", {"weights", "weight_dtype"});
}

ExportRequest make_export_request(const nlohmann::json& plan_json, const std::string& origin, const ModelConfig& cfg,
                                  const Workload& w, const ExportSources& src, const Machine* machine) {
  ExportRequest r;
  r.weights = src.weights.value_or(plan_json_dtype(plan_json, origin, false).value_or(DType::BF16));
  r.kv_dtype = src.kv_dtype.value_or(plan_json_dtype(plan_json, origin, true).value_or(DType::BF16));
  // The dtype keys are read above; a plan reader that does not know them yet reads the rest.
  try {
    r.plan = parse_plan_json(plan_json, origin);
  } catch (const InputError&) {
    nlohmann::json pj = plan_json;
    size_t erased = 0;
    for (const char* k : {"weights", "weight_dtype", "wdtype", "kv_dtype", "kv_cache_dtype", "dtypes"})
      erased += pj.is_object() ? pj.erase(k) : 0;
    if (erased == 0) throw;
    r.plan = parse_plan_json(pj, origin);
  }
  const std::vector<int> gpus = r.plan.all_gpus();
  const int machine_gpus = machine ? machine->gpu_count() : (gpus.empty() ? 0 : gpus.back() + 1);
  validate_plan_for_model(r.plan, cfg, machine_gpus, origin);
  r.replicas = r.plan.replicas;  // a replicated plan: one launch per copy, each on its own GPUs

  r.model_ref = engine_model_ref(src.model_arg, cfg, src.engine_model);
  r.checkpoint_quantization = checkpoint_quant_method(cfg);
  r.model_layers = cfg.layers;
  r.model_experts = cfg.experts;
  r.model_context = cfg.max_context;
  r.max_num_seqs = w.max_num_seqs;
  r.max_batched_tokens = w.max_batched_tokens;
  r.chunked_prefill = w.chunked_prefill;
  r.max_model_len = w.max_context();
  r.host = src.host;
  r.port = src.port;
  if (machine) {
    MemoryOptions mo;
    mo.max_seqs = w.max_num_seqs;
    mo.context = std::min(w.max_context(), cfg.max_context > 0 ? cfg.max_context : w.max_context());
    mo.max_batched_tokens = w.max_batched_tokens;
    MemoryReport m = check_memory(r.plan, cfg, derive_figures(cfg), *machine, mo);
    if (m.max_seqs_that_fit < 1)
      throw InputError(origin, "", fmt::format("the plan does not fit on {}: {}", machine->name, m.why));
    r.seqs_that_fit = m.max_seqs_that_fit;
  }
  return r;
}

}  // namespace peerplan
