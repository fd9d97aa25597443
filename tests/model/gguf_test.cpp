// GGUF header reader: every value type, tensor sizes from the ggml block table, the mapping to a
// model config, a real model's header (tests/data/model/llama-3.1-8b-q4_k_m.header.gguf, written by
// make_gguf_header_fixture.py beside it), and the refusals of hostile files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "planner/compile/compiler.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/model/gguf.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/model_summary.hpp"
#include "planner/sim/iteration_cost.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/topology.hpp"
#include "tests/model/gguf_writer.hpp"
#include "tests/plan_fixtures.hpp"

namespace peerplan {
namespace {

using test_gguf::Writer;
namespace fs = std::filesystem;

struct T {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type;
  uint64_t bytes;  // expected
};

// ggml type ids: F32 0, F16 1, Q4_0 2, Q8_0 8, Q4_K 12, Q6_K 14, BF16 30.
const std::vector<T> kTiny = {
    {"token_embd.weight", {64, 5000}, 8, 5000 * 2 * 34},  // Q8_0: 32 per 34-byte block
    {"blk.0.attn_norm.weight", {64}, 0, 256},
    {"blk.0.attn_q.weight", {64, 64}, 1, 8192},
    {"blk.0.attn_k.weight", {64, 32}, 30, 4096},
    {"blk.0.ffn_up.weight", {256, 4}, 12, 4 * 144},
    {"blk.1.ffn_down.weight", {256, 2}, 14, 2 * 210},
    {"blk.1.attn_v.weight", {64, 2}, 2, 4 * 18},
};

// A small llama model: metadata of several types, a 5000-token vocabulary (longer than the reader
// keeps), and kTiny's tensors with their data.
std::string tiny_llama(uint32_t version = 3, bool with_data = true) {
  Writer w;
  w.header(version, kTiny.size(), 14);
  w.kv_str("general.architecture", "llama").kv_str("general.name", "tiny-llama");
  w.kv_u32("llama.block_count", 2).kv_u64("llama.context_length", 256);
  w.kv_u32("llama.embedding_length", 64).kv_i32("llama.feed_forward_length", 128);
  w.kv_u32("llama.attention.head_count", 4).kv_u32("llama.attention.head_count_kv", 2);
  w.kv_f32("llama.rope.freq_base", 10000.f).kv_f64("test.f64", 0.25).kv_bool("test.bool", true);
  w.kv_i32_array("test.small", {1, -2, 3});
  std::vector<std::string> tokens;
  for (int i = 0; i < 5000; ++i) tokens.push_back("tok" + std::to_string(i));
  w.kv_str_array("tokenizer.ggml.tokens", tokens);
  w.kv_i16("test.i16", -7);
  uint64_t off = 0, end = 0;
  for (const T& t : kTiny) {
    w.tensor(t.name, t.dims, t.type, off);
    end = off + t.bytes;
    off = (end + 31) / 32 * 32;
  }
  if (with_data) w.data(end);
  return w.bytes;
}

GgufFile parse(const std::string& bytes, GgufReadOptions opt = {}) {
  std::istringstream in(bytes);
  return parse_gguf(in, bytes.size(), "mem.gguf", opt);
}

// The error's text, for checks on what it names.
std::string error_of(const std::string& bytes, GgufReadOptions opt = {}) {
  try {
    parse(bytes, opt);
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "mem.gguf");
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(Gguf, ReadsEveryValueTypeAndTensorSizes) {
  GgufFile f = parse(tiny_llama());
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.kv.size(), 14u);
  EXPECT_EQ(f.find("general.architecture")->value, "llama");
  EXPECT_EQ(f.find("llama.context_length")->type, GgufValueType::U64);
  EXPECT_EQ(f.find("llama.feed_forward_length")->value, 128);
  EXPECT_FLOAT_EQ(f.find("llama.rope.freq_base")->value.get<double>(), 10000.0);
  EXPECT_DOUBLE_EQ(f.find("test.f64")->value.get<double>(), 0.25);
  EXPECT_EQ(f.find("test.bool")->value, true);
  EXPECT_EQ(f.find("test.i16")->value, -7);
  EXPECT_EQ(f.find("test.small")->value, nlohmann::json({1, -2, 3}));
  const GgufKV* tok = f.find("tokenizer.ggml.tokens");
  EXPECT_EQ(tok->array_type, GgufValueType::String);
  EXPECT_EQ(tok->array_count, 5000u);
  EXPECT_TRUE(tok->value.empty()) << "a long array is counted, not kept";
  ASSERT_EQ(f.tensors.size(), kTiny.size());
  for (size_t i = 0; i < kTiny.size(); ++i) {
    EXPECT_EQ(f.tensors[i].name, kTiny[i].name);
    EXPECT_EQ(f.tensors[i].dims, kTiny[i].dims);
    EXPECT_EQ(f.tensors[i].bytes, kTiny[i].bytes) << kTiny[i].name;
  }
  EXPECT_TRUE(f.data_present);
  EXPECT_EQ(f.data_offset % 32, 0u);
  GgufWeights w = gguf_weights(f);
  EXPECT_EQ(w.by_type.at("Q8_0").bytes, 340000u);
  EXPECT_EQ(w.by_type.at("BF16").elements, 2048u);
  EXPECT_EQ(w.by_type.size(), 7u);
  EXPECT_NEAR(w.bits_per_weight(), 8.0 * double(w.bytes) / double(w.elements), 1e-12);
  EXPECT_EQ(parse(tiny_llama(2)).version, 2u);
}

TEST(Gguf, BlockTableMatchesGgml) {
  // {type, elements per block, bytes per block} from ggml.c's type_traits.
  struct Row { uint32_t t; const char* name; uint32_t be, bb; };
  for (Row r : {Row{0, "F32", 1, 4}, {1, "F16", 1, 2}, {2, "Q4_0", 32, 18}, {8, "Q8_0", 32, 34}, {10, "Q2_K", 256, 84},
                {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210},
                {23, "IQ4_XS", 256, 136}, {30, "BF16", 1, 2}, {39, "MXFP4", 32, 17}}) {
    GgmlTypeInfo i = ggml_type_info(r.t);
    EXPECT_STREQ(i.name, r.name);
    EXPECT_EQ(i.block_elems, r.be) << r.name;
    EXPECT_EQ(i.block_bytes, r.bb) << r.name;
  }
  EXPECT_EQ(ggml_type_info(4).block_elems, 0u) << "Q4_2 was removed";
  EXPECT_EQ(ggml_type_info(40).block_elems, 0u);
}

TEST(Gguf, MapsMetadataToTheModelConfig) {
  ModelConfig c = gguf_model_config(parse(tiny_llama()));
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.name, "tiny-llama");
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate, 128);
  EXPECT_EQ(c.vocab, 5000) << "from tokenizer.ggml.tokens";
  EXPECT_EQ(c.max_context, 256);
  EXPECT_TRUE(c.tied_embeddings) << "no output.weight tensor";
  EXPECT_EQ(c.source_file, "mem.gguf");
}

TEST(Gguf, LoadModelConfigReadsAGgufFile) {
  fs::path dir = fs::temp_directory_path() / ("peerplan-gguf-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "tiny.Q8_0.GGUF").string();
  std::ofstream(path, std::ios::binary) << tiny_llama();
  ModelConfig c = load_model_config(resolve_model_path(path));
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.source_file, path);
  // Cut inside the tensor data: refused as truncated, naming the last tensor.
  std::string bytes = tiny_llama();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 10);
  try {
    load_model_config(path);
    ADD_FAILURE() << "a truncated file was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(Gguf, RealModelHeaderFixture) {
  const std::string path = std::string(PEERPLAN_TEST_DATA) + "/model/llama-3.1-8b-q4_k_m.header.gguf";
  EXPECT_THROW(read_gguf(path), InputError) << "header only: refused unless allowed";
  GgufFile f = read_gguf(path, {.allow_missing_data = true});
  EXPECT_FALSE(f.data_present);
  EXPECT_EQ(f.tensors.size(), 292u);
  ModelConfig c = gguf_model_config(f);
  EXPECT_EQ(c.name, "Meta Llama 3.1 8B Instruct");
  EXPECT_EQ(c.layers, 32);
  EXPECT_EQ(c.hidden, 4096);
  EXPECT_EQ(c.heads, 32);
  EXPECT_EQ(c.kv_heads, 8);
  EXPECT_EQ(c.intermediate, 14336);
  EXPECT_EQ(c.vocab, 128256);
  EXPECT_EQ(c.max_context, 131072);
  EXPECT_FALSE(c.tied_embeddings);
  GgufWeights w = gguf_weights(f);
  // 8.03 B weights; the published Q4_K_M file is 4.92 GB of which ~8 MB is the tokenizer header.
  EXPECT_EQ(w.elements, 8030261312u);
  EXPECT_EQ(w.bytes, 4912898304u);
  EXPECT_NEAR(w.bits_per_weight(), 4.894, 0.001);
  EXPECT_EQ(w.by_type.at("Q6_K").tensors, 33u) << "output + attn_v and ffn_down on 16 layers";
}

// Plans count what the file stores (issue 19): the memory model and the GEMMs read each matrix's
// bytes from its GGUF tensors' types through Quantization::per_matrix (the stored-bytes mechanism
// quantization_config uses), not bf16.
GgufFile real_q4_k_m() {
  return read_gguf(std::string(PEERPLAN_TEST_DATA) + "/model/llama-3.1-8b-q4_k_m.header.gguf",
                   {.allow_missing_data = true});
}

TEST(Gguf, PlanMemoryCountsTheFileBytes) {
  GgufFile f = real_q4_k_m();
  ModelConfig c = gguf_model_config(f);
  EXPECT_EQ(c.quant.method, "gguf");
  EXPECT_TRUE(c.quant.quantized());
  // Expected, from the tensor table alone: every 2-D tensor at its stored bytes, the vectors
  // (norms) at 2 bytes per weight (the planner holds them in bf16; rope_freqs is not a weight).
  uint64_t matrix_bytes = 0, q6k_bytes = 0, vector_elems = 0;
  for (const auto& t : f.tensors) {
    if (t.dims.size() >= 2) {
      matrix_bytes += t.bytes;
      if (std::string(ggml_type_info(t.ggml_type).name) == "Q6_K") q6k_bytes += t.bytes;
    } else if (t.name != "rope_freqs.weight") {
      vector_elems += t.elements;
    }
  }
  EXPECT_EQ(vector_elems, 65u * 4096u) << "attn_norm, ffn_norm on 32 layers, output_norm";
  const int64_t expected = int64_t(matrix_bytes + 2 * vector_elems);
  ModelFigures fig = derive_figures(c);
  EXPECT_EQ(fig.weight_bytes, expected);
  // One GPU: the plan's memory report holds every stored byte.
  const Machine m = load_machine(find_data_file("models/hardware/rtx4090x4-pcie.json"));
  MemoryOptions mo;
  mo.max_seqs = 8, mo.context = 8192, mo.max_batched_tokens = 2048;
  const Plan one = test_plans::tp({0}, int(c.layers));
  MemoryReport r = check_memory(one, c, fig, m, mo);
  EXPECT_EQ(r.gpus[0].weights, expected);
  EXPECT_EQ(r.gpus[0].weights, 4912898304 - 64 * 4 - 65 * 4096 * 2) << "the file's 4.91 GB, norms at 2 bytes not 4";
  // By format: the block types under int4 (Q4_K and Q6_K: 4.5 and 6.5625 bits), exactly the matrix
  // bytes; the norms' 0.5 MB under the model's dense dtype (bf16), not the embedding's format.
  int64_t by_dtype = 0;
  for (const auto& [name, b] : r.weight_bytes_by_dtype) by_dtype += b;
  EXPECT_EQ(by_dtype, expected);
  ASSERT_EQ(r.weight_bytes_by_dtype.size(), 2u);
  EXPECT_EQ(r.weight_bytes_by_dtype[0].first, "bf16");
  EXPECT_EQ(r.weight_bytes_by_dtype[0].second, int64_t(2 * vector_elems));
  EXPECT_EQ(r.weight_bytes_by_dtype[1].first, "int4");
  EXPECT_EQ(r.weight_bytes_by_dtype[1].second, int64_t(matrix_bytes));
  // The mixed matrix of a use_more_bits layer (attn_v in Q6_K): q/k Q4_K + v Q6_K, bytes summed.
  const MatrixShape* qkv = nullptr;
  for (const auto& mm : fig.layers[0].matrices)
    if (mm.name == "qkv") qkv = &mm;
  ASSERT_TRUE(qkv);
  EXPECT_EQ(qkv->format.ggml_types, "Q4_K+Q6_K");
  EXPECT_DOUBLE_EQ(qkv->bytes, (4096.0 * 4096 + 4096.0 * 1024) * 144 / 256 + 4096.0 * 1024 * 210 / 256);
  EXPECT_GT(q6k_bytes, 0u);
  // Two GPUs of TP 2 hold the same bytes between them (norms replicated).
  MemoryReport r2 = check_memory(test_plans::tp({0, 1}, int(c.layers)), c, fig, m, mo);
  EXPECT_NEAR(double(r2.gpus[0].weights + r2.gpus[1].weights), double(expected + 2 * vector_elems), 64.0);
}

TEST(Gguf, SummarySaysWhichWeightsAreDense) {
  // The Q4_K_M file's embedding is Q4_K: the summary must not call it dense (it did: "dense:
  // embedding, router, ..."), and a dense model has no router to name.
  ModelConfig c = gguf_model_config(real_q4_k_m());
  ModelFigures fig = derive_figures(c);
  ASSERT_NE(fig.model_matrices[0].format.scales, ScaleLayout::None) << "fixture: a quantized embedding";
  const std::string s = model_summary_text(c, fig);
  const size_t at = s.find("    quantized       ");
  ASSERT_NE(at, std::string::npos) << s;
  const std::string line = s.substr(at, s.find('\n', at) - at);
  EXPECT_EQ(line.find("dense: embedding"), std::string::npos) << line;
  EXPECT_EQ(line.find("router"), std::string::npos) << line;
  EXPECT_NE(line.find("dense: norms, biases"), std::string::npos) << line;
  EXPECT_NE(line.find("embedding"), std::string::npos) << "the embedding's own format is named: " << line;
}

TEST(Gguf, Q4FitsWhereBf16DoesNot) {
  // Llama-3.1-8B on one 24 GB RTX 4090 with 8 sequences of 8k tokens: the Q4_K_M file fits, the
  // same model in bf16 (its GGUF metadata without the tensor types) does not.
  GgufFile f = real_q4_k_m();
  ModelConfig q4 = gguf_model_config(f);
  ModelConfig bf16 = q4;
  bf16.quant = Quantization{};
  const Machine m = load_machine(find_data_file("models/hardware/rtx4090x4-pcie.json"));
  MemoryOptions mo;
  mo.max_seqs = 8, mo.context = 8192, mo.max_batched_tokens = 2048;
  const Plan one = test_plans::tp({0}, int(q4.layers));
  MemoryReport rq = check_memory(one, q4, derive_figures(q4), m, mo);
  MemoryReport rb = check_memory(one, bf16, derive_figures(bf16), m, mo);
  EXPECT_TRUE(rq.fits) << rq.why;
  EXPECT_FALSE(rb.fits) << "16 GB of bf16 weights + 8 GiB of KV cache on a 24 GB card";
  EXPECT_NEAR(double(rq.gpus[0].weights) / double(rb.gpus[0].weights), 4.894 / 16, 0.002);
  EXPECT_GT(rq.max_seqs_that_fit, rb.max_seqs_that_fit);
  // --weights still asks "what if": it replaces the file's formats.
  ModelConfig w = q4;
  apply_precision(w, DType::FP8_E4M3, std::nullopt);
  EXPECT_TRUE(w.quant.per_matrix.empty());
}

TEST(Gguf, TensorTypesMapToPlannerMatrices) {
  // Q8_0 embedding, F16/BF16 attention (dense: 2 bytes), Q4_K / Q6_K / Q4_0 block types; a
  // llama file without output.weight ties the LM head to the embedding.
  GgufFile f = parse(tiny_llama());
  Quantization q = gguf_quantization(f, gguf_model_config(f));
  EXPECT_EQ(q.per_matrix.at({-1, "embedding"}).dtype, DType::INT8);
  EXPECT_DOUBLE_EQ(q.per_matrix.at({-1, "embedding"}).bits_per_weight, 8.5);
  EXPECT_EQ(q.per_matrix.at({0, "qkv"}).scales, ScaleLayout::None) << "F16 q + BF16 k: dense";
  EXPECT_EQ(q.per_matrix.at({0, "gate_up"}).ggml_types, "Q4_K");
  EXPECT_DOUBLE_EQ(q.per_matrix.at({1, "down"}).bits_per_weight, 6.5625);
  EXPECT_EQ(q.per_matrix.at({1, "qkv"}).ggml_types, "Q4_0");
  EXPECT_EQ(q.per_matrix.count({-1, "lm_head"}), 0u);
  EXPECT_EQ(q.per_matrix.size(), 5u) << "norms are not matrices";
  EXPECT_DOUBLE_EQ(stored_bytes(q.per_matrix.at({1, "down"}), 256, 2, 1, 2), 420.0);
  // MoE tensors: stacked experts, shared experts, router, and early Mixtral's one-by-one experts.
  Writer w;
  w.header(3, 6, 0);
  w.tensor("blk.2.ffn_gate_exps.weight", {256, 8, 4}, 12, 0).tensor("blk.2.ffn_up_exps.weight", {256, 8, 4}, 14, 4608);
  w.tensor("blk.2.ffn_gate_inp.weight", {256, 4}, 0, 11328).tensor("blk.2.ffn_down_shexp.weight", {256, 8}, 8, 15424);
  w.tensor("blk.3.ffn_down.7.weight", {256, 8}, 12, 17600).tensor("blk.3.attn_output.bias", {256}, 0, 18752);
  GgufFile moe = parse(w.data(19776).bytes);
  Quantization qm = gguf_quantization(moe, gguf_model_config(f));
  EXPECT_EQ(qm.per_matrix.at({2, "expert.gate_up"}).ggml_types, "Q4_K+Q6_K");
  EXPECT_DOUBLE_EQ(qm.per_matrix.at({2, "expert.gate_up"}).bits_per_weight, (4.5 + 6.5625) / 2);
  EXPECT_EQ(qm.per_matrix.at({2, "router"}).dtype, DType::BF16) << "F32: 4 bytes, priced dense";
  EXPECT_DOUBLE_EQ(qm.per_matrix.at({2, "router"}).bits_per_weight, 32.0);
  EXPECT_EQ(qm.per_matrix.at({2, "shared.down"}).dtype, DType::INT8);
  EXPECT_EQ(qm.per_matrix.at({3, "expert.down"}).ggml_types, "Q4_K");
  EXPECT_EQ(qm.per_matrix.size(), 4u);
}

TEST(Gguf, MixtureOfExpertsArchitectures) {
  Writer w;
  w.header(3, 0, 10);
  w.kv_str("general.architecture", "qwen3moe").kv_u32("qwen3moe.block_count", 4);
  w.kv_u32("qwen3moe.embedding_length", 128).kv_u32("qwen3moe.attention.head_count", 4);
  w.kv_u32("qwen3moe.attention.head_count_kv", 2).kv_u32("qwen3moe.attention.key_length", 64);
  w.kv_u32("qwen3moe.expert_count", 8).kv_u32("qwen3moe.expert_used_count", 2);
  w.kv_u32("qwen3moe.expert_feed_forward_length", 96).kv_u32("qwen3moe.vocab_size", 1000);
  ModelConfig c = gguf_model_config(parse(w.bytes));
  EXPECT_EQ(c.architecture, "Qwen3MoeForCausalLM");
  EXPECT_EQ(c.experts, 8);
  EXPECT_EQ(c.experts_per_token, 2);
  EXPECT_EQ(c.expert_intermediate, 96);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_FALSE(c.tied_embeddings) << "no tensors listed: nothing to say about tying";
}

TEST(Gguf, MetadataErrorsNameTheKey) {
  auto config_error = [](Writer w) -> std::string {
    try {
      gguf_model_config(parse(w.bytes));
    } catch (const InputError& e) {
      return e.what();
    }
    return "accepted";
  };
  Writer a;
  a.header(3, 0, 1).kv_str("general.architecture", "gpt2");
  EXPECT_NE(config_error(a).find("one of llama, qwen2"), std::string::npos) << config_error(a);
  Writer b;
  b.header(3, 0, 2).kv_str("general.architecture", "llama").kv_u32("llama.embedding_length", 64);
  EXPECT_NE(config_error(b).find("llama.block_count"), std::string::npos) << config_error(b);
  Writer c;
  c.header(3, 0, 5).kv_str("general.architecture", "llama").kv_u32("llama.block_count", 2);
  c.kv_u32("llama.embedding_length", 64).kv_u32("llama.feed_forward_length", 128);
  c.kv_i32_array("llama.attention.head_count", {4, 4});
  EXPECT_NE(config_error(c).find("per-layer"), std::string::npos) << config_error(c);
  Writer d;  // the config reader's own checks run on the mapped values
  d.header(3, 0, 6).kv_str("general.architecture", "llama").kv_u32("llama.block_count", 2);
  d.kv_u32("llama.embedding_length", 64).kv_u32("llama.feed_forward_length", 128);
  d.kv_u32("llama.attention.head_count", 5).kv_u32("llama.vocab_size", 10);
  EXPECT_NE(config_error(d).find("num_attention_heads"), std::string::npos) << config_error(d);
}

TEST(Gguf, HostileHeadersAreRefusedWithTheOffset) {
  const std::string good = tiny_llama();
  EXPECT_NE(error_of("GGU").find("magic"), std::string::npos);
  EXPECT_NE(error_of("GGML" + good.substr(4)).find("magic"), std::string::npos);
  EXPECT_NE(error_of(tiny_llama(1)).find("version 1"), std::string::npos);
  EXPECT_NE(error_of(tiny_llama(4)).find("version 2 or 3, got 4"), std::string::npos);
  EXPECT_NE(error_of(tiny_llama(0x03000000)).find("big-endian"), std::string::npos);
  // Every proper prefix of the header is refused (never read past the end, never crash).
  const size_t header_end = parse(good).data_offset;
  for (size_t n = 0; n < header_end; n += n < 256 ? 1 : 211) EXPECT_THROW(parse(good.substr(0, n)), InputError) << n;

  Writer huge;
  huge.header(3, 0, uint64_t(1) << 60);
  EXPECT_NE(error_of(huge.bytes).find("metadata_kv_count"), std::string::npos);
  Writer tensors;
  tensors.header(3, uint64_t(1) << 40, 0);
  EXPECT_NE(error_of(tensors.bytes).find("tensor_count"), std::string::npos);
  Writer longstr;
  longstr.header(3, 0, 1).num<uint64_t>(uint64_t(1) << 62).num<uint64_t>(0);  // room for one pair: the length fails
  EXPECT_NE(error_of(longstr.bytes).find("length"), std::string::npos);
  Writer type13;
  type13.header(3, 0, 1).str("k").num<uint32_t>(13).num<uint32_t>(0);
  EXPECT_NE(error_of(type13.bytes).find("value type 0..12"), std::string::npos);
  Writer nested;
  nested.header(3, 0, 1).str("k").num<uint32_t>(9).num<uint32_t>(9).num<uint64_t>(1);
  EXPECT_NE(error_of(nested.bytes).find("nested"), std::string::npos);
  Writer bigarray;
  bigarray.header(3, 0, 1).str("k").num<uint32_t>(9).num<uint32_t>(6).num<uint64_t>(uint64_t(1) << 61);
  EXPECT_NE(error_of(bigarray.bytes).find("fits in the file"), std::string::npos);
  Writer badbool;
  badbool.header(3, 0, 1).kv_u8("x", 0);
  badbool.bytes[badbool.bytes.size() - 5] = 7;  // the type field: 7 = bool, then the value byte 0
  badbool.bytes.back() = 2;
  EXPECT_NE(error_of(badbool.bytes).find("bool"), std::string::npos);
  Writer dup;
  dup.header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2);
  EXPECT_NE(error_of(dup.bytes).find("duplicate"), std::string::npos);
  Writer align;
  align.header(3, 0, 1).kv_u32("general.alignment", 24);
  EXPECT_NE(error_of(align.bytes).find("power of two"), std::string::npos);
}

TEST(Gguf, HostileTensorInfosAreRefused) {
  auto one = [](const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    Writer w;
    w.header(3, 1, 0).tensor(name, dims, type, offset).data(1 << 12);
    return w.bytes;
  };
  EXPECT_NE(error_of(one("t", {32}, 4, 0)).find("known ggml tensor type"), std::string::npos);
  EXPECT_NE(error_of(one("t", {}, 0, 0)).find("1..4 dimensions"), std::string::npos);
  EXPECT_NE(error_of(one("t", {1, 1, 1, 1, 1}, 0, 0)).find("1..4 dimensions"), std::string::npos);
  EXPECT_NE(error_of(one("t", {0}, 0, 0)).find("size >= 1"), std::string::npos);
  EXPECT_NE(error_of(one("t", {100}, 12, 0)).find("block of 256"), std::string::npos);
  EXPECT_NE(error_of(one("t", {8}, 0, 16)).find("alignment"), std::string::npos);
  EXPECT_NE(error_of(one("t", {uint64_t(1) << 40, uint64_t(1) << 40}, 0, 0)).find("63 bits"), std::string::npos);
  EXPECT_NE(error_of(one(std::string(64, 'n'), {8}, 0, 0)).find("at most 63 bytes"), std::string::npos);
  EXPECT_NE(error_of(one("t", {4096}, 0, 0)).find("truncated"), std::string::npos);
  EXPECT_FALSE(parse(one("t", {4096}, 0, 0), {.allow_missing_data = true}).data_present);
  Writer overlap;
  overlap.header(3, 2, 0).tensor("a", {64}, 0, 0).tensor("b", {64}, 0, 128).data(512);
  EXPECT_NE(error_of(overlap.bytes).find("overlap"), std::string::npos);
  Writer dup;
  dup.header(3, 2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).data(64);
  EXPECT_NE(error_of(dup.bytes).find("duplicate"), std::string::npos);
}

}  // namespace
}  // namespace peerplan

namespace peerplan {
// The pricer compiles one representative layer per layer kind. Q4_K_M keeps attn_v and ffn_down in Q6_K on 16 of
// the 32 layers, so those layers read more bytes: they are a kind of their own, and the reduced pricer must give
// what pricing every layer does (before session 31 the stored format was not part of a layer's kind).
TEST(Gguf, ReducedPricerKeepsTheLayersStoredInAnotherType) {
  GgufFile f = read_gguf(std::string(PEERPLAN_TEST_DATA) + "/model/llama-3.1-8b-q4_k_m.header.gguf",
                         {.allow_missing_data = true});
  const ModelConfig c = gguf_model_config(f);
  const ModelFigures fig = derive_figures(c);
  int64_t lo = fig.layers.front().weight_bytes, hi = lo;
  for (const LayerFigures& l : fig.layers) lo = std::min(lo, l.weight_bytes), hi = std::max(hi, l.weight_bytes);
  ASSERT_LT(lo, hi) << "the file's layers differ in stored bytes";
  const Topology topo(load_machine(find_data_file("models/hardware/rtx4090x4-pcie.json")));
  const CostModel cost(topo);
  const Plan plan = test_plans::tp({0}, int(c.layers));
  PricerOptions exact;
  exact.reuse_layers = false;
  PlanPricer reduced(plan, c, fig, cost), per_layer(plan, c, fig, cost, exact);
  for (int64_t batch : {1, 8}) {
    BatchShape b;
    b.decode_seqs = batch, b.decode_context = 1024;
    EXPECT_NEAR(reduced.price(b).total_s() / per_layer.price(b).total_s(), 1.0, 1e-6) << "batch " << batch;
  }
}
}  // namespace peerplan
