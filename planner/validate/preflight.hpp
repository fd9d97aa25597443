#pragma once
// Before a plan runs on the GPUs: may it? Refuses (InputError, exit 2) a profile that is not a
// measurement of this host, a plan needing GPUs the host lacks, and a plan whose memory check
// fails on this host's GPUs. CPU only: the executor discovers HostInfo, tests build it by hand.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"

namespace peerplan {

struct ModelConfig;  // planner/model/model_config.hpp (not included: .cu files include this header)

struct HostGpu {
  std::string name, uuid;   // "NVIDIA H200", "GPU-..."
  int64_t memory_bytes = 0;
};

struct HostInfo {
  std::string hostname;
  std::vector<HostGpu> gpus;
  std::string executor_launch;  // how this host's executor launches decode kernels ("pdl", "serial"; "" unknown)
  int shared_stream = -1;       // PEERPLAN_SHARED_STREAM here: -1 as the profile says, 0 never, 1 always
  int fused_act = -1;           // PEERPLAN_FUSED_ACT here: -1 as the profile says, 0 never, 1 where it pays, 2 all
  std::string w4_layout;        // the int4 word order this executor reads ("tiled", "gptq"; "" unknown)
  int moe_w8_mma = -1;          // 8-bit experts' tiled groups on 8-bit tensor cores here: 1, 0, -1 unknown
  int small_gemv = -1;          // small matrices at 3-8 tokens on the bf16 GEMV here (PEERPLAN_SMALL_GEMV): 1, 0, -1
};

struct PreflightOptions {
  bool allow_other_host = false;  // --allow-other-host: warn instead of refusing a foreign profile
  bool w4a16 = false;             // the model runs W4A16 GEMMs (uses_w4a16): the int4 word order matters
  bool w8_experts = false;        // its routed experts are FP8 or int8 (uses_w8_experts): their tiled kernel matters
};

// Why a profile is not this host's ("" if it is). Rules: a nominal (hand-written) machine is
// never a measurement of this host; when both sides list GPU UUIDs, every profile GPU must be on
// this host with the same ordinal; otherwise the hostnames must match.
std::string profile_host_mismatch(const Machine& profile, const HostInfo& host);

// The warning when the profile timed the decode kernels launched otherwise than this executor runs them
// (executor_launch.hpp; host_launch "pdl" or "serial"), "" when they agree or either is unknown.
std::string launch_mismatch(const Machine& profile, const std::string& host_launch);

// The warning when this host's PEERPLAN_SHARED_STREAM (0 or 1) runs a MoE layer's shared experts on
// other streams than the profile's plans price them (executor_launch.hpp shared_expert_stream); ""
// when it follows the profile (-1) or agrees.
std::string shared_stream_mismatch(const Machine& profile, int host_shared_stream);

// The warning when this host's PEERPLAN_FUSED_ACT (0 or 1) runs the gated MLPs' activation otherwise than
// the profile's plans price it (executor_launch.hpp fused_gate_up_act); "" when it follows the profile.
std::string fused_act_mismatch(const Machine& profile, int host_fused_act);

// Whether any of the model's Linear layers is stored int4 (W4A16 GEMMs in the executor).
bool uses_w4a16(const ModelConfig& cfg);
// Whether the model's routed experts are stored FP8 or int8 (the 8-bit grouped kernels in the executor).
bool uses_w8_experts(const ModelConfig& cfg);

// The warning when the profile timed 8-bit experts' prefill-sized groups on other tensor cores than this
// executor runs them (executor_launch.hpp moe_w8_mma_timed), "" when they agree or either is unknown.
std::string moe_w8_mma_mismatch(const Machine& profile, int host_w8_mma);

// The warning when the profile timed small matrices at 3-8 tokens on another kernel than this executor runs them
// (executor_launch.hpp small_gemv_timed), "" when they agree or either does not say.
std::string small_gemv_mismatch(const Machine& profile, int host_small_gemv);

// The warning when the profile's W4A16 rows were timed on another word order of the packed weights
// than this executor reads (executor_launch.hpp w4_layout_timed), "" when they agree or either is unknown.
std::string w4_layout_mismatch(const Machine& profile, const std::string& host_layout);

// The warnings when this host's executor runs otherwise than the profile timed it: the launch mode, the
// shared experts' stream, (opt.w4a16) the int4 word order and (opt.w8_experts) the 8-bit experts' tiled
// kernel. preflight() and the MPI ranks' preflight (profiler/common/rank_preflight.hpp) both give them.
std::vector<std::string> executor_mismatches(const Machine& profile, const HostInfo& host, const PreflightOptions& opt);

// Throws InputError naming `plan_file`/`profile_file` and how to fix it. Returns warnings (a
// foreign profile allowed by the option) for the caller to print.
std::vector<std::string> preflight(const Plan& plan, const std::string& plan_file, const Machine& profile,
                                   const std::string& profile_file, const HostInfo& host,
                                   bool memory_fits, const std::string& memory_why,
                                   const PreflightOptions& opt = {});

}  // namespace peerplan
