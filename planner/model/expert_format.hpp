#pragma once
// The stored formats of routed experts the executor runs (docs/quantization.md, "Not done"): bf16 and
// fp16, through its grouped kernels and cuBLASLt per expert. Experts in fp8, int8, int4 or MXFP4 are
// priced (from the fitted curves) but neither profiled nor run: validate refuses them
// (check_experts_executable) and simulate says so (its provenance's quantized_experts).
#include "planner/core/dtype.hpp"

namespace peerplan {

inline bool executor_runs_experts_in(DType d) { return d == DType::BF16 || d == DType::FP16; }

}  // namespace peerplan
