#pragma once
// The stored formats of routed experts the executor runs (docs/quantization.md, "FP8 routed experts",
// "int4 routed experts"): bf16 and fp16 through its grouped kernels and cuBLASLt per expert, FP8 (e4m3)
// through their FP8 variants (per-channel scales; a block-scaled checkpoint's experts are timed
// per-channel: the scales are < 0.1 % of the bytes), int8 (per-channel, compressed-tensors W8A8 int8)
// through the same kernels with an int8 conversion, int4 (GPTQ / AWQ / compressed-tensors W4A16,
// group 128) through their int4 variants (symmetric: AWQ's zero points are timed as GPTQ's implicit 8,
// as the dense W4A16 GEMMs are), MXFP4 (gpt-oss: e2m1 codes, an e8m0 scale per 32 k) through theirs
// (moe_gemm_mxfp4.cu). Every expert format a model card can hold runs, so validate refuses none.
// Not for .cu files (model_config.hpp is host-only).
#include <optional>

#include "planner/core/dtype.hpp"
#include "planner/model/model_config.hpp"

namespace peerplan {

// The stored format of the model's routed experts (the first MoE layer's gate_up); nullopt for dense models.
std::optional<DType> routed_expert_format(const ModelConfig& cfg);

}  // namespace peerplan
