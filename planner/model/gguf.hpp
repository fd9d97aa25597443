#pragma once
// GGUF files (llama.cpp's model format, versions 2 and 3): the header only — metadata key/value
// pairs and tensor infos — read with every size checked against the file, never the weights.
// The metadata maps to a ModelConfig (through the same HF config reader as config.json, so one set
// of checks applies) and the tensor types give the bytes per weight that the file really stores.
#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/model/model_config.hpp"

namespace peerplan {

// gguf_type of a metadata value (ggml/include/gguf.h).
enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9, U64 = 10, I64 = 11,
  F64 = 12,
};

struct GgufKV {
  std::string key;
  GgufValueType type = GgufValueType::U8;
  GgufValueType array_type = GgufValueType::U8;  // when type == Array
  uint64_t array_count = 0;                      // when type == Array
  // The value: a number, bool or string; for an array its elements when there are at most
  // kGgufKeptArray of them (a 128k-token vocabulary is counted and skipped, not kept).
  nlohmann::json value;
  uint64_t offset = 0;  // of the key in the file, for messages
};
inline constexpr uint64_t kGgufKeptArray = 4096;

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> dims;  // ne[0] (innermost, contiguous) first, as GGUF stores them
  uint32_t ggml_type = 0;
  uint64_t offset = 0;         // relative to the data section
  uint64_t elements = 0;
  uint64_t bytes = 0;          // from the type's block size
};

struct GgufFile {
  std::string path;
  uint32_t version = 0;
  uint64_t file_size = 0;
  uint32_t alignment = 32;     // general.alignment
  uint64_t data_offset = 0;    // start of the tensor data (aligned end of the header)
  bool data_present = true;    // false: the file ends before the tensor data does (a header-only file)
  std::vector<GgufKV> kv;
  std::vector<GgufTensor> tensors;

  const GgufKV* find(const std::string& key) const;
};

struct GgufReadOptions {
  // Accept a file that ends before its tensors' data (a header dump, as the shipped test fixture):
  // data_present is then false. Otherwise such a file is refused as truncated.
  bool allow_missing_data = false;
};

// The header of the GGUF file at `path`. Throws InputError naming the file, the byte offset and the
// field for a bad magic, an unsupported version, a count, string or array larger than the file,
// an unknown value or tensor type, more than 4 dimensions, a tensor not a whole number of blocks,
// misaligned or overlapping tensor data, a duplicate key or tensor name.
GgufFile read_gguf(const std::string& path, const GgufReadOptions& opt = {});
// The same from a stream of `size` bytes (`origin` names it in errors): the fuzz target's entry.
GgufFile parse_gguf(std::istream& in, uint64_t size, const std::string& origin, const GgufReadOptions& opt = {});

// True when `path` ends in ".gguf" (any case): the model readers dispatch on it.
bool is_gguf_path(const std::string& path);

// ggml tensor types: name ("Q4_K"), elements per block, bytes per block; block 0 when unknown.
struct GgmlTypeInfo {
  const char* name;
  uint32_t block_elems;
  uint32_t block_bytes;
};
GgmlTypeInfo ggml_type_info(uint32_t type);

// Stored bytes and elements per ggml type over all tensors, and the average bits per weight.
struct GgufWeights {
  struct PerType {
    uint64_t tensors = 0, elements = 0, bytes = 0;
  };
  std::map<std::string, PerType> by_type;
  uint64_t elements = 0, bytes = 0;
  double bits_per_weight() const { return elements ? 8.0 * double(bytes) / double(elements) : 0; }
};
GgufWeights gguf_weights(const GgufFile& f);

// The HF config.json equivalent of the GGUF metadata (general.architecture and the
// <arch>.block_count / embedding_length / feed_forward_length / attention.head_count /
// head_count_kv / key_length / context_length / expert_count / expert_used_count /
// rope.freq_base keys, the vocabulary from tokenizer.ggml.tokens or token_embd.weight, tied
// embeddings when there is no output.weight). Throws InputError naming the file and the key.
nlohmann::json gguf_hf_config(const GgufFile& f);
// gguf_hf_config read by the config.json reader; name from general.name or the file name; `quant`
// from gguf_quantization, so plans count the bytes the file stores.
ModelConfig gguf_model_config(const GgufFile& f);
// What each planner matrix is stored in: the file's weight tensors (blk.N.attn_q/k/v/qkv ->
// "qkv", attn_output -> "o", ffn_gate/ffn_up -> "gate_up" ("up" without a gate), ffn_down,
// ffn_gate_inp -> "router", ffn_*_exps -> "expert.*", ffn_*_shexp -> "shared.*", token_embd ->
// "embedding", output -> "lm_head") grouped into Quantization::per_matrix. F16/BF16 matrices are
// dense; block types are ScaleLayout::Ggml with their exact bits per weight, labelled for the
// cost model as int8 (8-bit blocks: Q8_0), mxfp4, or int4 (fewer bits: Q2_K..Q6_K, IQ*, Q4_0..).
// Norms, biases and rope factors (vectors) are not matrices: the planner holds them in bf16.
Quantization gguf_quantization(const GgufFile& f, const ModelConfig& c);
// The GGUF architectures gguf_hf_config maps.
std::vector<std::string> gguf_supported_architectures();

}  // namespace peerplan

namespace peerplan {

// What the file stores, for `peerplan model FILE.gguf`: version, tensor count, bytes per ggml
// type and the average bits per weight (text lines, and the same as JSON).
std::string gguf_summary_text(const GgufFile& f);
nlohmann::json gguf_summary_json(const GgufFile& f);

}  // namespace peerplan
