// What every engine's export shares: the engine table, the plan's shape, refusals, replicas.
#include "planner/export/engine_export.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/export/engine_builders.hpp"
#include "planner/export/engine_common.hpp"

namespace peerplan {

namespace {

// The pinned versions (flags checked against planner/export/flags/<file> by tests/export).
constexpr EngineInfo kEngines[] = {
    {Engine::Vllm, "vllm", "vLLM", "0.11.0", "vllm-0.11.0.txt"},
    {Engine::Sglang, "sglang", "SGLang", "0.5.3", "sglang-0.5.3.txt"},
    {Engine::Trtllm, "trtllm", "TensorRT-LLM", "1.0.0", "trtllm-1.0.0.txt"},
    {Engine::Llamacpp, "llamacpp", "llama.cpp", "b6710", "llamacpp-b6710.txt"},
};

}  // namespace

const EngineInfo& engine_info(Engine e) {
  for (const auto& i : kEngines)
    if (i.engine == e) return i;
  return kEngines[0];
}

std::optional<Engine> parse_engine(std::string_view key) {
  for (const auto& i : kEngines)
    if (key == i.key) return i.engine;
  if (key == "llama.cpp" || key == "llama-cpp") return Engine::Llamacpp;
  if (key == "tensorrt-llm" || key == "trt-llm") return Engine::Trtllm;
  return std::nullopt;
}

std::vector<std::string> engine_keys() {
  std::vector<std::string> v;
  for (const auto& i : kEngines) v.emplace_back(i.key);
  return v;
}

namespace export_detail {

void refuse(Engine e, const ExportRequest& r, const std::string& why) {
  const EngineInfo& i = engine_info(e);
  throw InputError("", "--engine", fmt::format("{} {} cannot run plan '{}' as planned: {}", i.label, i.version,
                                               r.plan.name, why));
}

std::string join_ints(const std::vector<int64_t>& v, const char* sep) { return fmt::format("{}", fmt::join(v, sep)); }
std::string join_ints(const std::vector<int>& v, const char* sep) { return fmt::format("{}", fmt::join(v, sep)); }

PlanShape plan_shape(Engine e, const ExportRequest& r) {
  const Plan& p = r.plan;
  if (p.stages.empty()) refuse(e, r, "the plan has no stages");
  PlanShape s;
  s.tp = int(p.stages[0].gpus.size());
  s.pp = int(p.stages.size());
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const PlanStage& st = p.stages[i];
    if (int(st.gpus.size()) != s.tp)
      refuse(e, r, fmt::format("stage {} has {} GPUs and stage 0 has {}: engines run one tensor-parallel size in "
                               "every pipeline stage",
                               i, st.gpus.size(), s.tp));
    s.stage_layers.push_back(st.layer_end - st.layer_begin);
    s.gpus.insert(s.gpus.end(), st.gpus.begin(), st.gpus.end());
  }
  s.ep = p.ep;
  s.attn_dp = (p.ep > 1 && p.ep_attention == "replicated") ? p.ep : 1;
  return s;
}

void require_contiguous_experts(Engine e, const ExportRequest& r) {
  const Plan& p = r.plan;
  if (p.ep <= 1) return;
  const int64_t E = r.model_experts;
  if (E <= 0 || E % p.ep != 0)
    refuse(e, r, fmt::format("expert parallelism over {} GPUs needs the {} routed experts to split evenly", p.ep, E));
  if (int64_t(p.expert_gpu.size()) != E)
    refuse(e, r, fmt::format("the plan maps {} experts, the model has {}", p.expert_gpu.size(), E));
  const std::vector<int>& ranks = p.stages[0].gpus;
  for (int64_t x = 0; x < E; ++x) {
    const int want = ranks[size_t(x / (E / p.ep))];
    if (p.expert_gpu[size_t(x)] != want)
      refuse(e, r, fmt::format("expert {} is on GPU {}, but the engine places experts in contiguous blocks over the "
                               "EP ranks (expert {} on rank {}, GPU {}); it has no per-expert placement",
                               x, p.expert_gpu[size_t(x)], x, x / (E / p.ep), want));
  }
}

void common_notes(const ExportRequest& r, const PlanShape& s, std::vector<std::string>& notes) {
  for (size_t i = 0; i < r.plan.boundary_modes.size(); ++i)
    if (r.plan.boundary_modes[i] == "host_staged" && r.plan.p2p)
      notes.push_back(fmt::format("stage boundary {}->{} is host-staged (no P2P path between those GPUs): NCCL "
                                  "detects this and stages through host memory by itself",
                                  i, i + 1));
  if (s.pp > 1 && r.plan.micro_batches != s.pp)
    notes.push_back(fmt::format("the plan keeps {} micro-batches in flight; the engine schedules its own "
                                "(typically one per pipeline stage, {})",
                                r.plan.micro_batches, s.pp));
}

int64_t served_context(const ExportRequest& r) {
  int64_t c = r.max_model_len > 0 ? r.max_model_len : r.model_context;
  if (r.model_context > 0) c = std::min(c, r.model_context);
  return c;
}

}  // namespace export_detail

EngineExport export_plan(Engine e, const ExportRequest& r) {
  using namespace export_detail;
  PlanShape s = plan_shape(e, r);
  EngineExport x;
  x.engine = e;
  x.plan_name = r.plan.name;
  std::vector<std::vector<int>> replicas = r.replicas;
  if (replicas.empty()) replicas.push_back(s.gpus);
  std::set<int> used;
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i].size() != s.gpus.size())
      refuse(e, r, fmt::format("replica {} lists {} GPUs; the plan's shape needs {}", i, replicas[i].size(), s.gpus.size()));
    for (int g : replicas[i])
      if (!used.insert(g).second) refuse(e, r, fmt::format("GPU {} appears in two replicas (or twice in one)", g));
  }
  if (r.port < 1 || r.port + int(replicas.size()) - 1 > 65535)
    refuse(e, r, fmt::format("ports {}..{} are outside 1..65535", r.port, r.port + int(replicas.size()) - 1));
  std::vector<std::string> notes;
  for (size_t i = 0; i < replicas.size(); ++i) {
    Launch l;
    l.replica = int(i);
    l.port = r.port + int(i);
    l.gpus = replicas[i];
    std::vector<std::string> replica_notes;
    switch (e) {
      case Engine::Vllm: build_vllm(r, s, l, replica_notes); break;
      case Engine::Sglang: build_sglang(r, s, l, replica_notes); break;
      case Engine::Trtllm: build_trtllm(r, s, l, replica_notes); break;
      case Engine::Llamacpp: build_llamacpp(r, s, l, replica_notes); break;
    }
    if (i == 0) notes = std::move(replica_notes);
    x.launches.push_back(std::move(l));
  }
  common_notes(r, s, notes);
  if (replicas.size() > 1)
    notes.push_back(fmt::format("{} replicas on ports {}..{}: put a load balancer in front of them{}", replicas.size(),
                                r.port, r.port + int(replicas.size()) - 1,
                                r.plan.replicas.empty() ? std::string()
                                                        : fmt::format(" (the plan was priced with a {} router)",
                                                                      r.plan.router)));
  x.notes = std::move(notes);
  return x;
}

}  // namespace peerplan

namespace peerplan::export_detail {

std::string kv_name(Engine e, const ExportRequest& r, const char* same, const char* fp8) {
  switch (r.kv_dtype) {
    case DType::BF16:
    case DType::FP16: return same;
    case DType::FP8_E4M3: return fp8;
    default: break;
  }
  refuse(e, r, fmt::format("a {} KV cache (the engine stores KV as the model's dtype or FP8)", dtype_name(r.kv_dtype)));
}

std::string checkpoint_quantization_note(const char* engine, DType w, const char* schemes) {
  return fmt::format("weights {}: {} has no flag that quantizes to it at load; it takes the format from the "
                     "checkpoint's quantization config ({}): give a {} checkpoint as the model",
                     dtype_name(w), engine, schemes, dtype_name(w));
}

std::string checkpoint_format_note(const char* engine, const ExportRequest& r) {
  return fmt::format("weights as the checkpoint stores them ({}): {} reads the scheme from its quantization config{}",
                     r.checkpoint_quantization, engine,
                     r.weights != DType::BF16 ? fmt::format(" (the plan assumed {})", dtype_name(r.weights)) : "");
}

bool custom_allreduce_on(const Plan& p) { return p.p2p && p.allreduce != ArSetting::Nccl; }

void allreduce_rule_note(const Plan& p, const PlanShape& s, ArSetting own, const char* engine,
                         std::vector<std::string>& notes) {
  if (s.tp < 2 || !custom_allreduce_on(p) || p.allreduce == own) return;
  notes.push_back(fmt::format("all-reduce: the plan was priced with '{}'; {} applies its own rule ('{}' in peerplan's "
                              "terms) to choose between its custom kernels and NCCL, so re-plan with --allreduce {} for "
                              "the figures this launch will show",
                              to_string(p.allreduce), engine, to_string(own), to_string(own)));
}

}  // namespace peerplan::export_detail
