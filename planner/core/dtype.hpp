#pragma once
// Number formats of weights, activations and the KV cache: one definition shared by model cards,
// the memory model, the cost model, plans and the executor (issue 15).
#include <optional>
#include <string>
#include <string_view>

namespace peerplan {

enum class DType {
  BF16,      // the default for weights, activations and the KV cache
  FP16,
  FP8_E4M3,  // Hopper FP8 weights (with per-tensor, per-channel or block scales) or FP8 KV cache
  INT8,      // W8A8 (per-channel weight scales)
  INT4,      // 4-bit weight-only (AWQ / GPTQ / W4A16: packed nibbles, group scales)
  MXFP4,     // OCP microscaling FP4 (gpt-oss experts): 4-bit values, one e8m0 scale per 32
};

// Bits of one stored element, not counting scales or zero points (those depend on the checkpoint's
// quantization scheme and are counted by the model card).
double dtype_bits(DType t);
// Canonical lower-case name: "bf16", "fp16", "fp8", "int8", "int4", "mxfp4".
const char* dtype_name(DType t);
// Parses a canonical name and the common aliases ("bfloat16", "float16", "fp8_e4m3", "e4m3",
// "w4a16", ...); nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view s);

}  // namespace peerplan
