#pragma once
// The sample loop of the compute tables (gemm, attention, grouped_gemm, elementwise): warm-up
// regions, then the kept samples, each followed by the idle time `--duty` asks for (compute_idle_s)
// and a read of the SM clock, whose median the row keeps (SampleStats::sm_mhz). Why: timed back to
// back, tensor-core work holds an H200 at its 700 W cap, ~1830 MHz, while serving runs at ~1980
// (session 13 S4); the clock says which a row saw, the duty cycle lets the table be timed as served.
#include <functional>
#include <vector>

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

}  // namespace peerplan::profiler
