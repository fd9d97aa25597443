#pragma once
// A plan -> the command lines and environment that launch it on a serving engine (issue 19):
// vLLM, SGLang, TensorRT-LLM (trtllm-serve) and llama.cpp (llama-server), each at one pinned
// version whose documented flags are listed in planner/export/flags/ (tests check every flag we
// generate against them). A plan the engine cannot express is refused with the reason.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/core/dtype.hpp"
#include "planner/plan/plan.hpp"

namespace peerplan {

enum class Engine { Vllm, Sglang, Trtllm, Llamacpp };

struct EngineInfo {
  Engine engine;
  const char* key;       // what --engine takes: "vllm", "sglang", "trtllm", "llamacpp"
  const char* label;     // "vLLM"
  const char* version;   // the pinned version the flags are written for
  const char* flags_file;  // planner/export/flags/<file>: the documented flags of that version
};
const EngineInfo& engine_info(Engine e);
std::optional<Engine> parse_engine(std::string_view key);
std::vector<std::string> engine_keys();  // for help and errors

// What an export needs besides the plan: the model as the engine loads it, and the serving limits
// the plan was simulated under (the workload's batching, the context the memory check used).
struct ExportRequest {
  Plan plan;
  std::string model_ref;          // HF id, checkpoint directory or .gguf path, as the engine takes it
  int64_t model_layers = 0;
  int64_t model_experts = 0;
  int64_t model_context = 0;      // max_position_embeddings (0: unknown)
  DType weights = DType::BF16;
  DType kv_dtype = DType::BF16;
  // The checkpoint's own quantization_config quant_method ("" when it has none): the engine then
  // reads the format from the checkpoint and must not be told to quantize again.
  std::string checkpoint_quantization;
  int64_t max_num_seqs = 256;
  int64_t max_batched_tokens = 8192;
  bool chunked_prefill = true;
  int64_t max_model_len = 0;      // longest prompt + output served (0: the model's context)
  int64_t seqs_that_fit = 0;      // KV capacity in sequences of max_model_len from the memory check (0: unknown)
  std::string host = "0.0.0.0";
  int port = 8000;                // replica r listens on port + r
  // GPU ids of each replica, each in the plan's order (stage 0's GPUs, then stage 1's, ...).
  // Empty: one replica on the plan's own GPUs. A plan shape serves every replica.
  std::vector<std::vector<int>> replicas;
};

struct Launch {
  int replica = 0;
  int port = 0;
  std::vector<int> gpus;                                     // CUDA_VISIBLE_DEVICES, in order
  std::vector<std::pair<std::string, std::string>> env;      // set for this launch only
  std::vector<std::pair<std::string, std::string>> files;    // written before it (name, content)
  std::vector<std::string> argv;                             // program and arguments
};

struct EngineExport {
  Engine engine = Engine::Vllm;
  std::string plan_name;
  std::vector<Launch> launches;
  std::vector<std::string> notes;  // what the engine does differently from the simulated plan
};

// The launches realising `r` on `e`. Throws InputError (field "--engine") naming the engine,
// its version and why the plan cannot be expressed there.
EngineExport export_plan(Engine e, const ExportRequest& r);

// POSIX shell quoting: the word as is when it holds only safe characters, else single-quoted.
std::string shell_quote(const std::string& word);
// A bash script: header comments (plan, engine, notes), files as quoted here-documents, one
// command per replica (backgrounded with `wait` when there are several).
std::string render_script(const EngineExport& x);
nlohmann::json export_to_json(const EngineExport& x);

}  // namespace peerplan
