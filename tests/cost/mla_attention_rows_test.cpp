// MLA attention rows (issue 23/14): the profile's optional attention[i].v_dim (absent: head_dim;
// written only when it differs), and the cost model pricing MLA's attention ops from rows of their
// own v_dim only: DeepSeek-V2-Lite's absorbed decode (16 heads, 1 latent "kv head", q.k 576, v 512)
// and expanded prefill (q.k 192, v 128), while a standard model of head_dim 192 (v 192) is never
// priced from the MLA prefill rows of the same heads and head_dim.
#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "planner/cost/compute_cost.hpp"
#include "planner/cost/cost_model.hpp"
#include "tests/cost/cost_test_util.hpp"

namespace peerplan {
namespace {

AttentionTime row(const char* phase, int64_t b, int64_t q, int64_t c, int64_t heads, int64_t kv, int64_t hd, int64_t vd,
                  double s) {
  AttentionTime a{0, phase, b, q, c, heads, kv, hd, "bf16", compute_stats({s})};
  a.v_dim = vd;
  return a;
}

Op attention(bool prefill, int64_t b, int64_t q, int64_t c, int64_t heads, int64_t kv, int64_t hd, int64_t vd) {
  Op o;
  o.kind = OpKind::Attention;
  o.gpus = {0};
  o.attn_prefill = prefill;
  o.attn_batch = b, o.attn_q_len = q, o.attn_context = c;
  o.attn_heads = heads, o.attn_kv_heads = kv, o.attn_head_dim = hd, o.attn_v_dim = vd;
  o.flops = 2.0 * double(heads * (hd + vd) * b * q * c);
  o.mem_bytes = double(b * c * kv * (hd + vd) * 2);
  return o;
}

std::vector<AttentionTime> mla_rows() {
  return {row("decode", 8, 1, 1024, 16, 1, 576, 512, 20e-6), row("decode", 8, 1, 4096, 16, 1, 576, 512, 40e-6),
          row("prefill", 1, 512, 512, 16, 16, 192, 128, 60e-6), row("prefill", 1, 512, 2048, 16, 16, 192, 128, 150e-6)};
}

TEST(MlaAttentionRows, TableMatchesTheValueDim) {
  const std::vector<AttentionTime> t = mla_rows();
  auto d = attention_from_table(t, 0, attention(false, 8, 1, 1024, 16, 1, 576, 512));
  ASSERT_TRUE(d) << "MLA decode from its own rows";
  EXPECT_DOUBLE_EQ(d->seconds, 20e-6);
  EXPECT_EQ(d->source, CostSource::Measured);
  auto p = attention_from_table(t, 0, attention(true, 1, 512, 2048, 16, 16, 192, 128));
  ASSERT_TRUE(p) << "MLA prefill from its own rows";
  EXPECT_DOUBLE_EQ(p->seconds, 150e-6);
  EXPECT_FALSE(attention_from_table(t, 0, attention(true, 1, 512, 2048, 16, 16, 192, 192)))
      << "a head_dim-192 model (v 192) is another kernel: not priced from MLA's v-128 rows";
  EXPECT_FALSE(attention_from_table(t, 0, attention(true, 1, 512, 2048, 16, 16, 192, 0)))
      << "attn_v_dim 0 means head_dim: still not MLA's rows";
}

TEST(MlaAttentionRows, StandardRowsDoNotPriceMla) {
  // A standard 192-dim prefill row of the same heads: MLA's v-128 op must not take it.
  const std::vector<AttentionTime> t = {row("prefill", 1, 512, 2048, 16, 16, 192, 0, 99e-6)};
  EXPECT_FALSE(attention_from_table(t, 0, attention(true, 1, 512, 2048, 16, 16, 192, 128)));
  auto s = attention_from_table(t, 0, attention(true, 1, 512, 2048, 16, 16, 192, 192));
  ASSERT_TRUE(s) << "v_dim 0 on the row means head_dim: the standard op matches it";
  EXPECT_DOUBLE_EQ(s->seconds, 99e-6);
}

TEST(MlaAttentionRows, CostModelPricesMlaOpsFromRowsAndStandardOnesWithout) {
  Machine m = simtest::pcie_switch_machine(1);
  m.measurements = Measurements{};
  m.measurements->hbm_gbps = {4000};
  m.measurements->attention = mla_rows();
  Topology topo(m);
  CostModel cost(topo);
  const OpCost& d = cost.price(attention(false, 8, 1, 1024, 16, 1, 576, 512), false);
  EXPECT_EQ(d.source, CostSource::Measured);
  EXPECT_DOUBLE_EQ(d.seconds, 20e-6);
  const OpCost& between = cost.price(attention(false, 8, 1, 2048, 16, 1, 576, 512), false);
  EXPECT_EQ(between.source, CostSource::Interpolated);
  EXPECT_GT(between.seconds, 20e-6);
  EXPECT_LT(between.seconds, 40e-6);
  const OpCost& std192 = cost.price(attention(true, 1, 512, 2048, 16, 16, 192, 192), false);
  EXPECT_NE(std192.source, CostSource::Measured);
  EXPECT_NE(std192.source, CostSource::Interpolated);
  EXPECT_NE(std192.source, CostSource::Fitted) << "MLA rows are left out of the standard-attention fit";
}

TEST(MlaAttentionRows, ProfileRowsRoundTripTheOptionalValueDim) {
  const std::string stats = R"("n": 3, "min_us": 5, "p10_us": 5, "median_us": 9, "p90_us": 9, "p99_us": 9, "max_us": 9)";
  const std::string text =
      R"({"attention": [{"gpu": 0, "phase": "prefill", "batch": 1, "q_len": 16, "context": 256, "heads": 16,
          "kv_heads": 16, "head_dim": 192, )" + stats + R"(},
      {"gpu": 0, "phase": "prefill", "batch": 1, "q_len": 16, "context": 256, "heads": 16, "kv_heads": 16,
          "head_dim": 192, "v_dim": 128, )" + stats + "}]}";
  const Measurements ms = parse_measurements(JsonIn(parse_json_text(text, "profile.json"), "profile.json"));
  ASSERT_EQ(ms.attention.size(), 2u);
  EXPECT_EQ(ms.attention[0].v_dim, 192) << "absent: head_dim";
  EXPECT_EQ(ms.attention[1].v_dim, 128);
  const nlohmann::json out = measurements_to_json(ms);
  EXPECT_FALSE(out["attention"][0].contains("v_dim")) << "standard rows are written as before";
  EXPECT_EQ(out["attention"][1]["v_dim"], 128);
  const Measurements again = parse_measurements(JsonIn(out, "again.json"));
  EXPECT_EQ(measurements_to_json(again), out);
  Measurements built;
  built.attention = {row("decode", 1, 1, 256, 16, 1, 576, 0, 9e-6)};  // in-memory row, v_dim unset
  EXPECT_FALSE(measurements_to_json(built)["attention"][0].contains("v_dim")) << "0 means head_dim, not written";
  const std::string bad = R"({"attention": [{"gpu": 0, "phase": "decode", "batch": 1, "q_len": 1, "context": 256,
      "heads": 16, "kv_heads": 1, "head_dim": 576, "v_dim": 0, )" + stats + "}]}";
  EXPECT_THROW(parse_measurements(JsonIn(parse_json_text(bad, "p.json"), "p.json")), InputError);
}

}  // namespace
}  // namespace peerplan
