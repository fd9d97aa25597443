// `peerplan model`: what the planner derives from a HuggingFace config.json.
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "planner/cli/commands.hpp"
#include "planner/cli/option_checks.hpp"
#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/model/gguf.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/model_summary.hpp"

namespace peerplan::cli {

namespace {

struct ModelOptions {
  std::string model;
  bool json = false;
  bool list = false;
  std::string out;
  std::vector<int64_t> contexts;  // empty: 1k, 8k, 32k and the model's own limit, up to that limit
  Precision precision;
};

std::vector<int64_t> default_contexts(const ModelConfig& c) {
  std::vector<int64_t> v;
  for (int64_t x : {1024, 8192, 32768})
    if (c.max_context == 0 || x < c.max_context) v.push_back(x);
  if (c.max_context > 0) v.push_back(c.max_context);
  return v;
}

void list_models() {
  std::cout << fmt::format("{:<20} {:<24} {:>9} {:>11} {:>11} {:>11}\n", "name", "architecture", "params",
                           "active/tok", "weights", "KV/token");
  for (const auto& name : shipped_model_names()) {
    ModelConfig c = load_model_config(resolve_model_path(name));
    ModelFigures f = derive_figures(c);
    std::cout << fmt::format("{:<20} {:<24} {:>9} {:>11} {:>11} {:>11}\n", name, c.architecture,
                             human_count(double(f.params_total)), human_count(double(f.params_active)),
                             human_bytes(double(f.weight_bytes)), human_bytes(double(f.kv_bytes_per_token)));
  }
  std::cout << "\nShow one with: peerplan model NAME   (or any HuggingFace config.json path)\n";
}

void run(const ModelOptions& o) {
  if (o.list) {
    list_models();
    return;
  }
  if (o.model.empty())
    throw InputError("", "MODEL", "give a config.json path or a shipped model name (see: peerplan model --list)");
  for (int64_t c : o.contexts)
    if (c < 1) throw InputError("", "--context", "context lengths must be >= 1; found " + std::to_string(c));
  const std::string path = resolve_model_path(o.model);
  ModelConfig cfg = load_model_config(path);
  apply_precision(cfg, o.precision);
  ModelFigures fig = derive_figures(cfg);
  nlohmann::json j = figures_to_json(cfg, fig);
  std::optional<GgufFile> gguf;  // a GGUF file: also what its tensors store (planner/model/gguf.hpp)
  if (is_gguf_path(path)) gguf = read_gguf(path), j["gguf"] = gguf_summary_json(*gguf);
  if (!o.out.empty()) write_file_atomic(o.out, j.dump(2) + "\n");
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << model_summary_text(cfg, fig, o.contexts.empty() ? default_contexts(cfg) : o.contexts);
    if (gguf) std::cout << gguf_summary_text(*gguf);
    if (!o.out.empty()) std::cout << "\nwrote " << o.out << "\n";
  }
}

}  // namespace

void add_model_command(CLI::App& app) {
  auto opt = std::make_shared<ModelOptions>();
  auto* sub = app.add_subcommand(
      "model",
      "Show what the planner derives from a model's HuggingFace config.json: parameters, weight bytes,\n"
      "KV cache per token, FLOPs per token (at context 1 and per context token), per-layer figures and\n"
      "every weight matrix's shape (what tensor and expert parallelism will split).\n"
      "\n"
      "Examples:\n"
      "  peerplan model llama-3.1-8b                 # a shipped model card (models/llm/<name>/config.json)\n"
      "  peerplan model ~/hf/Qwen2-7B/config.json     # any config.json (or the directory holding it)\n"
      "  peerplan model mixtral-8x7b --json           # machine-readable; keys documented in docs/model.md\n"
      "  peerplan model deepseek-v2-lite --context 4096,65536\n"
      "  peerplan model --list                        # the shipped models\n"
      "  peerplan model meta-llama/Llama-3.1-8B       # from the local HuggingFace cache (HF_HUB_CACHE, HF_HOME)\n"
      "  peerplan model Llama-3.1-8B-Q4_K_M.gguf      # a GGUF file's header: shapes, tensor types, bytes\n"
      "  peerplan model llama-3.1-70b --weights fp8 --kv-dtype fp8   # what if it were quantized\n"
      "\n"
      "Supported architectures: Llama, Mistral, Qwen2, Qwen3, Phi-3, Mixtral, Qwen2-MoE, Qwen3-MoE,\n"
      "DeepSeek V2/V3 (multi-head latent attention), gpt-oss (MXFP4 experts, sliding-window layers).\n"
      "A config's quantization_config (fp8, compressed-tensors, awq, gptq, mxfp4, bitsandbytes) is read:\n"
      "weights are counted as stored, scales included. Counting conventions: docs/model.md.");
  sub->add_option("MODEL", opt->model,
                  "config.json path, a directory holding one, a shipped model name, an HF id (org/name) in the "
                  "local HuggingFace cache, or a .gguf file");
  sub->add_flag("--json", opt->json, "print JSON (params_total, weight_bytes, kv_bytes_per_token, flops_per_token, ...)");
  sub->add_option("--out", opt->out, "also write the JSON to this file (written atomically)");
  sub->add_option("--context", opt->contexts, "context lengths at which to show FLOPs per token, comma-separated\n(default: 1k, 8k, 32k and the model's max_position_embeddings, up to that)")
      ->delimiter(',');
  sub->add_flag("--list", opt->list, "list the shipped models with their sizes");
  add_precision_options(sub, opt->precision);
  sub->callback([opt] { run(*opt); });
}

}  // namespace peerplan::cli
