#pragma once
// Internal to planner/export: the plan's shape as engines see it, and one builder per engine.
#include <string>
#include <vector>

#include "planner/export/engine_export.hpp"

namespace peerplan::export_detail {

// TP, PP, EP and attention-DP sizes of a plan, and the GPU order engines number ranks in.
struct PlanShape {
  int tp = 1, pp = 1, ep = 1;
  int attn_dp = 1;                    // ep when attention is replicated (data parallel), else 1
  std::vector<int64_t> stage_layers;  // decoder layers per stage
  std::vector<int> gpus;              // stage 0's GPUs in order, then stage 1's, ...
};

// Refusal: InputError naming the engine, its version, the plan and `why`.
[[noreturn]] void refuse(Engine e, const ExportRequest& r, const std::string& why);

// The shape, refusing what no engine runs (stages of different TP sizes).
PlanShape plan_shape(Engine e, const ExportRequest& r);
// Refuses an expert map other than contiguous blocks over the first stage's GPUs in rank order
// (expert e on rank e / (E/ep)), the only placement vLLM, SGLang and TensorRT-LLM make by default.
void require_contiguous_experts(Engine e, const ExportRequest& r);
// Notes shared by the engines: host-staged boundaries, micro-batches.
void common_notes(const ExportRequest& r, const PlanShape& s, std::vector<std::string>& notes);
// The context to serve: max_model_len, capped at the model's context.
int64_t served_context(const ExportRequest& r);
std::string join_ints(const std::vector<int64_t>& v, const char* sep = ",");
std::string join_ints(const std::vector<int>& v, const char* sep = ",");

// One replica's launch: `l` arrives with replica, port and gpus set; the builder fills env, files
// and argv, and adds its notes to `notes` (the same for every replica; refusals come first).
void build_vllm(const ExportRequest& r, const PlanShape& s, Launch& l, std::vector<std::string>& notes);
void build_sglang(const ExportRequest& r, const PlanShape& s, Launch& l, std::vector<std::string>& notes);
void build_trtllm(const ExportRequest& r, const PlanShape& s, Launch& l, std::vector<std::string>& notes);
void build_llamacpp(const ExportRequest& r, const PlanShape& s, Launch& l, std::vector<std::string>& notes);

}  // namespace peerplan::export_detail
