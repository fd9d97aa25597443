// Derived figures against published sizes and hand arithmetic.
#include <cmath>
#include <set>

#include "model_test_util.hpp"
#include "planner/model/model_figures.hpp"

namespace peerplan {
namespace {

using test::shipped_config;
using test::test_data;

ModelFigures figures_of(const std::string& path) { return derive_figures(load_model_config(path)); }

// Published parameter counts (model cards / papers), within 2 %.
void expect_near_pct(double got, double published, double pct, const std::string& what) {
  EXPECT_LE(std::fabs(got - published) / published, pct / 100.0)
      << what << ": derived " << got / 1e9 << " B vs published " << published / 1e9 << " B";
}

TEST(ModelFigures, DenseTotalsMatchPublishedSizes) {
  expect_near_pct(double(figures_of(shipped_config("llama-3.1-8b")).params_total), 8.03e9, 2, "Llama-3.1-8B");
  expect_near_pct(double(figures_of(shipped_config("llama-3.1-70b")).params_total), 70.6e9, 2, "Llama-3.1-70B");
  expect_near_pct(double(figures_of(shipped_config("mistral-7b")).params_total), 7.24e9, 2, "Mistral-7B");
  expect_near_pct(double(figures_of(test_data("qwen2-7b.json")).params_total), 7.62e9, 2, "Qwen2-7B");
  expect_near_pct(double(figures_of(test_data("phi-3-mini.json")).params_total), 3.82e9, 2, "Phi-3-mini");
  expect_near_pct(double(figures_of(test_data("llama-3.2-1b.json")).params_total), 1.24e9, 2, "Llama-3.2-1B (tied)");
  expect_near_pct(double(figures_of(test_data("qwen3-8b.json")).params_total), 8.19e9, 2, "Qwen3-8B (q/k norm)");
}

TEST(ModelFigures, Llama8bExactCount) {
  // 32 * (attn 4096*(4096+2*1024) + 4096*4096 + mlp 3*4096*14336 + 2 norms*4096) + 2*128256*4096 + 4096.
  EXPECT_EQ(figures_of(shipped_config("llama-3.1-8b")).params_total, 8030261248LL);
}

TEST(ModelFigures, TiedEmbeddingsCountOnce) {
  ModelConfig c = load_model_config(test_data("llama-3.2-1b.json"));
  ModelFigures tied = derive_figures(c);
  c.tied_embeddings = false;
  ModelFigures untied = derive_figures(c);
  EXPECT_EQ(tied.lm_head_params, 0);
  EXPECT_EQ(untied.params_total - tied.params_total, 128256LL * 2048);  // one vocab x hidden matrix
  // The LM head GEMM runs either way: same FLOPs, same active weights.
  EXPECT_DOUBLE_EQ(tied.flops_per_token, untied.flops_per_token);
  EXPECT_EQ(tied.params_active, untied.params_active);
}

TEST(ModelFigures, MoeTotalsAndActiveMatchPublished) {
  ModelFigures mix = figures_of(shipped_config("mixtral-8x7b"));
  expect_near_pct(double(mix.params_total), 46.7e9, 2, "Mixtral-8x7B total");
  expect_near_pct(double(mix.params_active), 12.9e9, 2, "Mixtral-8x7B active");

  ModelFigures qwen = figures_of(shipped_config("qwen1.5-moe-a2.7b"));
  expect_near_pct(double(qwen.params_total), 14.3e9, 2, "Qwen1.5-MoE total");
  // Qwen's "2.7 B activated" counts the embedding table; ours (DeepSeek's convention) does not.
  expect_near_pct(double(qwen.params_active + qwen.embedding_params), 2.7e9, 2, "Qwen1.5-MoE active incl. embedding");

  ModelFigures q3 = figures_of(test_data("qwen3-30b-a3b.json"));
  expect_near_pct(double(q3.params_total), 30.5e9, 2, "Qwen3-30B-A3B total");
  expect_near_pct(double(q3.params_active + q3.embedding_params), 3.3e9, 2, "Qwen3-30B-A3B active incl. embedding");

  ModelFigures v2 = figures_of(shipped_config("deepseek-v2-lite"));
  expect_near_pct(double(v2.params_total), 15.7e9, 2, "DeepSeek-V2-Lite total");
  // 2.45 B derived; the published "2.4 B" is rounded to one decimal, so allow its rounding on top.
  expect_near_pct(double(v2.params_active), 2.4e9, 2.5, "DeepSeek-V2-Lite active");

  ModelFigures v3 = figures_of(test_data("deepseek-v3.json"));
  expect_near_pct(double(v3.params_total), 671e9, 2, "DeepSeek-V3 total (without the MTP module)");
  expect_near_pct(double(v3.params_active), 37e9, 2, "DeepSeek-V3 active");
}

TEST(ModelFigures, KvBytesByHand) {
  // Llama-3.1-8B: 32 layers * 8 KV heads * 128 head_dim * 2 (K and V) * 2 bytes.
  EXPECT_EQ(figures_of(shipped_config("llama-3.1-8b")).kv_bytes_per_token, 32 * 8 * 128 * 2 * 2);
  EXPECT_EQ(figures_of(shipped_config("llama-3.1-8b")).kv_bytes_per_token, 131072);
  // Llama-3.1-70B: 80 * 8 * 128 * 2 * 2 = 327680.
  EXPECT_EQ(figures_of(shipped_config("llama-3.1-70b")).kv_bytes_per_token, 327680);
  // Qwen1.5-MoE: no GQA: 24 * 16 * 128 * 2 * 2.
  EXPECT_EQ(figures_of(shipped_config("qwen1.5-moe-a2.7b")).kv_bytes_per_token, 24 * 16 * 128 * 2 * 2);
  // MLA caches the compressed latent + the rope key: 27 layers * (512 + 64) * 2 bytes.
  EXPECT_EQ(figures_of(shipped_config("deepseek-v2-lite")).kv_bytes_per_token, 27 * (512 + 64) * 2);
  EXPECT_EQ(figures_of(test_data("deepseek-v3.json")).kv_bytes_per_token, 61 * (512 + 64) * 2);
  // float32 doubles it.
  ModelConfig c = load_model_config(shipped_config("llama-3.1-8b"));
  c.dtype_bytes = 4;
  EXPECT_EQ(derive_figures(c).kv_bytes_per_token, 2 * 131072);
}

TEST(ModelFigures, WeightBytesAreParamsTimesDtype) {
  ModelFigures f = figures_of(shipped_config("llama-3.1-70b"));
  EXPECT_EQ(f.weight_bytes, 2 * f.params_total);
}

TEST(ModelFigures, FlopsAreTwicePerActiveParamAtContext1) {
  for (const std::string& p : {shipped_config("llama-3.1-8b"), shipped_config("mixtral-8x7b"),
                               shipped_config("deepseek-v2-lite"), test_data("deepseek-v3.json")}) {
    ModelFigures f = figures_of(p);
    // A multiply-add per weight a token touches; norms, biases and attention at context 1 are < 0.5 %.
    expect_near_pct(f.flops_per_token, 2.0 * double(f.params_active), 0.5, p);
  }
}

TEST(ModelFigures, AttentionSlopeByHand) {
  // Standard attention: QK^T and PV, each 2 * heads * head_dim FLOPs per context token per layer.
  ModelFigures l8 = figures_of(shipped_config("llama-3.1-8b"));
  EXPECT_DOUBLE_EQ(l8.flops_per_context_token, 32.0 * 4 * 32 * 128);
  EXPECT_DOUBLE_EQ(l8.flops_per_token_at(4097) - l8.flops_per_token_at(1), 4096 * l8.flops_per_context_token);
  // MLA: scores over qk_nope + qk_rope (192), values over v_head_dim (128), 16 heads, 27 layers.
  ModelFigures v2 = figures_of(shipped_config("deepseek-v2-lite"));
  EXPECT_DOUBLE_EQ(v2.flops_per_context_token, 27.0 * (2 * 16 * 192 + 2 * 16 * 128));
}

const MatrixShape* find(const std::vector<MatrixShape>& ms, const std::string& name) {
  for (const auto& m : ms)
    if (m.name == name) return &m;
  return nullptr;
}

TEST(ModelFigures, DenseMatrixShapes) {
  ModelFigures f = figures_of(shipped_config("llama-3.1-8b"));
  const auto& m = f.layers[0].matrices;
  ASSERT_TRUE(find(m, "qkv"));
  EXPECT_EQ(find(m, "qkv")->k, 4096);
  EXPECT_EQ(find(m, "qkv")->n, (32 + 2 * 8) * 128);
  EXPECT_EQ(find(m, "o")->k, 4096);
  EXPECT_EQ(find(m, "gate_up")->n, 2 * 14336);
  EXPECT_EQ(find(m, "down")->k, 14336);
  EXPECT_EQ(find(m, "down")->n, 4096);
  // Matrices add up to the layer's parameters, minus the two norms.
  int64_t sum = 0;
  for (const auto& x : m) sum += x.k * x.n * x.count;
  EXPECT_EQ(sum + f.layers[0].norm_params, f.layers[0].params);
  ASSERT_NE(find(f.model_matrices, "lm_head"), nullptr);
  EXPECT_EQ(find(f.model_matrices, "lm_head")->n, 128256);
  EXPECT_EQ(find(f.model_matrices, "embedding")->k, 128256);
}

TEST(ModelFigures, ExpertAndMlaShapes) {
  ModelFigures mix = figures_of(shipped_config("mixtral-8x7b"));
  const auto& mm = mix.layers[5].matrices;
  ASSERT_TRUE(find(mm, "expert.gate_up"));
  EXPECT_EQ(find(mm, "expert.gate_up")->count, 8);
  EXPECT_FALSE(find(mm, "expert.gate_up")->per_token_active);  // top-2 of 8 run per token
  EXPECT_EQ(find(mm, "router")->n, 8);
  EXPECT_EQ(find(mm, "gate_up"), nullptr);  // no dense MLP in an MoE layer

  ModelFigures qwen = figures_of(shipped_config("qwen1.5-moe-a2.7b"));
  const auto& qm = qwen.layers[0].matrices;
  EXPECT_EQ(find(qm, "shared.gate_up")->n, 2 * 5632);
  EXPECT_EQ(find(qm, "shared_gate")->n, 1);
  EXPECT_EQ(find(qm, "expert.down")->k, 1408);
  EXPECT_EQ(find(qm, "expert.down")->count, 60);

  ModelFigures v2 = figures_of(shipped_config("deepseek-v2-lite"));
  const auto& d0 = v2.layers[0].matrices;  // dense layer (first_k_dense_replace = 1)
  EXPECT_FALSE(v2.layers[0].moe);
  EXPECT_EQ(find(d0, "gate_up")->n, 2 * 10944);
  EXPECT_EQ(find(d0, "q")->n, 16 * 192);  // q_lora_rank null: full-rank q
  EXPECT_EQ(find(d0, "q_a"), nullptr);
  EXPECT_EQ(find(d0, "kv_a")->n, 512 + 64);
  EXPECT_EQ(find(d0, "kv_b")->k, 512);
  EXPECT_EQ(find(d0, "kv_b")->n, 16 * (128 + 128));
  EXPECT_EQ(find(d0, "o")->k, 16 * 128);
  const auto& d1 = v2.layers[1].matrices;
  EXPECT_TRUE(v2.layers[1].moe);
  EXPECT_EQ(find(d1, "shared.gate_up")->n, 2 * 2 * 1408);
  EXPECT_EQ(find(d1, "expert.gate_up")->count, 64);

  ModelFigures v3 = figures_of(test_data("deepseek-v3.json"));
  const auto& t = v3.layers[10].matrices;
  EXPECT_EQ(find(t, "q_a")->n, 1536);
  EXPECT_EQ(find(t, "q_b")->k, 1536);
  EXPECT_EQ(find(t, "q_b")->n, 128 * 192);
  EXPECT_EQ(find(t, "q"), nullptr);
}

TEST(ModelFigures, ActiveCountsTopKExperts) {
  ModelConfig c = load_model_config(shipped_config("mixtral-8x7b"));
  ModelFigures f = derive_figures(c);
  const LayerFigures& l = f.layers[0];
  // One token uses 2 of 8 experts: the other 6 experts' weights are inactive.
  EXPECT_EQ(l.params - l.active_params, 6 * l.expert_params);
  EXPECT_EQ(l.expert_params, 3LL * 4096 * 14336);
}

TEST(ModelFigures, JsonHasTheContractKeys) {
  ModelConfig c = load_model_config(shipped_config("deepseek-v2-lite"));
  ModelFigures f = derive_figures(c);
  nlohmann::json j = figures_to_json(c, f);
  EXPECT_EQ(j.at("params_total").get<int64_t>(), f.params_total);
  EXPECT_EQ(j.at("weight_bytes").get<int64_t>(), f.weight_bytes);
  EXPECT_EQ(j.at("kv_bytes_per_token").get<int64_t>(), f.kv_bytes_per_token);
  EXPECT_DOUBLE_EQ(j.at("flops_per_token").at("at_context_1").get<double>(), f.flops_per_token);
  EXPECT_DOUBLE_EQ(j.at("flops_per_token").at("per_context_token").get<double>(), f.flops_per_context_token);
  EXPECT_EQ(j.at("layers").size(), 27u);
  EXPECT_EQ(j.at("experts").at("routed").get<int>(), 64);
  EXPECT_EQ(j.at("experts").at("moe_layers").size(), 26u);
  EXPECT_EQ(j.at("model").at("attention").get<std::string>(), "mla");
  EXPECT_TRUE(j.at("layers")[1].at("matrices").is_array());
  // Dense models say so explicitly.
  ModelConfig d = load_model_config(shipped_config("mistral-7b"));
  EXPECT_TRUE(figures_to_json(d, derive_figures(d)).at("experts").is_null());
}

}  // namespace
}  // namespace peerplan
