// quantization_config -> weight formats and stored bytes; --weights / --kv-dtype; gpt-oss; and
// total weight bytes against published checkpoint sizes (docs/model.md cites the sources).
#include <cmath>

#include <gtest/gtest.h>

#include "model_test_util.hpp"
#include "planner/core/json_in.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/quantization.hpp"

namespace peerplan {
namespace {

using test::shipped_config;
using test::test_data;

constexpr double kGiB = double(1LL << 30);

ModelConfig with_quant(const std::string& base, const nlohmann::json& q) {
  nlohmann::json j = test::read_json(shipped_config(base));
  j["quantization_config"] = q;
  return parse_model_config(j.dump(), "test-" + base + ".json");
}

const MatrixShape& matrix(const ModelFigures& f, int64_t layer, const std::string& name) {
  for (const auto& m : f.layers[size_t(layer)].matrices)
    if (m.name == name) return m;
  throw std::runtime_error("no matrix " + name);
}

TEST(Quantization, StoredBytesByScheme) {
  // 4096 x 4096 = 16 Mi weights.
  const int64_t k = 4096, n = 4096;
  const double w = double(k * n);
  WeightFormat fp8_block{DType::FP8_E4M3, ScaleLayout::Block, 0, 128, 128, 4};
  EXPECT_DOUBLE_EQ(stored_bytes(fp8_block, k, n, 1, 2), w + 32 * 32 * 4);
  WeightFormat fp8_tensor{DType::FP8_E4M3, ScaleLayout::Tensor, 0, 0, 0, 4};
  EXPECT_DOUBLE_EQ(stored_bytes(fp8_tensor, k, n, 1, 2), w + 4);
  // AWQ: packed 4-bit, fp16 scales and 4-bit zeros per 128 rows per column.
  WeightFormat awq{DType::INT4, ScaleLayout::Group, 128, 0, 0, 2, 4};
  EXPECT_DOUBLE_EQ(stored_bytes(awq, k, n, 1, 2), w / 2 + 32 * n * (2 + 0.5));
  // MXFP4: 4.25 bits per weight (one uint8 scale per 32).
  WeightFormat mx{DType::MXFP4, ScaleLayout::Group, 32, 0, 0, 1};
  EXPECT_DOUBLE_EQ(stored_bytes(mx, k, n, 2, 2) / (2 * w), 4.25 / 8);
  // Dense: the model's bytes per element.
  EXPECT_DOUBLE_EQ(stored_bytes(WeightFormat{}, k, n, 3, 2), 3 * 2 * w);
}

TEST(Quantization, ReadsEachQuantMethod) {
  ModelConfig fp8 = load_model_config(test_data("deepseek-v3.json"));
  EXPECT_EQ(fp8.quant.method, "fp8");
  EXPECT_EQ(fp8.quant.linear.scales, ScaleLayout::Block);
  EXPECT_EQ(fp8.quant.linear.block_n, 128);
  EXPECT_EQ(fp8.quant.activations, "fp8");
  EXPECT_EQ(fp8.quant.activation_scheme, "dynamic");

  ModelConfig awq = load_model_config(shipped_config("llama-3.1-70b-awq"));
  EXPECT_EQ(awq.quant.method, "awq");
  EXPECT_EQ(awq.quant.linear.dtype, DType::INT4);
  EXPECT_EQ(awq.quant.linear.group, 128);
  EXPECT_EQ(awq.quant.linear.zero_bits, 4);
  EXPECT_EQ(awq.quant.activations, "bf16");  // weight-only

  ModelConfig ct = load_model_config(shipped_config("llama-3.1-8b-fp8"));
  EXPECT_EQ(ct.quant.method, "compressed-tensors");
  EXPECT_EQ(ct.quant.linear.dtype, DType::FP8_E4M3);
  EXPECT_EQ(ct.quant.linear.scales, ScaleLayout::Tensor);
  EXPECT_EQ(ct.quant.activation_scheme, "static");
  ASSERT_EQ(ct.quant.ignore.size(), 1u);

  ModelConfig gptq = with_quant("llama-3.1-8b", {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128},
                                                 {"desc_act", false}, {"sym", true}});
  EXPECT_EQ(gptq.quant.linear.index_bytes_per_k, 4);  // g_idx
  ModelConfig w4a16 = with_quant(
      "llama-3.1-8b",
      {{"quant_method", "compressed-tensors"},
       {"ignore", {"lm_head"}},
       {"config_groups",
        {{"group_0",
          {{"targets", {"Linear"}},
           {"weights", {{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 128}, {"symmetric", true}}},
           {"input_activations", nullptr}}}}},
       {"kv_cache_scheme", {{"num_bits", 8}, {"type", "float"}}}});
  EXPECT_EQ(w4a16.quant.linear.dtype, DType::INT4);
  EXPECT_EQ(w4a16.quant.linear.zero_bits, 0);
  EXPECT_EQ(w4a16.kv_dtype, DType::FP8_E4M3) << "kv_cache_scheme fp8 sets the KV cache";
  ModelConfig bnb = with_quant("llama-3.1-8b", {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true},
                                                {"bnb_4bit_use_double_quant", true}, {"bnb_4bit_quant_type", "nf4"}});
  EXPECT_EQ(bnb.quant.linear.group, 64);
  EXPECT_GT(bnb.quant.linear.extra_scale_bytes, 0);
}

TEST(Quantization, BadConfigsNameTheField) {
  auto fails_with = [](const nlohmann::json& q, const std::string& what) {
    try {
      with_quant("llama-3.1-8b", q);
      ADD_FAILURE() << "accepted " << q.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  fails_with({{"quant_method", "hqq"}}, "quant_method");
  fails_with({{"quant_method", "awq"}, {"bits", 3}, {"group_size", 128}}, "bits");
  fails_with({{"quant_method", "fp8"}, {"weight_block_size", {128}}}, "weight_block_size");
  fails_with({{"quant_method", "fp8"}, {"activation_scheme", "sometimes"}}, "activation_scheme");
  fails_with({{"quant_method", "bitsandbytes"}}, "load_in_4bit");
  fails_with({{"quant_method", "compressed-tensors"}, {"config_groups", nlohmann::json::object()}}, "config_groups");
}

TEST(Quantization, WhichTensorsStayDense) {
  // DeepSeek-V3 FP8: every linear layer fp8 with block scales; router, embedding, LM head bf16.
  ModelFigures v3 = derive_figures(load_model_config(test_data("deepseek-v3.json")));
  EXPECT_EQ(matrix(v3, 10, "expert.gate_up").format.dtype, DType::FP8_E4M3);
  EXPECT_EQ(matrix(v3, 10, "q_a").format.dtype, DType::FP8_E4M3);
  EXPECT_EQ(matrix(v3, 10, "router").format.dtype, DType::BF16);
  EXPECT_EQ(v3.model_matrices[0].format.dtype, DType::BF16);
  EXPECT_EQ(v3.model_matrices[1].format.dtype, DType::BF16);
  // gpt-oss MXFP4: only the experts; attention and router are in modules_to_not_convert.
  ModelFigures oss = derive_figures(load_model_config(shipped_config("gpt-oss-20b")));
  EXPECT_EQ(matrix(oss, 0, "expert.down").format.dtype, DType::MXFP4);
  EXPECT_EQ(matrix(oss, 0, "qkv").format.dtype, DType::BF16);
  EXPECT_EQ(matrix(oss, 0, "router").format.dtype, DType::BF16);
  // compressed-tensors: lm_head is a Linear target unless ignored; here it is ignored.
  ModelFigures ct = derive_figures(load_model_config(shipped_config("llama-3.1-8b-fp8")));
  EXPECT_EQ(ct.model_matrices[1].format.dtype, DType::BF16);
  ModelConfig not_ignored = with_quant(
      "llama-3.1-8b", {{"quant_method", "compressed-tensors"},
                       {"ignore", {"re:.*layers\\.0\\.mlp\\.down_proj$"}},
                       {"config_groups", {{"g", {{"targets", {"Linear"}},
                                                 {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}}}}}}}});
  ModelFigures nf = derive_figures(not_ignored);
  EXPECT_EQ(nf.model_matrices[1].format.dtype, DType::FP8_E4M3) << "lm_head quantized when not ignored";
  EXPECT_EQ(matrix(nf, 0, "down").format.dtype, DType::BF16) << "re: pattern names layer 0's down_proj";
  EXPECT_EQ(matrix(nf, 1, "down").format.dtype, DType::FP8_E4M3);
}

TEST(Quantization, ModulePatterns) {
  EXPECT_TRUE(module_matches("lm_head", "lm_head"));
  EXPECT_TRUE(module_matches("model.layers.*.self_attn", "model.layers.3.self_attn.q_proj"));
  EXPECT_TRUE(module_matches("mlp.gate", "model.layers.0.mlp.gate"));
  EXPECT_FALSE(module_matches("mlp.gate", "model.layers.0.mlp.gate_proj")) << "whole components only";
  EXPECT_FALSE(module_matches("model.layers.1", "model.layers.10.mlp.down_proj"));
  EXPECT_TRUE(module_matches("re:.*q_proj$", "model.layers.3.self_attn.q_proj"));
  EXPECT_FALSE(module_matches("re:q_proj$", "model.layers.3.self_attn.q_proj")) << "re: matches from the start";
}

TEST(Quantization, WeightsOverride) {
  ModelConfig c = load_model_config(shipped_config("llama-3.1-70b"));
  const ModelFigures dense = derive_figures(c);
  apply_precision(c, DType::FP8_E4M3, std::nullopt);
  const ModelFigures fp8 = derive_figures(c);
  EXPECT_EQ(fp8.params_total, dense.params_total);
  // Linear layers at 1 byte (+ per-channel scales), embedding and LM head still bf16.
  const double emb = 2.0 * 2.0 * double(c.vocab * c.hidden);
  const double linear = double(dense.params_total) - double(2 * c.vocab * c.hidden);
  EXPECT_NEAR(double(fp8.weight_bytes), emb + linear, 0.01 * double(fp8.weight_bytes));
  apply_precision(c, DType::INT4, DType::FP8_E4M3);
  const ModelFigures int4 = derive_figures(c);
  EXPECT_LT(int4.weight_bytes, fp8.weight_bytes * 0.6);
  EXPECT_EQ(int4.kv_bytes_per_token * 2, dense.kv_bytes_per_token) << "fp8 KV: half the bytes per token";
  apply_precision(c, DType::BF16, DType::BF16);
  EXPECT_EQ(derive_figures(c).weight_bytes, dense.weight_bytes) << "--weights bf16 drops the scheme";
  EXPECT_THROW(apply_precision(c, DType::MXFP4, std::nullopt), InputError);
  EXPECT_THROW(apply_precision(c, std::nullopt, DType::INT8), InputError);
  // --weights bf16 on a quantized checkpoint: dense again.
  ModelConfig awq = load_model_config(shipped_config("llama-3.1-70b-awq"));
  apply_precision(awq, DType::BF16, std::nullopt);
  EXPECT_FALSE(awq.quant.quantized());
}

TEST(GptOss, LayersAndParameters) {
  ModelConfig c = load_model_config(shipped_config("gpt-oss-120b"));
  EXPECT_EQ(c.architecture, "GptOssForCausalLM");
  EXPECT_EQ(c.experts, 128);
  EXPECT_EQ(c.experts_per_token, 4);
  ASSERT_EQ(c.layer_window.size(), 36u);
  EXPECT_EQ(c.window_of(0), 128);
  EXPECT_EQ(c.window_of(1), 0);
  EXPECT_TRUE(c.attention_sinks);
  ModelFigures f = derive_figures(c);
  for (const auto& l : f.layers) EXPECT_TRUE(l.moe);
  // OpenAI's model card: 116.83 B total, 5.13 B active (gpt-oss-120b); 20.91 B / 3.61 B (20b).
  EXPECT_NEAR(double(f.params_total) / 116.83e9, 1.0, 0.005);
  EXPECT_NEAR(double(f.params_active) / 5.13e9, 1.0, 0.01);
  ModelFigures s = derive_figures(load_model_config(shipped_config("gpt-oss-20b")));
  EXPECT_NEAR(double(s.params_total) / 20.91e9, 1.0, 0.005);
  // Sliding layers hold at most 128 tokens of KV: at 8k, 18 full + 18 sliding layers.
  const int64_t per_layer = 2 * 8 * 64 * 2;
  EXPECT_EQ(f.kv_bytes_per_seq(8192), 18 * per_layer * 8192 + 18 * per_layer * 128);
  EXPECT_EQ(f.kv_bytes_per_seq(100), 36 * per_layer * 100);
}

TEST(GptOss, BadLayerTypes) {
  nlohmann::json j = test::read_json(shipped_config("gpt-oss-20b"));
  j["layer_types"][3] = "chunked_attention";
  EXPECT_THROW(parse_model_config(j.dump(), "bad.json"), InputError);
  j = test::read_json(shipped_config("gpt-oss-20b"));
  j["layer_types"].erase(0);
  EXPECT_THROW(parse_model_config(j.dump(), "bad.json"), InputError);
}

// Published checkpoint sizes (docs/model.md, "Published sizes", lists each source).
TEST(PublishedSizes, TotalWeightBytes) {
  // gpt-oss-120b: "checkpoint size 60.8 GiB" (OpenAI gpt-oss model card, Table 1). Within 3 %.
  ModelFigures oss = derive_figures(load_model_config(shipped_config("gpt-oss-120b")));
  EXPECT_NEAR(double(oss.weight_bytes) / kGiB / 60.8, 1.0, 0.03) << double(oss.weight_bytes) / kGiB << " GiB";
  // hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4 model card: "around 35 GiB of VRAM are
  // needed only for loading the model checkpoint". A rounded figure; ours is 37.0 GiB (qweight,
  // qzeros and fp16 scales of every linear layer, fp16 embedding and LM head). Checked at 7 %,
  // not 3 %: the card's figure is "around".
  ModelFigures awq = derive_figures(load_model_config(shipped_config("llama-3.1-70b-awq")));
  EXPECT_NEAR(double(awq.weight_bytes) / kGiB / 35.0, 1.0, 0.07) << double(awq.weight_bytes) / kGiB << " GiB";
  // DeepSeek-V3 (FP8, 128x128 blocks): README_WEIGHTS.md gives 671 B parameters for the main
  // model (685 B with the MTP module, which the planner does not load); the byte total is about
  // one byte per linear weight: between 0.95 and 1.05 bytes per parameter.
  ModelFigures v3 = derive_figures(load_model_config(test_data("deepseek-v3.json")));
  EXPECT_NEAR(double(v3.weight_bytes) / double(v3.params_total), 1.0, 0.05);
}

}  // namespace
}  // namespace peerplan
