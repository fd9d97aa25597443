// vLLM 0.11.0 (`vllm serve`): flags from vllm/engine/arg_utils.py (EngineArgs.add_cli_args) and
// vllm/entrypoints/openai/cli_args.py at tag v0.11.0; VLLM_PP_LAYER_PARTITION from vllm/envs.py,
// read by get_pp_indices (vllm/distributed/utils.py). Listed in planner/export/flags/vllm-0.11.0.txt.
#include <fmt/format.h>

#include "planner/export/engine_builders.hpp"
#include "planner/export/engine_common.hpp"

namespace peerplan::export_detail {

void build_vllm(const ExportRequest& r, const PlanShape& s, Launch& l, std::vector<std::string>& notes) {
  const Engine e = Engine::Vllm;
  require_contiguous_experts(e, r);
  if (s.attn_dp > 1 && s.pp > 1)
    refuse(e, r, "data-parallel attention across pipeline stages: each vLLM data-parallel rank runs a whole "
                 "pipeline of its own");
  const int64_t ctx = served_context(r);
  if (!r.chunked_prefill && r.max_batched_tokens < ctx)
    refuse(e, r, fmt::format("without chunked prefill vLLM needs max_num_batched_tokens >= max_model_len ({} < {}); "
                             "enable chunked prefill in the workload or raise its max_batched_tokens",
                             r.max_batched_tokens, ctx));
  set_visible_devices(l);
  if (!r.plan.p2p) l.env.emplace_back("NCCL_P2P_DISABLE", "1");
  // Always explicit: vLLM's own uneven split gives the remainder to middle stages, not the plan's.
  if (s.pp > 1) l.env.emplace_back("VLLM_PP_LAYER_PARTITION", join_ints(s.stage_layers));

  auto& a = l.argv;
  a = {"vllm", "serve", r.model_ref, "--host", r.host, "--port", std::to_string(l.port)};
  if (s.attn_dp > 1) {  // attention replicated: one data-parallel rank per GPU, experts spread over them
    add(a, "--data-parallel-size", s.attn_dp);
    add(a, "--tensor-parallel-size", 1);
  } else {
    add(a, "--tensor-parallel-size", s.tp);
  }
  add(a, "--pipeline-parallel-size", s.pp);
  if (s.ep > 1) a.push_back("--enable-expert-parallel");
  if (!r.checkpoint_quantization.empty()) {  // the engine reads the scheme from the checkpoint
    add(a, "--dtype", "bfloat16");
    notes.push_back(checkpoint_format_note("vLLM", r));
  } else switch (r.weights) {
    case DType::BF16: add(a, "--dtype", "bfloat16"); break;
    case DType::FP16: add(a, "--dtype", "float16"); break;
    case DType::FP8_E4M3:  // quantizes a BF16 checkpoint at load, or reads an FP8 checkpoint's scales
      add(a, "--dtype", "bfloat16");
      add(a, "--quantization", "fp8");
      break;
    default:
      add(a, "--dtype", "bfloat16");
      notes.push_back(checkpoint_quantization_note("vLLM", r.weights, "AWQ, GPTQ, compressed-tensors"));
  }
  add(a, "--kv-cache-dtype", kv_name(e, r, "auto", "fp8"));
  add(a, "--max-model-len", ctx);
  add(a, "--max-num-seqs", r.max_num_seqs);
  add(a, "--max-num-batched-tokens", r.max_batched_tokens);
  a.push_back(r.chunked_prefill ? "--enable-chunked-prefill" : "--no-enable-chunked-prefill");
  // Custom all-reduce reads peer GPUs' memory: with P2P off it must go, as NCCL's P2P does; a plan
  // priced with NCCL all-reduce turns it off too, so the engine runs what was simulated.
  if (!custom_allreduce_on(r.plan)) a.push_back("--disable-custom-all-reduce");
  allreduce_rule_note(r.plan, s, ArSetting::AutoVllm, "vLLM", notes);
}

}  // namespace peerplan::export_detail
