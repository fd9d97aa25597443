// Parsing HF config.json for each family, and every class of bad input (file + field named).
#include <filesystem>

#include "model_test_util.hpp"
#include "planner/model/model_figures.hpp"

namespace peerplan {
namespace {

using test::expect_input_error;
using test::read_json;
using test::shipped_config;
using test::test_data;

// A valid config with one key replaced (or removed when v is discarded).
ModelConfig parse_with(const std::string& base, const std::string& key, const nlohmann::json& v,
                       const std::string& origin = "edited/config.json") {
  nlohmann::json j = read_json(shipped_config(base));
  if (v.is_discarded()) j.erase(key); else j[key] = v;
  return parse_model_config(j.dump(), origin);
}
const nlohmann::json kRemove = nlohmann::json(nlohmann::json::value_t::discarded);

TEST(ModelConfig, Llama8bReadsEveryField) {
  ModelConfig c = load_model_config(shipped_config("llama-3.1-8b"));
  EXPECT_EQ(c.name, "llama-3.1-8b");  // named by its directory, as users refer to it
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.hidden, 4096);
  EXPECT_EQ(c.layers, 32);
  EXPECT_EQ(c.heads, 32);
  EXPECT_EQ(c.kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // hidden / heads, since head_dim is absent
  EXPECT_EQ(c.intermediate, 14336);
  EXPECT_EQ(c.vocab, 128256);
  EXPECT_EQ(c.max_context, 131072);
  EXPECT_EQ(c.dtype, "bfloat16");
  EXPECT_EQ(c.dtype_bytes, 2);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_FALSE(c.is_moe());
  EXPECT_FALSE(c.mla);
}

TEST(ModelConfig, ExplicitHeadDimWins) {
  // Llama 3.2 1B: hidden 2048 / 32 heads = 64 = head_dim; and it ties embeddings.
  ModelConfig c = load_model_config(test_data("llama-3.2-1b.json"));
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.name, "llama-3.2-1b");
  // head_dim given explicitly need not equal hidden / heads (Qwen3, Gemma do this).
  ModelConfig d = parse_with("llama-3.1-8b", "head_dim", 256);
  EXPECT_EQ(d.head_dim, 256);
}

TEST(ModelConfig, MistralKeepsSlidingWindowQwen2HasQkvBias) {
  ModelConfig m = load_model_config(shipped_config("mistral-7b"));
  EXPECT_EQ(m.sliding_window, 4096);
  ModelConfig q = load_model_config(test_data("qwen2-7b.json"));
  EXPECT_TRUE(q.attention_bias);       // Qwen2Attention always has q/k/v bias
  EXPECT_EQ(q.sliding_window, 0);      // use_sliding_window is false
  EXPECT_EQ(q.kv_heads, 4);
  ModelConfig p = load_model_config(test_data("phi-3-mini.json"));
  EXPECT_EQ(p.architecture, "Phi3ForCausalLM");
  EXPECT_EQ(p.kv_heads, 32);
}

// Issue 18: a window is applied where the checkpoint's own code applies it. Mistral-7B-v0.1 (the
// shipped config) has sliding_window 4096, which transformers and vLLM use on every layer; v0.2/v0.3
// and Mixtral-8x7B set it to null (full attention); Qwen2 only with use_sliding_window, from layer
// max_window_layers on; Phi-3-mini-4k's 2047 on every layer.
TEST(ModelConfig, SlidingWindowAppliesWhereTheCheckpointUsesIt) {
  ModelConfig m = load_model_config(shipped_config("mistral-7b"));
  ASSERT_EQ(m.layer_window.size(), size_t(m.layers));
  for (int64_t l = 0; l < m.layers; ++l) EXPECT_EQ(m.window_of(l), 4096) << "Mistral-7B-v0.1 layer " << l;
  EXPECT_TRUE(m.has_windows());
  ModelConfig v02 = parse_with("mistral-7b", "sliding_window", nullptr);  // v0.2 / v0.3: null
  EXPECT_EQ(v02.sliding_window, 0);
  EXPECT_FALSE(v02.has_windows()) << "sliding_window null: full attention everywhere";
  EXPECT_EQ(v02.window_of(0), 0);
  ModelConfig mx = load_model_config(shipped_config("mixtral-8x7b"));
  EXPECT_FALSE(mx.has_windows()) << "Mixtral-8x7B's sliding_window is null";
  ModelConfig mx4k = parse_with("mixtral-8x7b", "sliding_window", 4096);
  EXPECT_EQ(mx4k.window_of(mx4k.layers - 1), 4096);
  ModelConfig q = load_model_config(test_data("qwen2-7b.json"));
  EXPECT_FALSE(q.has_windows()) << "use_sliding_window false: sliding_window 131072 is not applied";
  nlohmann::json j = read_json(test_data("qwen2-7b.json"));
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 20;
  ModelConfig qw = parse_model_config(j.dump(), "qwen2-swa/config.json");
  EXPECT_EQ(qw.window_of(19), 0) << "below max_window_layers: full attention";
  EXPECT_EQ(qw.window_of(20), 4096);
  EXPECT_EQ(qw.window_of(qw.layers - 1), 4096);
  ModelConfig p = load_model_config(test_data("phi-3-mini.json"));
  EXPECT_EQ(p.window_of(0), 2047);
  EXPECT_EQ(p.window_of(p.layers - 1), 2047);
  // layer_types, where a config has it, says which layers are windowed.
  nlohmann::json lt = read_json(shipped_config("mistral-7b"));
  lt["layer_types"] = nlohmann::json::array();
  for (int l = 0; l < 32; ++l) lt["layer_types"].push_back(l % 4 == 3 ? "full_attention" : "sliding_attention");
  ModelConfig ml = parse_model_config(lt.dump(), "mistral-lt/config.json");
  EXPECT_EQ(ml.window_of(2), 4096);
  EXPECT_EQ(ml.window_of(3), 0);
}

// The summary's FLOPs per token at a context: a windowed layer attends to at most its window.
TEST(ModelConfig, FlopsPerTokenAtAContextStopAtTheWindow) {
  ModelConfig m = load_model_config(shipped_config("mistral-7b"));
  const ModelFigures f = derive_figures(m);
  EXPECT_DOUBLE_EQ(f.flops_per_token_at(32768), f.flops_per_token_at(4096)) << "every layer windowed at 4096";
  EXPECT_DOUBLE_EQ(f.flops_per_token_at(4096) - f.flops_per_token_at(1), 4095 * f.flops_per_context_token);
  ModelConfig full = m;
  full.layer_window.clear();
  const ModelFigures ff = derive_figures(full);
  EXPECT_GT(ff.flops_per_token_at(32768), f.flops_per_token_at(32768) * 1.5);
}

// attended_pairs: the band's work that the compiler and the pricing use.
TEST(ModelConfig, AttendedPairsOfAWindowedChunk) {
  EXPECT_DOUBLE_EQ(attended_pairs(4, 4, 0), 1 + 2 + 3 + 4);     // causal prompt
  EXPECT_DOUBLE_EQ(attended_pairs(2, 10, 0), 9 + 10);           // chunk over a cached context
  EXPECT_DOUBLE_EQ(attended_pairs(4, 4, 8), 10) << "window larger than the context: causal";
  EXPECT_DOUBLE_EQ(attended_pairs(6, 6, 3), 1 + 2 + 3 + 3 + 3 + 3) << "prompt crossing the window";
  EXPECT_DOUBLE_EQ(attended_pairs(3, 100, 3), 9) << "chunk wholly past the window: q x window";
  EXPECT_DOUBLE_EQ(attended_pairs(4, 6, 4), 3 + 4 + 4 + 4) << "chunk starting inside the window, crossing its edge";
  double brute = 0;
  for (int64_t p = 32768 - 8192; p < 32768; ++p) brute += double(std::min<int64_t>(p + 1, 4096));
  EXPECT_DOUBLE_EQ(attended_pairs(8192, 32768, 4096), brute);
  EXPECT_DOUBLE_EQ(attended_pairs(1, 32768, 4096), 4096) << "decode at 32k reads the 4k window";
}

TEST(ModelConfig, MixtralExperts) {
  ModelConfig c = load_model_config(shipped_config("mixtral-8x7b"));
  EXPECT_EQ(c.experts, 8);
  EXPECT_EQ(c.experts_per_token, 2);
  EXPECT_EQ(c.expert_intermediate, 14336);  // Mixtral's intermediate_size is each expert's
  EXPECT_EQ(c.shared_experts, 0);
  for (int64_t l = 0; l < c.layers; ++l) EXPECT_TRUE(c.is_moe_layer(l)) << l;
}

TEST(ModelConfig, QwenMoeSharedExpertAndSparseStep) {
  ModelConfig c = load_model_config(shipped_config("qwen1.5-moe-a2.7b"));
  EXPECT_EQ(c.experts, 60);
  EXPECT_EQ(c.experts_per_token, 4);
  EXPECT_EQ(c.expert_intermediate, 1408);
  EXPECT_EQ(c.shared_intermediate, 5632);
  EXPECT_TRUE(c.shared_expert_gate);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.is_moe_layer(0));
  // decoder_sparse_step 2: Qwen2MoeDecoderLayer makes layer i sparse when (i + 1) % 2 == 0.
  ModelConfig s = parse_with("qwen1.5-moe-a2.7b", "decoder_sparse_step", 2);
  EXPECT_FALSE(s.is_moe_layer(0));
  EXPECT_TRUE(s.is_moe_layer(1));
  EXPECT_FALSE(s.is_moe_layer(2));
  // mlp_only_layers forces dense layers.
  ModelConfig m = parse_with("qwen1.5-moe-a2.7b", "mlp_only_layers", nlohmann::json::array({0, 5}));
  EXPECT_FALSE(m.is_moe_layer(0));
  EXPECT_TRUE(m.is_moe_layer(1));
  EXPECT_FALSE(m.is_moe_layer(5));
}

TEST(ModelConfig, DeepSeekV2LiteMlaWithFullRankQ) {
  ModelConfig c = load_model_config(shipped_config("deepseek-v2-lite"));
  EXPECT_TRUE(c.mla);
  EXPECT_EQ(c.q_lora_rank, 0);  // null in the config: a full-rank q_proj
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.qk_nope_head_dim, 128);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.experts, 64);
  EXPECT_EQ(c.shared_experts, 2);
  EXPECT_EQ(c.shared_intermediate, 2 * 1408);  // one MLP of n_shared_experts * moe_intermediate_size
  EXPECT_EQ(c.first_dense_layers, 1);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_TRUE(c.is_moe_layer(26));
  EXPECT_FALSE(c.router_bias);
}

TEST(ModelConfig, DeepSeekV3LowRankQAndMoeLayerFreq) {
  ModelConfig c = load_model_config(test_data("deepseek-v3.json"));
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.first_dense_layers, 3);
  EXPECT_TRUE(c.router_bias);  // noaux_tc: e_score_correction_bias
  EXPECT_FALSE(c.is_moe_layer(2));
  EXPECT_TRUE(c.is_moe_layer(3));
  // moe_layer_freq 2: DeepSeek makes layer i MoE when i >= first_k and i % 2 == 0.
  nlohmann::json j = read_json(test_data("deepseek-v3.json"));
  j["moe_layer_freq"] = 2;
  ModelConfig f = parse_model_config(j.dump(), "v3.json");
  EXPECT_FALSE(f.is_moe_layer(3));
  EXPECT_TRUE(f.is_moe_layer(4));
}

TEST(ModelConfig, DtypeFromTorchDtypeOrDtype) {
  EXPECT_EQ(parse_with("llama-3.1-8b", "torch_dtype", "float32").dtype_bytes, 4);
  EXPECT_EQ(parse_with("llama-3.1-8b", "torch_dtype", "float16").dtype_bytes, 2);
  nlohmann::json j = read_json(shipped_config("llama-3.1-8b"));
  j.erase("torch_dtype");
  j["dtype"] = "float32";  // transformers >= 4.56 spelling
  EXPECT_EQ(parse_model_config(j.dump(), "x.json").dtype_bytes, 4);
}

TEST(ModelConfig, ModelTypeAloneIdentifiesTheFamily) {
  ModelConfig c = parse_with("mixtral-8x7b", "architectures", kRemove);
  EXPECT_EQ(c.architecture, "MixtralForCausalLM");
}

// ---- bad input: each message names the file and the field ----

void expect_error(const std::string& base, const std::string& key, const nlohmann::json& v,
                  const std::string& field, const std::string& text_part) {
  InputError e = expect_input_error([&] { parse_with(base, key, v, "models/bad/config.json"); });
  EXPECT_EQ(e.file(), "models/bad/config.json");
  EXPECT_EQ(e.field(), field);
  EXPECT_NE(std::string(e.what()).find("models/bad/config.json"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(text_part), std::string::npos) << e.what();
}

TEST(ModelConfigErrors, UnknownArchitectureListsSupportedOnes) {
  expect_error("llama-3.1-8b", "architectures", nlohmann::json::array({"GPT2LMHeadModel"}), "architectures/0",
               "LlamaForCausalLM");
  expect_error("llama-3.1-8b", "architectures", nlohmann::json::array(), "architectures", "non-empty");
}

TEST(ModelConfigErrors, MissingRequiredField) {
  expect_error("llama-3.1-8b", "hidden_size", kRemove, "hidden_size", "missing");
  expect_error("llama-3.1-8b", "vocab_size", kRemove, "vocab_size", "missing");
  expect_error("mixtral-8x7b", "num_local_experts", kRemove, "num_local_experts", "missing");
  expect_error("qwen1.5-moe-a2.7b", "moe_intermediate_size", kRemove, "moe_intermediate_size", "missing");
  expect_error("deepseek-v2-lite", "kv_lora_rank", kRemove, "kv_lora_rank", "missing");
}

TEST(ModelConfigErrors, WrongType) {
  expect_error("llama-3.1-8b", "hidden_size", "4096", "hidden_size", "number");
  expect_error("llama-3.1-8b", "num_hidden_layers", 32.5, "num_hidden_layers", "integer");
  expect_error("llama-3.1-8b", "tie_word_embeddings", "no", "tie_word_embeddings", "true or false");
  expect_error("llama-3.1-8b", "torch_dtype", "int4", "torch_dtype", "bfloat16, float16 or float32");
}

TEST(ModelConfigErrors, InconsistentValues) {
  // 4096 is not divisible by 30 heads and no head_dim says otherwise.
  expect_error("llama-3.1-8b", "num_attention_heads", 30, "num_attention_heads", "must divide hidden_size");
  // 32 query heads cannot be grouped over 6 KV heads.
  expect_error("llama-3.1-8b", "num_key_value_heads", 6, "num_key_value_heads", "must divide num_attention_heads");
  expect_error("llama-3.1-8b", "num_hidden_layers", 0, "num_hidden_layers", "positive");
  expect_error("llama-3.1-8b", "intermediate_size", -14336, "intermediate_size", "positive");
  expect_error("mixtral-8x7b", "num_experts_per_tok", 9, "num_experts_per_tok", "must not exceed num_local_experts");
  expect_error("deepseek-v2-lite", "num_experts_per_tok", 65, "num_experts_per_tok", "must not exceed n_routed_experts");
  expect_error("deepseek-v2-lite", "first_k_dense_replace", 28, "first_k_dense_replace", "must not exceed");
  expect_error("deepseek-v2-lite", "qk_rope_head_dim", 0, "qk_rope_head_dim", "positive");
  expect_error("qwen1.5-moe-a2.7b", "mlp_only_layers", nlohmann::json::array({3, 24}), "mlp_only_layers/1",
               "[0, 24)");
}

TEST(ModelConfigErrors, ImplausibleSizesAreRejectedBeforeTheyOverflow) {
  expect_error("llama-3.1-8b", "hidden_size", int64_t(1) << 40, "hidden_size", "implausibly large");
  expect_error("llama-3.1-8b", "num_hidden_layers", 1000000000, "num_hidden_layers", "implausibly large");
  expect_error("mixtral-8x7b", "num_local_experts", 1 << 20, "num_local_experts", "implausibly large");
  // Each size within its cap, together over 1e15 parameters.
  nlohmann::json j = read_json(shipped_config("llama-3.1-8b"));
  j["hidden_size"] = 1 << 20;
  j["intermediate_size"] = 1 << 24;
  j["num_attention_heads"] = 1 << 12;
  j["num_key_value_heads"] = 1 << 12;
  InputError e = expect_input_error([&] { parse_model_config(j.dump(), "huge.json"); });
  EXPECT_NE(std::string(e.what()).find("over 1e15"), std::string::npos) << e.what();
}

TEST(ModelConfig, MlaHeadsNeedNotDivideHidden) {
  // MLA head sizes come from qk_nope/qk_rope/v_head_dim, not hidden / heads.
  nlohmann::json j = read_json(shipped_config("deepseek-v2-lite"));
  j["num_attention_heads"] = 24;
  j["num_key_value_heads"] = 24;
  ModelConfig c = parse_model_config(j.dump(), "mla.json");
  EXPECT_EQ(c.head_dim, 192);
}

TEST(ModelConfigErrors, MalformedAndMissingFiles) {
  std::string truncated = test::temp_file("truncated.json", test::kTruncatedConfig);
  InputError e = expect_input_error([&] { load_model_config(truncated); });
  EXPECT_EQ(e.file(), truncated);
  EXPECT_NE(std::string(e.what()).find("line 4"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("malformed JSON"), std::string::npos) << e.what();
  InputError m = expect_input_error([] { load_model_config(test_data("no-such-file.json")); });
  EXPECT_NE(std::string(m.what()).find("no such file"), std::string::npos) << m.what();
  InputError a = expect_input_error([] { parse_model_config("[1, 2]", "array.json"); });
  EXPECT_EQ(a.file(), "array.json");
}

TEST(ModelPaths, ShippedNamesResolve) {
  std::string p = resolve_model_path("llama-3.1-8b");
  EXPECT_TRUE(std::filesystem::exists(p)) << p;
  EXPECT_EQ(load_model_config(p).name, "llama-3.1-8b");
  // A directory holding config.json works too.
  std::string dir = std::string(PEERPLAN_SOURCE_DIR) + "/models/llm/mixtral-8x7b";
  EXPECT_EQ(load_model_config(resolve_model_path(dir)).architecture, "MixtralForCausalLM");
  auto names = shipped_model_names();
  for (const char* n : {"llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "mistral-7b", "qwen1.5-moe-a2.7b",
                        "deepseek-v2-lite"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

TEST(ModelPaths, UnknownNameListsShippedModels) {
  InputError e = expect_input_error([] { resolve_model_path("llama-9000"); });
  EXPECT_EQ(e.file(), "llama-9000");
  EXPECT_NE(std::string(e.what()).find("llama-3.1-8b"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace peerplan
