#pragma once
// Which expert formats the MoE dispatch's power-throttle mixes are timed in (PowerThrottle::grouped,
// profiler/measure/power_mix.cpp): for each model, the formats of the profiled grouped shapes that are its whole
// gate_up on one GPU (bf16, and fp8 / int8 / int4 / mxfp4 where --dtypes or the model's own format asks), so the
// pricer finds the served experts' table (planner/sim/power_state.hpp grouped_throttles_for). Host only (tested
// on CPU: tests/profiler/dispatch_formats_test.cpp).
#include <set>
#include <vector>

#include "planner/core/dtype.hpp"
#include "planner/model/model_config.hpp"
#include "planner/topology/measurements.hpp"
#include "planner/topology/shape_set.hpp"

namespace peerplan::profiler {

// formats[i] for models[i], ascending; empty for a dense model or one without such a shape.
std::vector<std::vector<DType>> dispatch_formats(const std::vector<ModelConfig>& models,
                                                 const std::set<GroupedShapeKey>& shapes);

// Of `formats` (one model's), those `t` holds no table of for that model's expert shape: what `profile
// --add-model` still has to time.
std::vector<DType> formats_without_table(const PowerThrottle& t, const ModelConfig& model,
                                         const std::vector<DType>& formats);

}  // namespace peerplan::profiler
