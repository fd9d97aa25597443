// Which attention shapes the executor runs (profiler/common/attention_support.hpp): the decode
// kernel chosen per (query heads per kv head, head_dim), the head dims both kernels run, and the
// refusals that validate / plan --validate give before any GPU work and profile --model notes.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "planner/core/error.hpp"
#include "planner/model/model_config.hpp"
#include "profiler/common/attention_support.hpp"

using namespace peerplan;
using namespace peerplan::kernels;

namespace {

TEST(AttentionSupport, EveryGroupAndHeadDimOfTheIssueRunsOnATileThatCoversIt) {
  // Issue 23 item 4: every ratio 1..16 and head_dim 64, 80, 96, 128, 192, 256. The tile must cover
  // the shape (the masked rows / dims are extra) and be the smallest power of two that does, so a
  // 7-head group pays for 8 rows, never 16. At dim tile 256 a block holds at most 8 heads (the
  // accumulators of 16 would not fit 255 registers beside the step's loads): 9..16 heads run as
  // two blocks of 8 on one kv head, which cover the group as tightly as a 16-row tile would.
  for (int g = 1; g <= 16; ++g)
    for (int d : {64, 80, 96, 128, 192, 256}) {
      const DecodeVariant v = decode_variant(g, d);
      ASSERT_GT(v.group_tile, 0) << "G=" << g << " D=" << d;
      const int rows = v.group_tile * v.group_split;
      EXPECT_GE(rows, g);
      EXPECT_LT(rows, 2 * g) << "G=" << g << ": the next power of two";
      EXPECT_GE(v.dim_tile, d);
      EXPECT_EQ(v.dim_tile, d <= 64 ? 64 : d <= 128 ? 128 : 256);
      EXPECT_LE(v.dim_tile == 256 ? v.group_tile : 0, 8);
      EXPECT_EQ(v.group_split, v.dim_tile == 256 && g > 8 ? 2 : 1) << "G=" << g << " D=" << d;
      EXPECT_EQ(attention_head_dim_supported(d), d != 256) << d << ": the own prefill kernel stops at 192";
      EXPECT_EQ(attention_shape_refusal(4 * g, 4, d), "") << "G=" << g << " D=" << d;
    }
}

TEST(AttentionSupport, HeadDim256PrefillsOnCudnnOnlySoItsOtherPathsAreRefusedNamingWhy) {
  // 256 spills in the own prefill kernel, so it runs only where cuDNN runs it: a bf16 KV cache and
  // cuDNN in use. 192 has an own kernel (64-row blocks), so it runs on every path.
  AttentionPath fp8;
  fp8.kv_fp8 = true;
  AttentionPath own;
  own.cudnn = false;
  own.no_cudnn_why = "PEERPLAN_PREFILL_ATTENTION=own";
  EXPECT_EQ(attention_shape_refusal(16, 8, 256), "");  // the default path: cuDNN, bf16
  const std::string f = attention_shape_refusal(16, 8, 256, fp8);
  EXPECT_NE(f.find("head_dim 256"), std::string::npos) << f;
  EXPECT_NE(f.find("FP8"), std::string::npos) << f;
  const std::string o = attention_shape_refusal(16, 8, 256, own);
  EXPECT_NE(o.find("head_dim 256"), std::string::npos) << o;
  EXPECT_NE(o.find("PEERPLAN_PREFILL_ATTENTION=own"), std::string::npos) << o;
  for (const AttentionPath& p : {AttentionPath{}, fp8, own}) {
    EXPECT_EQ(attention_shape_refusal(16, 8, 192, p), "");
    EXPECT_EQ(attention_shape_refusal(16, 1, 128, p), "");
  }
  EXPECT_TRUE(attention_head_dim_needs_cudnn(256));
  EXPECT_FALSE(attention_head_dim_needs_cudnn(192));
}

TEST(AttentionSupport, SpecialisedKernelsServeExactlyTheShapesTheyServedBefore) {
  // The engine-speed path is untouched: the 10 shapes instantiated before (G 1, 2, 4, 8, 16 x
  // head_dim 64, 128) still take the specialised kernels, and only those.
  std::set<std::pair<int, int>> exact;
  for (int g = 1; g <= 16; ++g)
    for (int d = 8; d <= 256; d += 8) {
      const DecodeVariant v = decode_variant(g, d);
      ASSERT_GT(v.group_tile, 0);
      if (!v.general) exact.insert({g, d});
      EXPECT_EQ(v.general, v.group_tile * v.group_split != g || v.dim_tile != d);
      if (d <= 128) EXPECT_EQ(v.group_split, 1);
    }
  // The 10 of before, and the 256 tile's own 5 (16 as two blocks of the G = 8 kernel).
  const std::set<std::pair<int, int>> before{{1, 64},  {2, 64},  {4, 64},  {8, 64},  {16, 64},
                                             {1, 128}, {2, 128}, {4, 128}, {8, 128}, {16, 128},
                                             {1, 256}, {2, 256}, {4, 256}, {8, 256}, {16, 256}};
  EXPECT_EQ(exact, before);
}

TEST(AttentionSupport, ModelShapesMapToTheExpectedKernels) {
  const DecodeVariant qwen7b = decode_variant(28 / 4, 128);  // Qwen2.5-7B: 7 per kv head
  EXPECT_EQ(qwen7b.group_tile, 8);
  EXPECT_EQ(qwen7b.dim_tile, 128);
  EXPECT_TRUE(qwen7b.general);
  const DecodeVariant qwen14b = decode_variant(40 / 8, 128);  // Qwen2.5-14B: 5
  EXPECT_EQ(qwen14b.group_tile, 8);
  const DecodeVariant phi3 = decode_variant(32 / 32, 96);  // Phi-3-mini: MHA, head_dim 96
  EXPECT_EQ(phi3.group_tile, 1);
  EXPECT_EQ(phi3.dim_tile, 128);
  EXPECT_TRUE(phi3.general);
  const DecodeVariant llama8b = decode_variant(32 / 8, 128);  // Llama-3.1-8B: the specialised kernel
  EXPECT_FALSE(llama8b.general);
  EXPECT_EQ(llama8b.group_tile, 4);
}

TEST(AttentionSupport, ShapesThatCannotRunAreRefusedNamingTheValue) {
  // Decode: no tile for 17+ rows, dims past 256 or off the 16-byte (8-element) loads.
  EXPECT_EQ(decode_variant(17, 128).group_tile, 0);
  EXPECT_EQ(decode_variant(0, 128).group_tile, 0);
  EXPECT_EQ(decode_variant(8, 264).group_tile, 0);
  EXPECT_EQ(decode_variant(8, 100).group_tile, 0);
  for (int d : {32, 112, 160, 256}) EXPECT_FALSE(attention_head_dim_supported(d)) << d;  // prefill lacks them
  EXPECT_NE(attention_shape_refusal(32, 8, 112).find("head_dim 112"), std::string::npos);
  EXPECT_NE(attention_shape_refusal(32, 8, 512).find("head_dim 512"), std::string::npos);
  EXPECT_NE(attention_shape_refusal(64, 1, 128).find("64 query heads per kv head"), std::string::npos);
  EXPECT_NE(attention_shape_refusal(28, 3, 128).find("not a multiple"), std::string::npos);
}

ModelConfig config(int64_t heads, int64_t kv, int64_t head_dim) {
  ModelConfig c;
  c.source_file = "models/x/config.json";
  c.heads = heads;
  c.kv_heads = kv;
  c.head_dim = head_dim;
  return c;
}

TEST(AttentionSupport, ModelCheckThrowsInputErrorWithTheFieldAndValue) {
  EXPECT_NO_THROW(check_attention_executable(config(28, 4, 128)));  // Qwen2.5-7B
  EXPECT_NO_THROW(check_attention_executable(config(32, 32, 96)));   // Phi-3-mini
  EXPECT_NO_THROW(check_attention_executable(config(40, 8, 128)));   // Qwen2.5-14B
  EXPECT_NO_THROW(check_attention_executable(config(16, 1, 80)));    // 16 per kv head, head_dim 80
  EXPECT_NO_THROW(check_attention_executable(config(16, 8, 256)));  // Gemma-like head_dim 256, on cuDNN
  EXPECT_NO_THROW(check_attention_executable(config(32, 8, 192)));
  ModelConfig fp8 = config(16, 8, 256);
  fp8.kv_dtype = DType::FP8_E4M3;  // --kv-dtype fp8: the own kernel would have to run it, and cannot
  try {
    check_attention_executable(fp8);
    FAIL() << "head_dim 256 with an FP8 KV cache must be refused";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "models/x/config.json");
    EXPECT_EQ(e.field(), "head_dim");
    EXPECT_NE(e.expected().find("found 256"), std::string::npos) << e.what();
    EXPECT_NE(e.expected().find("FP8"), std::string::npos) << e.what();
  }
  AttentionPath own;
  own.cudnn = false;
  own.no_cudnn_why = "cuDNN does not load: libcudnn.so.9 not found";
  try {
    check_attention_executable(config(16, 8, 256), own);
    FAIL() << "head_dim 256 without cuDNN must be refused";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "head_dim");
    EXPECT_NE(e.expected().find("libcudnn.so.9 not found"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_attention_executable(config(16, 8, 192), own));
  try {
    check_attention_executable(config(16, 8, 112));
    FAIL() << "head_dim 112 must be refused";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "head_dim");
    EXPECT_NE(e.expected().find("found 112"), std::string::npos) << e.what();
  }
  try {
    check_attention_executable(config(71, 1, 64));  // Falcon-7B: MQA, 71 query heads on one kv head
    FAIL() << "71 query heads per kv head must be refused";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "num_attention_heads");
    EXPECT_NE(e.expected().find("found 71"), std::string::npos) << e.what();
  }
  // MLA (DeepSeek-V2-Lite's shape) runs on the MLA kernels, whatever head_dim says; other latent or
  // head widths, more than 128 heads and an FP8 latent cache are refused naming their field.
  ModelConfig mla = config(16, 16, 192);
  mla.mla = true;
  mla.kv_lora_rank = 512, mla.qk_rope_head_dim = 64, mla.qk_nope_head_dim = 128, mla.v_head_dim = 128;
  EXPECT_NO_THROW(check_attention_executable(mla));
  auto refused_field = [](const ModelConfig& c) {
    try {
      check_attention_executable(c);
    } catch (const InputError& e) {
      return e.field();
    }
    return std::string("(accepted)");
  };
  ModelConfig bad = mla;
  bad.kv_lora_rank = 256;
  EXPECT_EQ(refused_field(bad), "kv_lora_rank");
  bad = mla, bad.qk_rope_head_dim = 32;
  EXPECT_EQ(refused_field(bad), "qk_rope_head_dim");
  bad = mla, bad.v_head_dim = 192;
  EXPECT_EQ(refused_field(bad), "v_head_dim");
  bad = mla, bad.heads = 256;
  EXPECT_EQ(refused_field(bad), "num_attention_heads");
  bad = mla, bad.kv_dtype = DType::FP8_E4M3;
  EXPECT_EQ(refused_field(bad), "kv_cache_dtype");
}

TEST(AttentionSupport, MlaShapeRefusalNamesTheValue) {
  EXPECT_EQ(mla_shape_refusal(512, 64, 128, 128, 16, false), "");
  EXPECT_EQ(mla_shape_refusal(512, 64, 128, 128, 1, false), "") << "any head count 1..128";
  EXPECT_EQ(mla_shape_refusal(512, 64, 128, 128, 128, false), "");
  const char* field = nullptr;
  EXPECT_NE(mla_shape_refusal(512, 64, 64, 128, 16, false, &field).find("qk_nope_head_dim 64"), std::string::npos);
  EXPECT_STREQ(field, "qk_nope_head_dim");
}

}  // namespace
