// `peerplan export`: a plan -> the launch commands of a serving engine (planner/export/).
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "planner/cli/commands.hpp"
#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "planner/export/export_request.hpp"

namespace peerplan::cli {

namespace {

struct ExportCmd {
  std::string engine, plan, model, workload = "chat", machine, engine_model, weights, kv_dtype, host = "0.0.0.0", out;
  int port = 8000;
  bool json = false;
};

std::optional<DType> dtype_option(const std::string& v, const char* option) {
  if (v.empty()) return std::nullopt;
  if (auto d = parse_dtype(v)) return d;
  throw InputError("", option, "a number format: bf16, fp16, fp8, int8, int4 or mxfp4; got '" + v + "'");
}

void run(const ExportCmd& o) {
  Engine e = parse_export_engine(o.engine);
  const std::string origin = o.plan;
  nlohmann::json pj = load_plan_json(o.plan);
  ModelConfig cfg = load_model_config(resolve_model_path(o.model));
  Workload w = load_workload(resolve_workload_path(o.workload));
  std::optional<Machine> machine;
  if (!o.machine.empty()) machine = load_machine(resolve_machine_path(o.machine));
  ExportSources src;
  src.model_arg = o.model;
  src.engine_model = o.engine_model;
  src.weights = dtype_option(o.weights, "--weights");
  src.kv_dtype = dtype_option(o.kv_dtype, "--kv-dtype");
  src.host = o.host;
  src.port = o.port;
  ExportRequest r = make_export_request(pj, origin, cfg, w, src, machine ? &*machine : nullptr);
  emit_export(e, r, o.json, o.out);
}

}  // namespace

Engine parse_export_engine(const std::string& key) {
  if (auto e = parse_engine(key)) return *e;
  throw InputError("", "--engine", fmt::format("one of {}; got '{}'", fmt::join(engine_keys(), ", "), key));
}

nlohmann::json load_plan_json(const std::string& path) {
  nlohmann::json j = load_json_file(path, file_kind::kPlan);
  // `peerplan plans --json` writes {"plans": [...]}: one plan in it is accepted, as load_plan does.
  if (j.is_object() && j.contains("plans") && !j.contains("stages")) {
    const auto& ps = j["plans"];
    if (!ps.is_array() || ps.size() != 1)
      throw InputError(path, "plans", "exactly one plan (export one plan at a time; extract it first)");
    return ps[0];
  }
  return j;
}

void emit_export(Engine e, const ExportRequest& r, bool json, const std::string& out) {
  EngineExport x = export_plan(e, r);
  std::string text = json ? export_to_json(x).dump(2) + "\n" : render_script(x);
  if (!out.empty()) {
    write_file_atomic(out, text);
    std::cerr << fmt::format("export: {} ({} {}, {} launch{})\n", out, engine_info(e).label, engine_info(e).version,
                             x.launches.size(), x.launches.size() == 1 ? "" : "es");
  } else {
    std::cout << text;
  }
}

void add_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportCmd>();
  auto* sub = app.add_subcommand("export", "Turn a plan into the commands that launch it on vLLM, SGLang, TensorRT-LLM "
                                           "or llama.cpp");
  sub->footer(
      "\nWrites a bash script (or --json): the visible GPUs in the plan's order (CUDA_VISIBLE_DEVICES), tensor /\n"
      "pipeline / expert / data-parallel sizes, the per-stage layer split, weight and KV-cache formats, the\n"
      "workload's batching limits (max sequences, batched tokens, chunked prefill, context), and with P2P off\n"
      "NCCL_P2P_DISABLE=1 plus the engine's custom all-reduce switch; one launch per replica, each on its own\n"
      "port. Versions targeted: vLLM 0.11.0, SGLang 0.5.3, TensorRT-LLM 1.0.0 (trtllm-serve), llama.cpp b6710\n"
      "(llama-server); their flag lists are in planner/export/flags/. A plan the engine cannot express (an\n"
      "uneven layer split on TensorRT-LLM, expert parallelism on llama.cpp, ...) is refused with the reason.\n\n"
      "Examples:\n"
      "  peerplan plan --model llama-3.1-70b --machine my-host.json --best-out best.json\n"
      "  peerplan export --engine vllm --plan best.json --model llama-3.1-70b\n"
      "  peerplan export --engine llamacpp --plan best.json --model ~/models/Llama-3.1-70B-Q4_K_M.gguf\n"
      "  peerplan plan --model meta-llama/Llama-3.1-8B-Instruct --machine my-host.json --export sglang\n"
      "Details: docs/export.md\n");
  sub->add_option("--engine,-e", o->engine, "vllm, sglang, trtllm or llamacpp")->required();
  sub->add_option("--plan,-p", o->plan, "Plan JSON (plan --best-out, plans --out, or one plan of plans --json)")->required();
  sub->add_option("--model,-m", o->model, kModelHelp)->required();
  sub->add_option("--workload,-w", o->workload, "Workload whose batching limits the plan was simulated under")
      ->capture_default_str();
  sub->add_option("--machine", o->machine,
                  "Machine: checks the GPU ids and that the plan fits (and sizes llama.cpp's KV slots)");
  sub->add_option("--engine-model", o->engine_model,
                  "What the engine loads, if not the model given (an HF id, a checkpoint directory, a .gguf file)");
  sub->add_option("--weights", o->weights, "Weight format, if not the plan's (bf16, fp16, fp8, int8, int4)");
  sub->add_option("--kv-dtype", o->kv_dtype, "KV-cache format, if not the plan's (bf16, fp8)");
  sub->add_option("--host", o->host, "Address the server listens on")->capture_default_str();
  sub->add_option("--port", o->port, "Port of replica 0 (replica r: port + r)")->capture_default_str();
  sub->add_flag("--json", o->json, "Print the launches as JSON (env, argv, files per replica) instead of a script");
  sub->add_option("--out,-o", o->out, "Write to this file instead of standard output");
  sub->callback([o] { run(*o); });
}

}  // namespace peerplan::cli
