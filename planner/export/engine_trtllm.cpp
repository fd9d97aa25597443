// TensorRT-LLM 1.0.0 (`trtllm-serve`, PyTorch backend): flags from tensorrt_llm/commands/serve.py,
// YAML keys (--extra_llm_api_options) from tensorrt_llm/llmapi/llm_args.py (TorchLlmArgs), the
// layer split from tensorrt_llm/mapping.py (Mapping.pp_layers: torch.tensor_split, the first
// L % pp stages one layer more). Listed in planner/export/flags/trtllm-1.0.0.txt.
#include <fmt/format.h>

#include "planner/export/engine_builders.hpp"
#include "planner/export/engine_common.hpp"

namespace peerplan::export_detail {

namespace {

std::vector<int64_t> tensor_split(int64_t layers, int pp) {
  std::vector<int64_t> v(size_t(pp), layers / pp);
  for (int64_t i = 0; i < layers % pp; ++i) ++v[size_t(i)];
  return v;
}

}  // namespace

void build_trtllm(const ExportRequest& r, const PlanShape& s, Launch& l, std::vector<std::string>& notes) {
  const Engine e = Engine::Trtllm;
  require_contiguous_experts(e, r);
  int64_t layers = 0;
  for (int64_t n : s.stage_layers) layers += n;
  if (s.pp > 1 && s.stage_layers != tensor_split(layers, s.pp))
    refuse(e, r, fmt::format("the plan splits the {} layers as [{}]; TensorRT-LLM splits them evenly over pp_size "
                             "(first stages one more: [{}]) and takes no per-stage layer counts",
                             layers, join_ints(s.stage_layers), join_ints(tensor_split(layers, s.pp))));
  set_visible_devices(l);
  if (!r.plan.p2p) l.env.emplace_back("NCCL_P2P_DISABLE", "1");

  const std::string yaml_name = fmt::format("peerplan-trtllm-{}.yaml", l.replica);
  std::string yaml;
  if (r.weights == DType::FP16) yaml += "dtype: float16\n";
  else yaml += "dtype: bfloat16\n";
  yaml += fmt::format("enable_chunked_prefill: {}\n", r.chunked_prefill ? "true" : "false");
  if (s.attn_dp > 1) yaml += "enable_attention_dp: true\n";
  // The custom all-reduce kernels exchange through peer memory; NCCL honours NCCL_P2P_DISABLE. A
  // plan priced with NCCL all-reduce asks for NCCL; otherwise AUTO, TensorRT-LLM's own rule.
  if (s.tp > 1) {
    yaml += custom_allreduce_on(r.plan) ? "allreduce_strategy: AUTO\n" : "allreduce_strategy: NCCL\n";
    allreduce_rule_note(r.plan, s, ArSetting::AutoTrtllm, "TensorRT-LLM", notes);
  } else if (!r.plan.p2p) {
    yaml += "allreduce_strategy: NCCL\n";
  }
  yaml += fmt::format("kv_cache_config:\n  dtype: {}\n", kv_name(e, r, "auto", "fp8"));
  l.files.emplace_back(yaml_name, yaml);

  auto& a = l.argv;
  a = {"trtllm-serve", r.model_ref, "--backend", "pytorch", "--host", r.host, "--port", std::to_string(l.port)};
  add(a, "--tp_size", s.tp);
  add(a, "--pp_size", s.pp);
  if (s.ep > 1) add(a, "--ep_size", s.ep);
  add(a, "--max_batch_size", r.max_num_seqs);
  add(a, "--max_num_tokens", r.max_batched_tokens);
  add(a, "--max_seq_len", served_context(r));
  add(a, "--extra_llm_api_options", yaml_name);
  if (!r.checkpoint_quantization.empty()) notes.push_back(checkpoint_format_note("TensorRT-LLM", r));
  else if (r.weights != DType::BF16 && r.weights != DType::FP16)
    notes.push_back(checkpoint_quantization_note("TensorRT-LLM", r.weights, "ModelOpt hf_quant_config.json"));
}

}  // namespace peerplan::export_detail
