#pragma once
// The sample loop of the compute tables (gemm, attention, grouped_gemm, elementwise): warm-up
// regions, then the kept samples, each followed by the idle time `--duty` asks for (compute_idle_s)
// and a read of the SM clock, whose median the row keeps (SampleStats::sm_mhz). Why: timed back to
// back, tensor-core work holds an H200 at its 700 W cap, ~1830 MHz, while serving runs at ~1980
// (session 13 S4); the clock says which a row saw, the duty cycle lets the table be timed as served.
#include <functional>
#include <vector>

#include "planner/core/dtype.hpp"
#include "planner/model/model_config.hpp"
#include "planner/topology/measurements.hpp"
#include "profiler/measure/context.hpp"

namespace peerplan::profiler {

// `region` runs one timed region and returns its seconds; a sample is region() / per.
SampleStats time_compute_samples(Context& ctx, int gpu, const std::function<double()>& region, double per = 1.0);

// The power throttle of GPU `gpu` (Measurements::power_throttle): after 500 ms idle, a bf16 GEMM of
// Llama-3.1-8B's qkv at M = 4096 back to back for ~1.5 s (the call count from 8 timed calls), each
// call between events. ~2 s.
PowerThrottle measure_power_throttle(int gpu);

// Each class's throttle (GEMM, prefill attention, elementwise) at four attention shares, ascending
// (PowerThrottle::mixes; power_mix.cpp). ~8 s.
std::vector<ThrottleMix> measure_throttle_mixes(int gpu);

// The same mixes with the MoE dispatch in the GEMM class, for each MoE model of `models`, each expert
// format of formats[i] (empty or missing: bf16) and each routed token count of `tokens`
// (PowerThrottle::grouped; power_mix.cpp): each call is the executor's moe_expert_gemm on gate_up then
// down (uniform routing, layer 0), all experts on GPU `gpu`, at attention shares ~0, ~1/2, ~4/5. ~6 s a
// model, format and token count. Why per format: Mixtral's int8 long prefills on an H100 ran 0.96-1.00x
// their boost price where its bf16 dispatch's mixes priced 1.10x (session 30 M).
std::vector<GroupedThrottle> measure_grouped_throttle(int gpu, const std::vector<ModelConfig>& models,
                                                      const std::vector<int64_t>& tokens,
                                                      const std::vector<std::vector<DType>>& formats = {});
// The token counts a profile times them at: long prompts' chunks (validate-long-prompt's prefills run
// 1.5k-4k tokens), where the dispatch's path can change (Qwen1.5-MoE: the grouped kernel at 2048,
// cuBLASLt per expert from ~3300, profiler/common/moe_cublas_rule.hpp).
inline const std::vector<int64_t> kThrottleMixTokens = {2048, 4096};

}  // namespace peerplan::profiler
