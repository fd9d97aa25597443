// SGLang 0.5.3 (`python3 -m sglang.launch_server`): flags from python/sglang/srt/server_args.py
// (ServerArgs.add_cli_args) at tag v0.5.3; SGLANG_PP_LAYER_PARTITION read by get_pp_indices
// (python/sglang/srt/distributed/utils.py). Listed in planner/export/flags/sglang-0.5.3.txt.
#include <fmt/format.h>

#include "planner/export/engine_builders.hpp"
#include "planner/export/engine_common.hpp"

namespace peerplan::export_detail {

void build_sglang(const ExportRequest& r, const PlanShape& s, Launch& l, std::vector<std::string>& notes) {
  const Engine e = Engine::Sglang;
  require_contiguous_experts(e, r);
  if (s.attn_dp > 1 && s.pp > 1)
    refuse(e, r, "data-parallel attention across pipeline stages: SGLang's DP attention splits the batch inside "
                 "one tensor-parallel group, not across a pipeline");
  set_visible_devices(l);
  if (!r.plan.p2p) l.env.emplace_back("NCCL_P2P_DISABLE", "1");
  if (s.pp > 1) l.env.emplace_back("SGLANG_PP_LAYER_PARTITION", join_ints(s.stage_layers));

  auto& a = l.argv;
  a = {"python3", "-m", "sglang.launch_server", "--model-path", r.model_ref, "--host", r.host, "--port",
       std::to_string(l.port)};
  // SGLang's --tp-size counts every GPU of a stage; DP attention then splits it into dp groups.
  add(a, "--tp-size", s.tp);
  add(a, "--pp-size", s.pp);
  if (s.attn_dp > 1) {
    add(a, "--dp-size", s.attn_dp);
    a.push_back("--enable-dp-attention");
  }
  if (s.ep > 1) add(a, "--ep-size", s.ep);
  if (!r.checkpoint_quantization.empty()) {  // the engine reads the scheme from the checkpoint
    add(a, "--dtype", "bfloat16");
    notes.push_back(checkpoint_format_note("SGLang", r));
  } else switch (r.weights) {
    case DType::BF16: add(a, "--dtype", "bfloat16"); break;
    case DType::FP16: add(a, "--dtype", "float16"); break;
    case DType::FP8_E4M3:
      add(a, "--dtype", "bfloat16");
      add(a, "--quantization", "fp8");
      break;
    default:
      add(a, "--dtype", "bfloat16");
      notes.push_back(checkpoint_quantization_note("SGLang", r.weights, "AWQ, GPTQ, compressed-tensors, ModelOpt"));
  }
  add(a, "--kv-cache-dtype", kv_name(e, r, "auto", "fp8_e4m3"));
  add(a, "--context-length", served_context(r));
  add(a, "--max-running-requests", r.max_num_seqs);
  // The plan's token budget bounds prefill batches; with chunked prefill it is also the chunk.
  add(a, "--max-prefill-tokens", r.max_batched_tokens);
  add(a, "--chunked-prefill-size", r.chunked_prefill ? r.max_batched_tokens : int64_t(-1));
  if (!custom_allreduce_on(r.plan)) a.push_back("--disable-custom-all-reduce");  // as vLLM: engine_vllm.cpp
  allreduce_rule_note(r.plan, s, ArSetting::AutoSglang, "SGLang", notes);
  notes.push_back("SGLang's --max-prefill-tokens bounds the prompt tokens of a batch; decode tokens ride on top "
                  "(the plan's budget counts both)");
}

}  // namespace peerplan::export_detail
