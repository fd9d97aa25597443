// Quantized weights and an FP8 KV cache in the compiler and the memory model (issue 15): GEMMs
// carry their weight format and stream the stored bytes; attention carries the KV format; memory
// fit, KV capacity and max sequences follow the formats; the done-criterion plans fit.
#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/core/files.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/topology/machine.hpp"
#include "tests/plan_fixtures.hpp"

namespace peerplan {
namespace {

ModelConfig shipped(const std::string& name) {
  return load_model_config(find_data_file("models/llm/" + name + "/config.json"));
}

BatchShape decode(int64_t seqs, int64_t ctx) {
  BatchShape b;
  b.decode_seqs = seqs, b.decode_context = ctx;
  return b;
}

const Op* find(const OpGraph& g, const std::string& name) {
  for (const auto& o : g.ops)
    if (o.name == name) return &o;
  return nullptr;
}

Machine one_h200() { return load_machine(find_data_file("docs/profile/h200x1-profile.json")); }
// 4 x RTX 4090 24 GB, PCIe 4.0 x16 each, no P2P (models/hardware/rtx4090x4-pcie.json, issue 15).
Machine four_4090() { return load_machine(find_data_file("models/hardware/rtx4090x4-pcie.json")); }

TEST(QuantizedCompile, GemmsCarryFormatAndStoredBytes) {
  ModelConfig c = shipped("llama-3.1-8b");
  apply_precision(c, DType::FP8_E4M3, DType::FP8_E4M3);
  ModelFigures f = derive_figures(c);
  Machine m = one_h200();
  OpGraph g = compile_iteration(test_plans::tp({0}, int(c.layers)), c, f, m, decode(8, 1024));
  const Op* qkv = find(g, "L0.qkv");
  ASSERT_TRUE(qkv);
  EXPECT_EQ(qkv->wdtype, DType::FP8_E4M3);
  // Activations in/out at 2 bytes, weights at 1 byte + a fp32 scale per output column.
  const double k = 4096, n = 6144;
  EXPECT_DOUBLE_EQ(qkv->mem_bytes, (8 * k + 8 * n) * 2 + k * n + n * 4);
  const Op* lm = find(g, "lm_head");
  ASSERT_TRUE(lm);
  EXPECT_EQ(lm->wdtype, DType::BF16) << "the LM head stays dense under --weights";
  const Op* attn = find(g, "L0.attn_decode");
  ASSERT_TRUE(attn);
  EXPECT_EQ(attn->kv_dtype, DType::FP8_E4M3);
  EXPECT_EQ(attn->wdtype, DType::BF16) << "attention has no weight GEMM of its own";
  // Attention reads half the cache bytes of the bf16 cache.
  ModelConfig d = shipped("llama-3.1-8b");
  OpGraph gd = compile_iteration(test_plans::tp({0}, int(d.layers)), d, derive_figures(d), m, decode(8, 1024));
  const Op* attn_bf16 = find(gd, "L0.attn_decode");
  const double qo = 8.0 * 32 * 256 * 2;  // queries and outputs stay bf16
  EXPECT_NEAR(attn->mem_bytes - qo, (attn_bf16->mem_bytes - qo) / 2, 1.0);
  EXPECT_EQ(find(gd, "L0.qkv")->wdtype, DType::BF16);
}

TEST(QuantizedCompile, MemoryCountsStoredWeightsAndKvByFormat) {
  Machine m = one_h200();
  MemoryOptions mo;
  mo.max_seqs = 16, mo.context = 8192;
  ModelConfig c = shipped("llama-3.1-70b");
  const Plan p = test_plans::tp({0}, int(c.layers));
  MemoryReport bf16 = check_memory(p, c, derive_figures(c), m, mo);
  EXPECT_FALSE(bf16.fits) << "141 GB of bf16 weights do not fit one 140 GB H200";
  apply_precision(c, DType::FP8_E4M3, std::nullopt);
  ModelFigures f = derive_figures(c);
  MemoryReport fp8 = check_memory(p, c, f, m, mo);
  EXPECT_TRUE(fp8.fits) << fp8.why;
  EXPECT_EQ(fp8.gpus[0].weights, f.weight_bytes) << "one GPU holds every stored byte";
  EXPECT_EQ(fp8.kv_dtype, DType::BF16);
  ASSERT_EQ(fp8.weight_bytes_by_dtype.size(), 2u);
  EXPECT_EQ(fp8.weight_bytes_by_dtype[0].first, "bf16");
  EXPECT_EQ(fp8.weight_bytes_by_dtype[1].first, "fp8");
  apply_precision(c, std::nullopt, DType::FP8_E4M3);
  MemoryReport kv8 = check_memory(p, c, derive_figures(c), m, mo);
  EXPECT_EQ(kv8.gpus[0].kv_cache * 2, fp8.gpus[0].kv_cache);
  EXPECT_EQ(kv8.kv_bytes_per_seq * 2, fp8.kv_bytes_per_seq);
  // Same room, half the bytes per sequence: about twice the sequences (floor division).
  EXPECT_GE(kv8.max_seqs_that_fit, 2 * fp8.max_seqs_that_fit);
  EXPECT_LE(kv8.max_seqs_that_fit, 2 * fp8.max_seqs_that_fit + 1);
}

TEST(QuantizedCompile, AwqSeventyBFitsFour4090s) {
  Machine m = four_4090();
  MemoryOptions mo;
  mo.max_seqs = 8, mo.context = 4096, mo.max_batched_tokens = 2048;
  ModelConfig awq = shipped("llama-3.1-70b-awq");
  const Plan p = test_plans::tp({0, 1, 2, 3}, int(awq.layers));
  MemoryReport r = check_memory(p, awq, derive_figures(awq), m, mo);
  EXPECT_TRUE(r.fits) << r.why;
  // About a quarter of the 37 GiB each, and far under the bf16 model's share.
  EXPECT_LT(r.gpus[0].weights, int64_t(11) << 30);
  ModelConfig dense = shipped("llama-3.1-70b");
  EXPECT_FALSE(check_memory(p, dense, derive_figures(dense), m, mo).fits) << "bf16 70B: 35 GB per 24 GB card";
}

TEST(QuantizedCompile, GptOssWindowsBoundKvAndAttention) {
  ModelConfig c = shipped("gpt-oss-20b");
  ModelFigures f = derive_figures(c);
  Machine m = one_h200();
  OpGraph g = compile_iteration(test_plans::tp({0}, int(c.layers)), c, f, m, decode(4, 4096));
  const Op* sliding = find(g, "L0.attn_decode");
  const Op* full = find(g, "L1.attn_decode");
  ASSERT_TRUE(sliding && full);
  EXPECT_EQ(sliding->attn_context, 128);
  EXPECT_EQ(full->attn_context, 4096);
  EXPECT_LT(sliding->mem_bytes * 20, full->mem_bytes);
  MemoryOptions mo;
  mo.max_seqs = 4, mo.context = 4096;
  MemoryReport r = check_memory(test_plans::tp({0}, int(c.layers)), c, f, m, mo);
  EXPECT_EQ(r.kv_bytes_per_seq, f.kv_bytes_per_seq(4096));
  EXPECT_EQ(r.gpus[0].kv_cache, 4 * f.kv_bytes_per_seq(4096));
  // MXFP4 experts: the grouped expert GEMMs stream 4.25-bit weights.
  for (const auto& o : g.ops)
    if (o.name == "L0.expert.gate_up") EXPECT_EQ(o.wdtype, DType::MXFP4);
}

}  // namespace
}  // namespace peerplan
