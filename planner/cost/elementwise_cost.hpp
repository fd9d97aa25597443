#pragma once
// Elementwise ops (RmsNorm, Rotary, MoeRoute, ...) priced from the profile's "elementwise" table:
// the executor's own kernels timed back to back inside a CUDA graph (region / reps), like GEMMs.
// Eager timings at Qwen1.5-MoE decode showed rotary, moe_route and moe_combine several us above the
// bytes / HBM-bandwidth floor that priced them (docs/simulator.md, "Elementwise ops").
#include <optional>
#include <string>
#include <vector>

#include "planner/compile/op_graph.hpp"
#include "planner/cost/curve.hpp"
#include "planner/topology/measurements.hpp"

namespace peerplan {

// The profile's name of an EwKind ("rms_norm", ..., kElementwiseKinds); "" for EwKind::None.
std::string ew_kind_name(EwKind k);

// Time of an elementwise op from the points of (gpu, kind, ew_cols), else of (kind, ew_cols) on any
// GPU (the profiler times GPU 0; a host's GPUs are one part, as for GEMMs): interpolated over rows in
// log space (curve_time: exact rows Measured, between Interpolated, outside Extrapolated). nullopt
// when the op is not elementwise, or the table has no point of that (kind, cols). An AddRmsNorm whose
// cols have rms_norm and residual rows but none of its own: their sum, at most Interpolated.
std::optional<CurveTime> elementwise_from_table(const std::vector<ElementwiseTime>& table, int gpu, const Op& op);

}  // namespace peerplan
