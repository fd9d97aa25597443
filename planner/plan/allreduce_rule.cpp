#include "planner/plan/allreduce_rule.hpp"

#include <stdexcept>

#include "planner/plan/plan.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

namespace {
constexpr int64_t KiB = 1024, MiB = 1024 * 1024;

// vLLM's one-shot / two-shot switch (csrc/custom_all_reduce.cuh, CustomAllreduce::allreduce,
// REDUCE_CASE): two GPUs always one-shot (each reads as many bytes either way, one-shot has one
// barrier fewer); up to 4 GPUs one-shot below 512 KiB, up to 8 below 256 KiB; two-shot above.
// SGLang's sgl-kernel kernel (sgl-kernel/csrc/allreduce/custom_all_reduce.cuh) is vLLM's.
ArImpl vllm_switch(int n, int64_t bytes) {
  if (n == 2) return ArImpl::OneShot;
  if ((n <= 4 && bytes < 512 * KiB) || bytes < 256 * KiB) return ArImpl::OneShot;
  return ArImpl::TwoShot;
}

bool vllm_world_size(int n) { return n == 2 || n == 4 || n == 6 || n == 8; }
}  // namespace

const char* to_string(ArSetting s) {
  switch (s) {
    case ArSetting::Nccl: return "nccl";
    case ArSetting::Custom: return "custom";
    case ArSetting::AutoVllm: return "auto:vllm";
    case ArSetting::AutoSglang: return "auto:sglang";
    case ArSetting::AutoTrtllm: return "auto:trtllm";
  }
  return "?";
}

const std::vector<std::string>& allreduce_setting_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (int i = 0; i < kArSettingCount; ++i) v.push_back(to_string(ArSetting(i)));
    return v;
  }();
  return names;
}

ArSetting allreduce_setting_from_string(const std::string& s) {
  for (int i = 0; i < kArSettingCount; ++i)
    if (s == to_string(ArSetting(i))) return ArSetting(i);
  throw std::invalid_argument("unknown all-reduce setting '" + s + "'");
}

const char* to_string(ArImpl a) {
  switch (a) {
    case ArImpl::Nccl: return "nccl";
    case ArImpl::OneShot: return "one_shot";
    case ArImpl::TwoShot: return "two_shot";
  }
  return "?";
}

ArGroup allreduce_group(const Topology& topo, const std::vector<int>& gpus, bool plan_p2p) {
  ArGroup g;
  g.n = int(gpus.size());
  g.p2p_all = plan_p2p && g.n >= 2;
  g.nvlink_all = g.n >= 2;
  for (int a : gpus)
    for (int b : gpus) {
      if (a == b) continue;
      // A group across hosts has no peer memory: engines fall back to NCCL there too.
      if (topo.host_of(a) != topo.host_of(b) || !topo.p2p_usable(a, b)) g.p2p_all = false;
      if (topo.path_type(a, b) != PathType::NV) g.nvlink_all = false;
    }
  return g;
}

ArChoice choose_allreduce(ArSetting setting, const ArGroup& g, int64_t bytes) {
  if (g.n <= 1) return {ArImpl::Nccl, "one GPU: nothing to reduce"};
  if (setting == ArSetting::Nccl) return {ArImpl::Nccl, "plan: nccl"};
  if (!g.p2p_all) return {ArImpl::Nccl, "no P2P between every pair of the group"};
  switch (setting) {
    case ArSetting::Custom:
      if (g.n == 2) return {ArImpl::OneShot, "custom: two GPUs"};
      // Beyond 8 GPUs vLLM has no rule; its 8-GPU switch is kept.
      return {vllm_switch(g.n, bytes), "custom: vLLM's one-shot/two-shot switch"};
    case ArSetting::AutoVllm:
    case ArSetting::AutoSglang:
      // vllm/distributed/device_communicators/custom_all_reduce.py (v0.11.0): _SUPPORTED_WORLD_SIZES
      // [2, 4, 6, 8], max_size 8192 * 1024, off for more than two GPUs not fully NVLink-connected,
      // should_custom_ar: bytes a multiple of 16 and strictly below max_size. SGLang 0.5.3's
      // python/sglang/srt/distributed/device_communicators/custom_all_reduce.py keeps the same
      // world sizes, _MAX_CAR_SIZE 8192 * 1024 (CUDA) and full_nvlink condition. Above the size,
      // vLLM may use torch symmetric memory (VLLM_ALLREDUCE_USE_SYMM_MEM): not modelled, NCCL.
      if (!vllm_world_size(g.n)) return {ArImpl::Nccl, "world size not in {2,4,6,8}"};
      if (g.n > 2 && !g.nvlink_all) return {ArImpl::Nccl, "more than two GPUs not all joined by NVLink"};
      if (bytes % 16 != 0) return {ArImpl::Nccl, "size not a multiple of 16 bytes"};
      if (bytes >= 8 * MiB) return {ArImpl::Nccl, "at or above the 8 MiB custom all-reduce buffer"};
      return {vllm_switch(g.n, bytes), "below 8 MiB: engine's one-shot/two-shot switch"};
    case ArSetting::AutoTrtllm:
      // TensorRT-LLM 1.0, AllReduceStrategy AUTO (cpp/tensorrt_llm/thop/allreduceOp.cpp, strategy
      // selection; cpp/tensorrt_llm/common/customAllReduceUtils.h, getMaxRequiredWorkspaceSize):
      // NCCL without P2P or NVLink between the ranks, or above the IPC workspace (16 MiB for two
      // GPUs, 8 MiB beyond); else one-shot for two GPUs, up to 4 GPUs one-shot below 1 MiB, beyond
      // below 512 KiB, two-shot above. On SM90 1.0 first consults a tokens x hidden table
      // (selectStrategyLookUpTable) that may also pick fused or low-latency kernels: not modelled.
      if (g.n > 8) return {ArImpl::Nccl, "more than 8 ranks"};
      if (!g.nvlink_all) return {ArImpl::Nccl, "not every pair joined by NVLink"};
      if (bytes > (g.n <= 2 ? 16 * MiB : 8 * MiB)) return {ArImpl::Nccl, "above the IPC workspace"};
      if (g.n <= 2) return {ArImpl::OneShot, "two ranks: one-shot"};
      if (bytes < (g.n <= 4 ? 1 * MiB : 512 * KiB)) return {ArImpl::OneShot, "below the one-shot size"};
      return {ArImpl::TwoShot, "above the one-shot size"};
    case ArSetting::Nccl: break;
  }
  return {ArImpl::Nccl, "plan: nccl"};
}

std::vector<Plan> allreduce_variants(const Plan& p, const std::vector<ArSetting>& settings) {
  std::vector<Plan> out{p};
  bool tp_group = false;
  for (const PlanStage& st : p.stages) tp_group = tp_group || st.gpus.size() >= 2;
  if (!tp_group || !p.p2p) return out;
  for (ArSetting s : settings) {
    if (s == p.allreduce) continue;
    bool seen = false;
    for (const Plan& q : out) seen = seen || q.allreduce == s;
    if (seen) continue;
    Plan v = p;
    v.allreduce = s;
    v.name = p.name + kAllReduceSuffix + to_string(s);
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace peerplan
