#pragma once
// The weight shapes the executor's quantized kernels take, one definition for the runners
// (gpu::check_quant_shape, the grouped int4 launch) and for the engine's check of a plan's ops before
// any GPU work: a model whose shard shapes a format cannot run is refused with its op and shape named,
// instead of failing at its first weight allocation mid-validation. CPU-only (tests/profiler).
#include <cstdint>
#include <string>

#include "planner/compile/op_graph.hpp"
#include "planner/core/dtype.hpp"

namespace peerplan::kernels {

// Dense GEMM weights [n][k] stored as `d`: bf16 / fp16 any; fp8 and int8 (cuBLASLt) k and n multiples of 16;
// int4 (W4A16, 128-k scale groups) k a multiple of 128 and n of 8.
bool quant_gemm_shape_ok(DType d, int64_t n, int64_t k);
// Routed experts [n][k] as `d`: bf16 / fp16 / fp8 / int8 k a multiple of 32 (the grouped kernels' k step); int4
// n a multiple of 16 and k of 128 (w4_expert_layout.hpp); MXFP4 n of 16 and k of 64 (mxfp4_expert_layout.hpp).
bool quant_grouped_shape_ok(DType d, int64_t n, int64_t k);
// What the rule asks of `d`, as text ("k a multiple of 128 and n of 8").
std::string quant_shape_rule(DType d, bool grouped);
// The first Gemm / GroupedGemm of `g` whose stored format cannot run at its shard shape, as a sentence naming
// the op, the shape and the rule; "" when every one can.
std::string unrunnable_quant_op(const OpGraph& g);

}  // namespace peerplan::kernels
