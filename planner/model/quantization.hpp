#pragma once
// A checkpoint's weight formats, read from config.json's quantization_config (or asked for with
// --weights), and the bytes each weight matrix is stored in: the packed values plus their scales,
// zero points and index tensors. Which matrices stay in the dense dtype follows what each
// scheme's loader does (vLLM / transformers) and the config's ignore lists; docs/model.md lists
// the rules and the published checkpoint sizes they were checked against.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/core/dtype.hpp"

namespace peerplan {

class JsonIn;

// How the scales of a quantized matrix [k, n] are laid out.
enum class ScaleLayout {
  None,     // dense weights
  Tensor,   // one scale per matrix (FP8 per-tensor)
  Channel,  // one per output column (n scales)
  Group,    // one per `group` consecutive input rows per column (AWQ, GPTQ, W4A16, MXFP4, bnb)
  Block,    // one per block_k x block_n tile (DeepSeek-V3 FP8: 128 x 128)
  Ggml,     // ggml block formats (GGUF Q4_K, Q8_0, ...): scales and mins inside each block, so
            // `bits_per_weight` (block bytes x 8 / block elements) counts everything stored
};

struct WeightFormat {
  DType dtype = DType::BF16;
  ScaleLayout scales = ScaleLayout::None;
  int64_t group = 0;                 // Group: input rows per scale
  int64_t block_k = 0, block_n = 0;  // Block: tile
  double scale_bytes = 0;            // bytes of one scale: 4 fp32, 2 fp16/bf16, 1 e8m0 or uint8
  double zero_bits = 0;              // Group: bits of the zero point stored beside each scale (AWQ/GPTQ: packed)
  double extra_scale_bytes = 0;      // Group: a second level per scale (bnb double quant: fp32 per 256 absmax)
  double index_bytes_per_k = 0;      // per input row (GPTQ g_idx: int32)
  // Ggml: stored bits per weight, and the ggml type names ("Q4_K", or "Q4_K+Q6_K" when a planner
  // matrix fuses GGUF tensors of several types: the bits are then their element-weighted mean,
  // so the matrix's bytes are the sum of its tensors' bytes).
  double bits_per_weight = 0;
  std::string ggml_types;
  bool operator==(const WeightFormat&) const = default;
};

// Stored bytes of `count` matrices [k, n] in format `f`; `dense_bytes` per element when f is dense.
double stored_bytes(const WeightFormat& f, int64_t k, int64_t n, int64_t count, int dense_bytes);
// One line: "fp8 e4m3, 128x128 block scales (fp32)", "int4, group 128 scales (fp16) + 4-bit zero points".
std::string describe(const WeightFormat& f);

struct Quantization {
  std::string method = "none";  // none, fp8, compressed-tensors, awq, gptq, mxfp4, bitsandbytes, or --weights
  std::string source;           // "quantization_config" or "--weights fp8"; empty when none
  WeightFormat linear;          // the quantized Linear layers
  // What the GEMM of a quantized layer multiplies in: "fp8" / "int8" (W8A8: activations quantized
  // per token, dynamic or static), or "bf16" (weight-only: dequantized in registers).
  std::string activations = "bf16";
  std::string activation_scheme;  // "dynamic" or "static" (W8A8), empty for weight-only
  std::vector<std::string> ignore;  // module patterns kept dense (ignore / modules_to_not_convert / llm_int8_skip_modules)
  bool lm_head = false;        // lm_head quantized too (compressed-tensors when not ignored; GPTQ lm_head: true)
  bool experts_only = false;   // only routed experts are quantized (MXFP4: gpt-oss)
  std::optional<DType> kv_dtype;  // the checkpoint's own KV-cache format (compressed-tensors kv_cache_scheme)
  // Formats given matrix by matrix, keyed by (layer, planner matrix name; layer -1 for embedding
  // and lm_head): a GGUF file, whose every tensor has its own ggml type (gguf_quantization in
  // gguf.hpp). When set, it alone decides: a matrix it does not list is dense.
  std::map<std::pair<int64_t, std::string>, WeightFormat> per_matrix;

  bool quantized() const;
};

// Reads quantization_config (`q` is that object). Throws InputError naming the field for an
// unknown quant_method, a malformed or missing field, an unsupported bit width or strategy.
Quantization parse_quantization(const JsonIn& q);

// "What if I quantize": the scheme --weights asks for (bf16: none; fp8: e4m3 with per-channel
// fp32 scales and dynamic per-token activations; int8: W8A8 per-channel; int4: W4A16 with
// group-128 fp16 scales, symmetric). Throws InputError for mxfp4/fp16 (not offered).
Quantization weights_override(DType weights);
// The --weights and --kv-dtype values the CLI accepts, for help texts and errors.
std::vector<std::string> weights_choices();
std::vector<std::string> kv_dtype_choices();

// The HuggingFace module names (model.layers.3.self_attn.q_proj, ...) a planner matrix stands for
// ("qkv" -> q/k/v_proj; layer -1 for embedding and lm_head). Used to apply ignore lists.
std::vector<std::string> module_names(const std::string& matrix, int64_t layer, const std::string& model_type);
// True when `pattern` names `module`: "re:<regex>" matched from the start (compressed-tensors),
// otherwise a dotted path where '*' stands for one component, matching whole components anywhere
// in the name (so "lm_head", "mlp.gate" and "model.layers.*.self_attn" all work as their
// loaders read them, and "mlp.gate" does not match "mlp.gate_proj").
bool module_matches(const std::string& pattern, const std::string& module);

// The stored format of planner matrix `matrix` of `layer`: the scheme's linear format, or dense
// (the model's dtype) for embeddings, routers, an unquantized lm_head, and ignored modules.
WeightFormat matrix_format(const Quantization& q, const std::string& matrix, int64_t layer,
                           const std::string& model_type, DType dense);

}  // namespace peerplan
