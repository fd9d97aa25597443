// The MLA shapes a profile times (issue 23/14): DeepSeek-V2-Lite's absorbed per-head GEMMs
// (q_absorb [m,128] x [128,512], v_absorb [m,512] x [512,128], one strided-batched call over the
// rank's heads) and its two attention kernels (absorbed decode: 16 heads over one 576-wide latent
// "kv head", v 512; expanded prefill: MHA at q.k 192, v 128) at every TP degree; which of them a
// profile lacks (batch, v_dim and phase are part of the key); the merge keeping batched rows apart
// from plain rows of the same (m, n, k); the keys in meta.added_shapes.
#include <gtest/gtest.h>

#include <string>

#include "planner/core/files.hpp"
#include "planner/model/model_config.hpp"
#include "planner/topology/shape_set.hpp"
#include "profiler/common/model_shapes.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

namespace {

ModelConfig v2_lite() { return load_model_config(find_data_file("models/llm/deepseek-v2-lite/config.json")); }

const SampleStats kT = compute_stats({1e-5, 1e-5, 1e-5});

AttentionShapeKey mla_decode(int64_t heads) { return {heads, 1, 576, "bf16", 512, "decode"}; }
AttentionShapeKey mla_prefill(int64_t heads) { return {heads, heads, 192, "bf16", 128, "prefill"}; }

AttentionTime attn(const char* phase, int64_t heads, int64_t kv, int64_t hd, int64_t vd) {
  AttentionTime a{0, phase, 1, std::string(phase) == "decode" ? 1 : 512, 1024, heads, kv, hd, "bf16", kT};
  a.v_dim = vd;
  return a;
}

}  // namespace

TEST(MlaProfileShapes, V2LiteAddsItsAbsorbedGemmsAndBothAttentionShapesAtEveryTpDegree) {
  const ModelConfig m = v2_lite();
  ASSERT_TRUE(m.mla);
  std::vector<ShapeNote> notes;
  const ShapeSet s = model_shape_set({m}, 2, {"bf16", "fp8"}, &notes);  // TP 1 (16 heads) and TP 2 (8)
  for (int64_t h : {16, 8}) {
    EXPECT_TRUE(s.gemms.count({512, 128, "bf16", h})) << "q_absorb: n = kv_lora_rank, k = qk_nope, batch = heads " << h;
    EXPECT_TRUE(s.gemms.count({128, 512, "bf16", h})) << "v_absorb: n = v_head_dim, k = kv_lora_rank, batch " << h;
    EXPECT_FALSE(s.gemms.count({512, 128, "fp8", h})) << "batched calls run in bf16 only, whatever --dtypes";
    EXPECT_TRUE(s.attention.count(mla_decode(h))) << h;
    EXPECT_TRUE(s.attention.count(mla_prefill(h))) << h;
  }
  EXPECT_FALSE(s.gemms.count({512, 128, "bf16", 1})) << "no plain GEMM of the absorbed shape";
  EXPECT_EQ(s.attention.size(), 4u) << "MLA's two shapes per TP degree, no standard-attention key";
  EXPECT_EQ(s.attention_max_context, 131072) << "the grid reaches V2-Lite's 160k context, capped at 128 Ki";
  for (const ShapeNote& n : notes) EXPECT_EQ(n.what.find("attention of"), std::string::npos) << n.what << ": " << n.why;
}

TEST(MlaProfileShapes, BatchValueDimAndPhaseArePartOfWhatIsMissing) {
  ShapeSet want;
  want.gemms = {{512, 128, "bf16", 16}, {2048, 2048, "bf16"}};
  want.attention = {mla_decode(16), mla_prefill(16)};
  Measurements have;
  // Plain rows of the absorbed (n, k) and a batched row of the plain shape cover neither.
  have.gemms.push_back({0, 8, 512, 128, "bf16", kT});
  have.gemms.push_back({0, 8, 2048, 2048, "bf16", kT, 16});
  // A standard head_dim-192 prefill row (v 192) is not MLA's v-128 prefill; MLA decode rows are there.
  have.attention = {attn("prefill", 16, 16, 192, 0), attn("decode", 16, 1, 576, 512)};
  ShapeSet miss = missing_shapes(want, have);
  EXPECT_EQ(miss.gemms, want.gemms);
  EXPECT_EQ(miss.attention, (std::set<AttentionShapeKey>{mla_prefill(16)}))
      << "an MLA key needs rows of its own phase only: decode has them, prefill's 192/192 row is another kernel";
  have.gemms.push_back({0, 8, 512, 128, "bf16", kT, 16});
  have.attention.push_back(attn("prefill", 16, 16, 192, 128));
  miss = missing_shapes(want, have);
  EXPECT_EQ(miss.gemms, (std::set<GemmShapeKey>{{2048, 2048, "bf16"}}));
  EXPECT_TRUE(miss.attention.empty()) << describe_shapes(miss);
}

TEST(MlaProfileShapes, MergeKeepsBatchedAndPlainRowsApart) {
  Measurements into, from;
  into.gemms.push_back({0, 8, 512, 128, "bf16", kT});
  into.attention.push_back(attn("prefill", 16, 16, 192, 0));
  from.gemms.push_back({0, 8, 512, 128, "bf16", kT, 16});
  from.gemms.push_back({0, 8, 512, 128, "bf16", kT});  // already there
  from.attention.push_back(attn("prefill", 16, 16, 192, 128));
  const MergeCount c = merge_shape_rows(into, from);
  EXPECT_EQ(c.gemms, 1u) << "the batched row is another call";
  EXPECT_EQ(c.attention, 1u) << "the v-128 row is another kernel";
  EXPECT_EQ(c.duplicates, 1u);
  ASSERT_EQ(into.gemms.size(), 2u);
  EXPECT_EQ(into.gemms[1].batch, 16);
}

TEST(MlaProfileShapes, AddedShapesRecordBatchValueDimAndPhase) {
  ShapeSet s;
  s.gemms = {{512, 128, "bf16", 16}, {2048, 2048, "bf16"}};
  s.attention = {mla_decode(16), {32, 8, 128, "bf16"}};
  const nlohmann::json j = shapes_to_json(s);
  ASSERT_EQ(j["gemms"].size(), 2u);
  EXPECT_EQ(j["gemms"][0]["batch"], 16);  // the set's order: n 512 before 2048
  EXPECT_FALSE(j["gemms"][1].contains("batch")) << "plain keys written as before";
  ASSERT_EQ(j["attention"].size(), 2u);
  EXPECT_EQ(j["attention"][0]["v_dim"], 512);
  EXPECT_EQ(j["attention"][0]["phase"], "decode");
  EXPECT_FALSE(j["attention"][1].contains("v_dim"));
  EXPECT_FALSE(j["attention"][1].contains("phase"));
}
