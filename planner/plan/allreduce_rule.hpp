#pragma once
// Which all-reduce a plan's tensor-parallel groups run (issue 17): NCCL, or a one-shot / two-shot
// kernel over peer memory as vLLM, SGLang and TensorRT-LLM run below a size threshold. The one
// definition of the plan setting and of each engine's rule; the pricer (planner/cost/
// peer_allreduce_cost.*) and the executor ask choose_allreduce, so both pick the same kernel.
// docs/simulator.md, "All-reduce implementation", states the rules and their sources.
#include <cstdint>
#include <string>
#include <vector>

namespace peerplan {

class Topology;
struct Plan;

// The plan's setting ("allreduce" in the plan JSON):
//   nccl          every all-reduce through NCCL (the default: what plans meant before the field)
//   custom        peer-memory kernels at every size whenever all pairs of the group have P2P
//                 (one-shot below vLLM's switch, two-shot above), NCCL otherwise
//   auto:vllm     vLLM 0.11's rule, auto:sglang SGLang 0.5.3's, auto:trtllm TensorRT-LLM 1.0's AUTO
enum class ArSetting { Nccl, Custom, AutoVllm, AutoSglang, AutoTrtllm };
inline constexpr int kArSettingCount = 5;
const char* to_string(ArSetting s);
// Names accepted in plan JSON and `--allreduce`, in enum order.
const std::vector<std::string>& allreduce_setting_names();
// Throws std::invalid_argument for an unknown name (callers turn it into InputError with the field).
ArSetting allreduce_setting_from_string(const std::string& s);

// Appended to a plan's name by allreduce_variants: "tp2[0,1] ar:custom".
inline constexpr const char* kAllReduceSuffix = " ar:";

enum class ArImpl { Nccl, OneShot, TwoShot };
const char* to_string(ArImpl a);  // "nccl", "one_shot", "two_shot" (also the profile's "algo" names)

// What an engine's rule looks at in the group: its size, whether every pair has P2P (and the
// plan allows it), and whether every pair is joined by NVLink ("fully connected" in vLLM,
// "full_nvlink" in SGLang, NVLink in TensorRT-LLM's AUTO).
struct ArGroup {
  int n = 1;
  bool p2p_all = false;
  bool nvlink_all = false;
};
ArGroup allreduce_group(const Topology& topo, const std::vector<int>& gpus, bool plan_p2p);

struct ArChoice {
  ArImpl impl = ArImpl::Nccl;
  const char* why = "";  // one phrase: which condition decided
};
// The kernel an all-reduce of `bytes` per rank runs under `setting` on group `g`.
ArChoice choose_allreduce(ArSetting setting, const ArGroup& g, int64_t bytes);

// Variants of a plan that differ only in its all-reduce setting, for `peerplan plan --allreduce`:
// one per setting in `settings` (the plan's own first, unchanged), named "<name> ar:<setting>"
// for the others. A plan without a TP group of two or more GPUs, or with P2P off, gets none but
// itself (custom kernels need peer memory; with P2P off every rule falls back to NCCL).
std::vector<Plan> allreduce_variants(const Plan& p, const std::vector<ArSetting>& settings);

}  // namespace peerplan
