#pragma once
// Small helpers the engine builders share (internal to planner/export).
#include <cstdint>
#include <string>
#include <vector>

#include "planner/export/engine_builders.hpp"

namespace peerplan::export_detail {

inline void add(std::vector<std::string>& a, const char* flag, const std::string& v) {
  a.emplace_back(flag);
  a.push_back(v);
}
inline void add(std::vector<std::string>& a, const char* flag, const char* v) { add(a, flag, std::string(v)); }
inline void add(std::vector<std::string>& a, const char* flag, int64_t v) { add(a, flag, std::to_string(v)); }
inline void add(std::vector<std::string>& a, const char* flag, int v) { add(a, flag, std::to_string(v)); }

// CUDA_VISIBLE_DEVICES in the plan's order: rank i of the engine takes visible device i.
inline void set_visible_devices(Launch& l) { l.env.emplace_back("CUDA_VISIBLE_DEVICES", join_ints(l.gpus)); }

// The engine's KV-cache dtype value: `same` for BF16/FP16 (the model's own), `fp8` for FP8;
// anything else refused.
std::string kv_name(Engine e, const ExportRequest& r, const char* same, const char* fp8);
// "weights int4: vLLM takes the format from the checkpoint's quantization_config (...)".
std::string checkpoint_quantization_note(const char* engine, DType w, const char* schemes);
// "weights as the checkpoint stores them (compressed-tensors): vLLM reads the scheme from it".
std::string checkpoint_format_note(const char* engine, const ExportRequest& r);

// Whether the engine's own (custom, peer-memory) all-reduce stays on: P2P on and the plan not
// priced with NCCL all-reduce (planner/plan/allreduce_rule.hpp).
bool custom_allreduce_on(const Plan& p);
// A note when the plan's all-reduce setting is not the engine's own rule (`own`): the engine
// applies its rule, so the plan's prediction may differ (re-plan with --allreduce <own>).
void allreduce_rule_note(const Plan& p, const PlanShape& s, ArSetting own, const char* engine,
                         std::vector<std::string>& notes);

}  // namespace peerplan::export_detail
