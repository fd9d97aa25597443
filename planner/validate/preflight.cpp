#include "planner/validate/preflight.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "planner/compile/act_fusion.hpp"
#include "planner/core/error.hpp"
#include "planner/model/expert_format.hpp"
#include "planner/topology/executor_launch.hpp"

namespace peerplan {

bool uses_w4a16(const ModelConfig& cfg) {
  if (cfg.quant.linear.dtype == DType::INT4) return true;
  return std::any_of(cfg.quant.per_matrix.begin(), cfg.quant.per_matrix.end(),
                     [](const auto& kv) { return kv.second.dtype == DType::INT4; });
}

bool uses_w8_experts(const ModelConfig& cfg) {
  const std::optional<DType> d = routed_expert_format(cfg);
  return d && (*d == DType::FP8_E4M3 || *d == DType::INT8);
}

namespace {
// The warning when the profile timed `what` on one of two kernels (timed: 1 `on`, 0 `off`) and this executor runs the
// other (host); "" when they agree or either does not say. `var` set to `timed` runs as the profile was timed.
std::string kernel_mismatch(const char* var, int timed, int host, const char* what, const char* on, const char* off,
                            const char* effect) {
  if (timed < 0 || host < 0 || timed == host) return "";
  return fmt::format(
      "the profile timed {} on {} but this executor runs them on {}: {} run {} than priced. Re-profile with this "
      "build (`peerplan profile`), or set {}={} to run as the profile was timed",
      what, timed == 1 ? on : off, host == 1 ? on : off, effect, host == 1 ? "faster" : "slower", var, timed);
}
}  // namespace

std::string moe_w8_mma_mismatch(const Machine& profile, int host_w8_mma) {
  return kernel_mismatch("PEERPLAN_MOE_W8_MMA", moe_w8_mma_timed(profile), host_w8_mma,
                         "FP8 / int8 experts' prefill-sized grouped GEMMs", "8-bit tensor cores (the tokens quantized)",
                         "bf16 tensor cores (the codes converted)", "MoE prefill and large decode batches");
}

std::string small_gemv_mismatch(const Machine& profile, int host_small_gemv) {
  return kernel_mismatch("PEERPLAN_SMALL_GEMV", small_gemv_timed(profile), host_small_gemv,
                         "small matrices at 3-8 tokens (MoE routers, shared-expert gates, MLA's kv_a)", "the GEMV",
                         "cuBLASLt", "MoE decode steps at 3-8 sequences (~1-3 %)");
}

std::string w4_layout_mismatch(const Machine& profile, const std::string& host_layout) {
  const std::string timed = w4_layout_timed(profile);
  if (timed.empty() || host_layout.empty() || timed == host_layout) return "";
  return fmt::format(
      "the profile timed the W4A16 GEMMs on int4 weights in the '{}' word order but this executor reads '{}': "
      "decode steps at batch 1-2 run ~5-6 % {} than priced. Re-profile with this build (`peerplan profile`), or "
      "set PEERPLAN_W4_LAYOUT={} to run as the profile was timed",
      timed, host_layout, host_layout == "tiled" ? "faster" : "slower", timed);
}

std::string profile_host_mismatch(const Machine& profile, const HostInfo& host) {
  if (!profile.measured() || profile.origin != "measured")
    return fmt::format("'{}' is a nominal machine description, not a profile measured on this host", profile.name);
  bool profile_uuids = !profile.gpus.empty() &&
                       std::all_of(profile.gpus.begin(), profile.gpus.end(), [](const GpuSpec& g) { return !g.uuid.empty(); });
  bool host_uuids = !host.gpus.empty() &&
                    std::all_of(host.gpus.begin(), host.gpus.end(), [](const HostGpu& g) { return !g.uuid.empty(); });
  if (profile_uuids && host_uuids) {
    for (const GpuSpec& g : profile.gpus) {
      if (g.id >= int(host.gpus.size()))
        return fmt::format("the profile has GPU {} ({}) but this host has only {} GPU(s)", g.id, g.uuid, host.gpus.size());
      if (host.gpus[size_t(g.id)].uuid != g.uuid)
        return fmt::format("GPU {} of the profile is {} but GPU {} of this host is {}", g.id, g.uuid, g.id,
                           host.gpus[size_t(g.id)].uuid);
    }
    return "";
  }
  if (profile.host.empty()) return "the profile records no hostname and no GPU UUIDs";
  if (profile.host != host.hostname)
    return fmt::format("the profile was measured on host '{}' but this is '{}'", profile.host, host.hostname);
  return "";
}

std::string launch_mismatch(const Machine& profile, const std::string& host_launch) {
  const std::string timed = executor_launch(profile);
  if (timed.empty() || host_launch.empty() || timed == host_launch) return "";
  auto how = [](const std::string& l) { return l == "pdl" ? "with programmatic dependent launch" : "one after another"; };
  return fmt::format(
      "the profile timed the decode kernels launched {} but this executor launches them {}: decode steps at batch "
      "1-2 run up to ~15 % {} than priced. Re-profile with this build (`peerplan profile`), or set PEERPLAN_PDL={} "
      "to run as the profile was timed",
      how(timed), how(host_launch), host_launch == "pdl" ? "faster" : "slower", timed == "pdl" ? 1 : 0);
}

namespace {
// A 0 / 1 executor switch (`var`) forced against what the profile's plans price: "" when they agree or it is
// unset. `what` (`pronoun`) runs `on` when the switch is 1, `off` when 0; `effect` runs faster or slower.
std::string switch_mismatch(const char* var, int host, bool priced, const char* what, const char* pronoun,
                            const char* on, const char* off, const char* effect) {
  if (host < 0 || (host == 1) == priced) return "";
  return fmt::format(
      "{}={} runs {} {} but the profile's plans price {} {}: {} {} than priced. Unset it to run as the profile "
      "says, or write a profile with {}={} set (`peerplan profile`)",
      var, host, what, host == 1 ? on : off, pronoun, priced ? on : off, effect, host == 1 ? "faster" : "slower", var,
      host);
}
}  // namespace

std::string shared_stream_mismatch(const Machine& profile, int host) {
  return switch_mismatch("PEERPLAN_SHARED_STREAM", host, shared_expert_stream(profile), "a MoE layer's shared experts",
                         "them", "on a second stream", "on the compute stream",
                         "decode steps of models with shared experts (Qwen-MoE, DeepSeek) run");
}

std::string fused_act_mismatch(const Machine& profile, int host) {
  if (host == kActEverywhere)  // whatever the profile says, plans never price these fused
    return "PEERPLAN_FUSED_ACT=all also runs the activation inside the int8 GEMV and the routed experts' gemv, which "
           "the profile's plans price as separate kernels (measured up to ~3 % slower fused, session 31): an A/B "
           "setting. Unset it to run as the profile says";
  return switch_mismatch("PEERPLAN_FUSED_ACT", host, fused_gate_up_act(profile), "the MLP activation", "it",
                         "inside the gate_up GEMV", "as its own kernel", "decode steps at batch 1-2 run ~2 us a layer");
}

std::vector<std::string> executor_mismatches(const Machine& profile, const HostInfo& host, const PreflightOptions& opt) {
  std::vector<std::string> warnings;
  if (std::string w = launch_mismatch(profile, host.executor_launch); !w.empty()) warnings.push_back(w);
  if (std::string w = shared_stream_mismatch(profile, host.shared_stream); !w.empty()) warnings.push_back(w);
  if (std::string w = fused_act_mismatch(profile, host.fused_act); !w.empty()) warnings.push_back(w);
  if (std::string w = small_gemv_mismatch(profile, host.small_gemv); !w.empty()) warnings.push_back(w);
  if (opt.w4a16)
    if (std::string w = w4_layout_mismatch(profile, host.w4_layout); !w.empty()) warnings.push_back(w);
  if (opt.w8_experts)
    if (std::string w = moe_w8_mma_mismatch(profile, host.moe_w8_mma); !w.empty()) warnings.push_back(w);
  return warnings;
}

std::vector<std::string> preflight(const Plan& plan, const std::string& plan_file, const Machine& profile,
                                   const std::string& profile_file, const HostInfo& host, bool memory_fits,
                                   const std::string& memory_why, const PreflightOptions& opt) {
  std::vector<std::string> warnings;
  const std::vector<int> gpus = plan.all_gpus();
  const int need = gpus.empty() ? 0 : gpus.back() + 1;
  if (host.gpus.empty())
    throw InputError(plan_file, "stages",
                     "a host with at least one CUDA GPU: this host has none visible (check CUDA_VISIBLE_DEVICES "
                     "and the driver with nvidia-smi)");
  if (need > int(host.gpus.size()))
    throw InputError(plan_file, "stages",
                     fmt::format("GPU ids below {} (this host has {} GPU(s)); plan '{}' uses GPU {}. Pick a plan "
                                 "for {} GPU(s), e.g. from `peerplan plan --machine {}`",
                                 host.gpus.size(), host.gpus.size(), plan.name, gpus.back(), host.gpus.size(),
                                 profile_file));
  const std::string why = profile_host_mismatch(profile, host);
  if (!why.empty()) {
    const std::string msg = why + ". A prediction from another machine cannot be validated here: run `peerplan "
                                  "profile --out this-host.json` on this host and pass --machine this-host.json";
    if (!opt.allow_other_host) throw InputError(profile_file, "host", msg + " (or --allow-other-host to run anyway)");
    warnings.push_back(msg);
  }
  for (int g : gpus) {
    if (g < int(profile.gpus.size()) && profile.gpus[size_t(g)].memory_bytes > 0 &&
        host.gpus[size_t(g)].memory_bytes > 0 &&
        // in double: memory_bytes * 95 overflowed int64 for absurd profiles (UBSan finding, 2026-12-01)
        double(host.gpus[size_t(g)].memory_bytes) < double(profile.gpus[size_t(g)].memory_bytes) * 0.95)
      warnings.push_back(fmt::format("GPU {} has {:.1f} GiB here but {:.1f} GiB in the profile", g,
                                     double(host.gpus[size_t(g)].memory_bytes) / (1 << 30),
                                     double(profile.gpus[size_t(g)].memory_bytes) / (1 << 30)));
  }
  for (std::string& w : executor_mismatches(profile, host, opt)) warnings.push_back(std::move(w));
  if (!memory_fits)
    throw InputError(plan_file, "stages",
                     fmt::format("a plan that fits this host's GPU memory: {}. Use more GPUs, fewer concurrent "
                                 "sequences (workload max_num_seqs) or shorter contexts",
                                 memory_why));
  return warnings;
}

}  // namespace peerplan
