#pragma once
// The stored formats of routed experts the executor runs (docs/quantization.md, "Not done"): bf16 and
// fp16, through its grouped kernels and cuBLASLt per expert. Experts in fp8, int8, int4 or MXFP4 are
// priced (from the fitted curves) but neither profiled nor run: validate refuses them
// (check_experts_executable) and simulate says so (its provenance's quantized_experts).
// Not for .cu files (model_config.hpp is host-only).
#include <optional>

#include "planner/core/dtype.hpp"
#include "planner/model/model_config.hpp"

namespace peerplan {

// The stored format of the model's routed experts when the executor cannot run it (the first MoE
// layer's gate_up, as the checkpoint's quantization_config or --weights leave it); nullopt for dense
// models and bf16 / fp16 experts.
std::optional<DType> unrunnable_expert_format(const ModelConfig& cfg);

}  // namespace peerplan
