// Pricing by number format (issue 15): measured rows of the op's dtype first; without them the
// bf16 price scaled by the roofline ratio, marked fitted; attention over an fp8 KV cache likewise.
#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "planner/cost/compute_cost.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/cost/quant_cost.hpp"
#include "planner/topology/topology.hpp"
#include "tests/cost/cost_test_util.hpp"

namespace peerplan {
namespace {

GemmTime row(int64_t m, int64_t n, int64_t k, const std::string& dtype, double s) {
  GemmTime g;
  g.m = m, g.n = n, g.k = k, g.dtype = dtype;
  g.time.median = s;
  return g;
}

// A decode GEMM [8, 4096] x [4096, 4096] with weights in `w` (mem_bytes as the compiler counts).
Op decode_gemm(DType w) {
  Op op;
  op.kind = OpKind::Gemm;
  op.gpus = {0};
  op.m = 8, op.n = 4096, op.k = 4096;
  op.wdtype = w;
  op.flops = 2.0 * 8 * 4096 * 4096;
  op.mem_bytes = (8.0 * 4096 * 2) * 2 + 4096.0 * 4096 * dtype_bits(w) / 8;
  return op;
}

Op decode_attention(DType kv) {
  Op op;
  op.kind = OpKind::Attention;
  op.gpus = {0};
  op.attn_batch = 16, op.attn_q_len = 1, op.attn_context = 4096, op.attn_heads = 32, op.attn_kv_heads = 8,
  op.attn_head_dim = 128;
  op.kv_dtype = kv;
  const double cache = 16.0 * 4096 * 2 * 8 * 128 * (kv == DType::FP8_E4M3 ? 1 : 2);
  op.mem_bytes = cache + 16.0 * 32 * 128 * 2 * 2;
  op.flops = 4.0 * 32 * 128 * 16 * 4096;
  return op;
}

TEST(QuantCost, TableRowsAreMatchedByDtype) {
  std::vector<GemmTime> t = {row(8, 4096, 4096, "bf16", 20e-6), row(8, 4096, 4096, "fp8", 11e-6)};
  EXPECT_DOUBLE_EQ(gemm_from_table(t, 0, 8, 4096, 4096)->seconds, 20e-6);
  EXPECT_DOUBLE_EQ(gemm_from_table(t, 0, 8, 4096, 4096, "fp8")->seconds, 11e-6);
  EXPECT_FALSE(gemm_from_table(t, 0, 8, 4096, 4096, "int4")) << "no int4 row: the caller scales bf16";
}

TEST(QuantCost, MeasuredFp8RowsWin) {
  Machine m = simtest::pcie_switch_machine(1);
  m.measurements = Measurements{};
  m.measurements->gemms = {row(8, 4096, 4096, "bf16", 20e-6), row(8, 4096, 4096, "fp8", 11e-6)};
  Topology topo(m);
  CostModel cost(topo);
  const OpCost& c = cost.price(decode_gemm(DType::FP8_E4M3), false);
  EXPECT_DOUBLE_EQ(c.seconds, 11e-6);
  EXPECT_EQ(c.source, CostSource::Measured);
  EXPECT_DOUBLE_EQ(cost.price(decode_gemm(DType::BF16), false).seconds, 20e-6);
}

TEST(QuantCost, UnmeasuredFormatScalesTheBf16PriceByTheRoofline) {
  Machine m = simtest::pcie_switch_machine(1);
  m.measurements = Measurements{};
  m.measurements->gemms = {row(8, 4096, 4096, "bf16", 20e-6)};
  Topology topo(m);
  CostModel cost(topo);
  // Weight-bound at m = 8: fp8 streams about half the bytes, int4 about a quarter.
  const OpCost& f8 = cost.price(decode_gemm(DType::FP8_E4M3), false);
  EXPECT_EQ(f8.source, CostSource::Fitted);
  EXPECT_NEAR(f8.seconds / 20e-6, 0.5, 0.02);
  const OpCost& i4 = cost.price(decode_gemm(DType::INT4), false);
  EXPECT_NEAR(i4.seconds / 20e-6, 0.25, 0.02);
  // Compute-bound (m = 8192, no row): the bf16 roofline price halves for fp8 (2x tensor rate
  // assumed: the test machine states no compute capability), stays for int4 (weight-only).
  Op big = decode_gemm(DType::BF16);
  big.m = 8192, big.flops = 2.0 * 8192 * 4096 * 4096, big.mem_bytes = (8192.0 * 4096 * 2) * 2 + 4096.0 * 4096 * 2;
  const double bf16 = cost.price(big, false).seconds;
  Op big8 = big;
  big8.wdtype = DType::FP8_E4M3, big8.mem_bytes -= 4096.0 * 4096;
  EXPECT_NEAR(cost.price(big8, false).seconds / bf16, 0.5, 0.01);
  Op big4 = big;
  big4.wdtype = DType::INT4, big4.mem_bytes -= 4096.0 * 4096 * 1.5;
  EXPECT_NEAR(cost.price(big4, false).seconds / bf16, 1.0, 0.01);
}

TEST(QuantCost, Bf16EquivalentUsesTheStoredBytesNotTheLabel) {
  // A GGUF Q6_K matrix is labelled int4 but stores 210 bytes per 256 weights (6.5625 bits).
  Op q6k = decode_gemm(DType::INT4);
  q6k.mem_bytes = (8.0 * 4096 * 2) * 2 + 4096.0 * 4096 * 210.0 / 256.0;
  const Op b = bf16_equivalent(q6k);
  EXPECT_EQ(b.wdtype, DType::BF16);
  EXPECT_DOUBLE_EQ(b.mem_bytes, decode_gemm(DType::BF16).mem_bytes) << "the bf16 kernel of the same shape";
  // Grouped: m counts rows over all touched experts, batch_count the experts.
  Op g = q6k;
  g.kind = OpKind::GroupedGemm, g.m = 24, g.batch_count = 3;
  g.mem_bytes = (24.0 * 4096 + 24.0 * 4096) * 2 + 3 * 4096.0 * 4096 * 210.0 / 256.0;
  EXPECT_DOUBLE_EQ(bf16_equivalent(g).mem_bytes, (24.0 * 4096 + 24.0 * 4096) * 2 + 3 * 4096.0 * 4096 * 2);
  // Priced from a bf16 row only: scaled by stored / bf16 bytes, ~0.41 (the label's bits gave ~0.35).
  Machine m = simtest::pcie_switch_machine(1);
  m.measurements = Measurements{};
  m.measurements->gemms = {row(8, 4096, 4096, "bf16", 20e-6)};
  Topology topo(m);
  CostModel cost(topo);
  const double want = q6k.mem_bytes / decode_gemm(DType::BF16).mem_bytes;
  EXPECT_NEAR(cost.price(q6k, false).seconds / 20e-6, want, 0.005);
  EXPECT_NEAR(want, 0.41, 0.01);
}

TEST(QuantCost, TensorRateByComputeCapability) {
  EXPECT_EQ(tensor_rate_factor(DType::FP8_E4M3, "9.0"), 2.0);
  EXPECT_EQ(tensor_rate_factor(DType::FP8_E4M3, "8.9"), 2.0);  // Ada (RTX 4090, L40S)
  EXPECT_EQ(tensor_rate_factor(DType::FP8_E4M3, "8.0"), 1.0);  // A100: fp8 runs weight-only
  EXPECT_EQ(tensor_rate_factor(DType::INT8, "8.0"), 2.0);
  EXPECT_EQ(tensor_rate_factor(DType::INT4, "9.0"), 1.0);
  EXPECT_EQ(tensor_rate_factor(DType::MXFP4, "9.0"), 1.0);
}

TEST(QuantCost, Fp8KvAttentionFromItsRowsElseScaled) {
  Machine m = simtest::pcie_switch_machine(1);
  m.measurements = Measurements{};
  AttentionTime a;
  a.phase = "decode", a.batch = 16, a.q_len = 1, a.context = 4096, a.heads = 32, a.kv_heads = 8, a.head_dim = 128;
  a.time.median = 100e-6;
  m.measurements->attention = {a};
  {
    Topology topo(m);
    CostModel cost(topo);
    EXPECT_NEAR(cost.price(decode_attention(DType::BF16), false).seconds, 100e-6, 1e-12);
    const OpCost& f8 = cost.price(decode_attention(DType::FP8_E4M3), false);
    EXPECT_EQ(f8.source, CostSource::Fitted);
    EXPECT_NEAR(f8.seconds / 100e-6, 0.5, 0.03) << "memory-bound decode reads half the bytes";
  }
  AttentionTime a8 = a;
  a8.kv_dtype = "fp8";
  a8.time.median = 57e-6;
  m.measurements->attention.push_back(a8);
  Topology topo(m);
  CostModel cost(topo);
  // (the measured grid interpolates in log space: equal to the row up to rounding)
  EXPECT_NEAR(cost.price(decode_attention(DType::FP8_E4M3), false).seconds, 57e-6, 1e-12);
  EXPECT_NEAR(cost.price(decode_attention(DType::BF16), false).seconds, 100e-6, 1e-12) << "fp8 rows do not price bf16";
}

TEST(QuantCost, AttentionKvDtypeRoundTripsAndIsChecked) {
  Measurements m;
  AttentionTime a;
  a.phase = "decode", a.batch = 1, a.q_len = 1, a.context = 8, a.heads = 1, a.kv_heads = 1, a.head_dim = 64;
  a.kv_dtype = "fp8";
  a.time = compute_stats({1e-6, 1.1e-6, 0.9e-6});
  m.attention = {a};
  nlohmann::json j = measurements_to_json(m);
  Measurements back = parse_measurements(JsonIn(j, "m.json"));
  EXPECT_EQ(back.attention.at(0).kv_dtype, "fp8");
  j["attention"][0]["kv_dtype"] = "int4";
  EXPECT_THROW(parse_measurements(JsonIn(j, "m.json")), InputError);
  j["attention"][0].erase("kv_dtype");
  EXPECT_EQ(parse_measurements(JsonIn(j, "m.json")).attention.at(0).kv_dtype, "bf16") << "absent means bf16";
}

}  // namespace
}  // namespace peerplan
