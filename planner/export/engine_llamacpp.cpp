// llama.cpp b6710 (`llama-server`): flags from common/arg.cpp at tag b6710. How --tensor-split
// places layers: src/llama-model.cpp load_tensors (cumulative split fractions over n_layer + 1
// offloaded layers, the output layer counting as the last; a layer goes to the first device whose
// cumulative fraction exceeds layer / (n_layer + 1)). Listed in planner/export/flags/llamacpp-b6710.txt.
#include <algorithm>

#include <fmt/format.h>

#include "planner/export/engine_builders.hpp"
#include "planner/export/engine_common.hpp"
#include "planner/export/llamacpp_split.hpp"
#include "planner/model/gguf.hpp"

namespace peerplan::export_detail {

void build_llamacpp(const ExportRequest& r, const PlanShape& s, Launch& l, std::vector<std::string>& notes) {
  const Engine e = Engine::Llamacpp;
  if (s.ep > 1)
    refuse(e, r, "llama.cpp has no expert parallelism: it splits a mixture-of-experts model by layers or rows as it "
                 "does a dense one");
  if (s.tp > 1 && s.pp > 1)
    refuse(e, r, fmt::format("llama.cpp splits by layers (--split-mode layer, a pipeline) or by rows (--split-mode "
                             "row, tensor parallel), not both; the plan has {} stages of {} GPUs",
                             s.pp, s.tp));
  if (!is_gguf_path(r.model_ref))
    refuse(e, r, fmt::format("llama.cpp loads GGUF files and the model is '{}': give the .gguf file (--model "
                             "FILE.gguf, or --engine-model FILE.gguf next to a config.json)",
                             r.model_ref));
  if (!r.plan.p2p)
    refuse(e, r, "P2P off: llama.cpp copies between GPUs with CUDA peer access whenever the driver allows it; "
                 "turning it off is a build option (GGML_CUDA_NO_PEER_COPY), not a launch flag");
  if (s.tp > 1)  // nothing in common/arg.cpp selects an all-reduce: say so rather than drop it silently
    notes.push_back(fmt::format("all-reduce: llama.cpp has no all-reduce switch (its row split combines partial "
                                "results through its own copies, neither NCCL nor engine-style custom kernels); the "
                                "plan's setting '{}' is not exported",
                                to_string(r.plan.allreduce)));
  const char* kv = nullptr;
  switch (r.kv_dtype) {
    case DType::BF16: kv = "bf16"; break;
    case DType::FP16: kv = "f16"; break;
    default:
      refuse(e, r, fmt::format("a {} KV cache: llama.cpp's KV types are f32, f16, bf16 and integer blocks "
                               "(q8_0 ...), no FP8",
                               dtype_name(r.kv_dtype)));
  }
  set_visible_devices(l);
  auto& a = l.argv;
  a = {"llama-server", "--model", r.model_ref, "--host", r.host, "--port", std::to_string(l.port)};
  add(a, "--n-gpu-layers", "999");  // every layer and the output on the GPUs
  if (s.pp > 1) {
    std::vector<int64_t> split = llamacpp_layer_split(s.stage_layers);
    // The split must land every layer where the plan put it (checked, not assumed).
    if (llamacpp_layer_devices(split, s.stage_layers) != llamacpp_plan_devices(s.stage_layers))
      refuse(e, r, "llama.cpp's --tensor-split cannot place these layers exactly");
    add(a, "--split-mode", "layer");
    add(a, "--tensor-split", join_ints(split));
  } else if (s.tp > 1) {
    add(a, "--split-mode", "row");
    add(a, "--tensor-split", join_ints(std::vector<int64_t>(size_t(s.tp), 1)));
    notes.push_back("llama.cpp's row split gathers each split matrix product on the main GPU instead of an NCCL "
                    "all-reduce; the plan's communication prices approximate it");
  } else {
    add(a, "--split-mode", "none");
  }
  add(a, "--main-gpu", 0);
  // llama-server preallocates the whole KV cache for its slots: as many as the plan's memory holds.
  int64_t slots = r.max_num_seqs;
  if (r.seqs_that_fit > 0 && r.seqs_that_fit < slots) {
    notes.push_back(fmt::format("{} slots, not the workload's {}: the KV cache holds {} sequences of {} tokens and "
                                "llama-server allocates it all at start",
                                r.seqs_that_fit, slots, r.seqs_that_fit, served_context(r)));
    slots = r.seqs_that_fit;
  }
  add(a, "--parallel", slots);
  add(a, "--ctx-size", slots * served_context(r));  // divided among the slots
  add(a, "--batch-size", r.max_batched_tokens);
  add(a, "--ubatch-size", std::min<int64_t>(r.max_batched_tokens, 512));
  add(a, "--cache-type-k", kv);
  add(a, "--cache-type-v", kv);
  a.push_back("--cont-batching");
  if (!r.chunked_prefill)
    notes.push_back("llama.cpp always splits a prompt into --batch-size chunks (the workload asks for no chunked "
                    "prefill)");
  if (r.weights != DType::BF16)
    notes.push_back(fmt::format("weights {}: the GGUF file's tensor types decide what llama.cpp stores", dtype_name(r.weights)));
}

}  // namespace peerplan::export_detail
