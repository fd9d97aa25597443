// Which routed-expert GEMMs a profile times (profiler/common/model_shapes.cpp): bf16 always, fp8 / int8 / int4
// when the profile times those GEMMs (the executor's 8-bit and int4 grouped kernels), never a format it cannot run.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "planner/model/model_config.hpp"
#include "planner/topology/measurements.hpp"
#include "planner/topology/shape_set.hpp"
#include "profiler/common/model_shapes.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

namespace {

std::set<std::string> grouped_dtypes(const std::vector<std::string>& dtypes) {
  const ModelConfig m = load_model_config(resolve_model_path("qwen1.5-moe-a2.7b"));
  std::set<std::string> out;
  for (const GroupedShapeKey& g : model_shape_set({m}, 2, dtypes).grouped) out.insert(g.dtype);
  return out;
}

}  // namespace

TEST(GroupedShapes, Fp8ExpertsAreTimedWhenTheProfileTimesFp8) {
  EXPECT_EQ(grouped_dtypes({"bf16"}), (std::set<std::string>{"bf16"}));
  EXPECT_EQ(grouped_dtypes({"bf16", "fp8"}), (std::set<std::string>{"bf16", "fp8"}));
  EXPECT_EQ(grouped_dtypes({"fp8"}), (std::set<std::string>{"bf16", "fp8"})) << "bf16 experts are always timed";
  EXPECT_EQ(grouped_dtypes({"bf16", "int8"}), (std::set<std::string>{"bf16", "int8"})) << "int8 experts run too";
  EXPECT_EQ(grouped_dtypes({"bf16", "fp8", "int8", "int4"}), (std::set<std::string>{"bf16", "fp8", "int8", "int4"}));
  // Each fp8 key has its bf16 twin (same n, k, experts): the same shards in the other format.
  const ModelConfig m = load_model_config(resolve_model_path("qwen1.5-moe-a2.7b"));
  const ShapeSet s = model_shape_set({m}, 2, {"bf16", "fp8"});
  int fp8 = 0;
  for (const GroupedShapeKey& g : s.grouped) {
    if (g.dtype != "fp8") continue;
    ++fp8;
    GroupedShapeKey twin = g;
    twin.dtype = "bf16";
    EXPECT_EQ(s.grouped.count(twin), 1u) << g.n << "x" << g.k << " experts " << g.experts;
  }
  EXPECT_GE(fp8, 4) << "gate_up and down, all experts and EP2's halves";
}

// A model whose experts have another model's shape (DeepSeek-V2-Lite's and Qwen1.5-MoE's 2816 x 2048 and
// 2048 x 1408) still gets its own grouped rows: priced from Qwen's alone its decode at batch 3-4 ran 0.94
// of its price (session 23 E).
TEST(GroupedShapes, AnotherModelsRowsOfTheSameExpertShapeDoNotCountAsMeasured) {
  const ModelConfig qwen = load_model_config(resolve_model_path("qwen1.5-moe-a2.7b"));
  const ModelConfig dsv2 = load_model_config(resolve_model_path("deepseek-v2-lite"));
  const ShapeSet q = model_shape_set({qwen}, 1, {"bf16"}), d = model_shape_set({dsv2}, 1, {"bf16"});
  Measurements have;
  for (const GroupedShapeKey& g : q.grouped)
    have.grouped_gemms.push_back({0, g.n, g.k, g.experts, g.topk, 8, 8 * g.topk, 8, 1, g.dtype, {}});
  ShapeSet want;
  want.grouped = d.grouped;
  ASSERT_FALSE(want.grouped.empty());
  for (const GroupedShapeKey& g : want.grouped) {
    bool same_shape = false;
    for (const GroupedShapeKey& h : q.grouped) same_shape |= h.n == g.n && h.k == g.k;
    EXPECT_TRUE(same_shape) << "the premise: Qwen1.5-MoE has the expert shape " << g.n << "x" << g.k;
  }
  EXPECT_EQ(missing_shapes(want, have).grouped, want.grouped) << "Qwen's rows are not DeepSeek-V2-Lite's";
  for (const GroupedShapeKey& g : d.grouped)
    have.grouped_gemms.push_back({0, g.n, g.k, g.experts, g.topk, 8, 8 * g.topk, 8, 1, g.dtype, {}});
  EXPECT_TRUE(missing_shapes(want, have).grouped.empty());
}

// int4 experts (moe_gemm_int4.cu) are timed when the profile times int4 GEMMs, on the shards their packing
// takes (n % 16, k % 128): Qwen1.5-MoE at TP 2 splits its down projection's k to 704, which 128-k groups do
// not divide, so that shard gets no int4 key and a note says why; its TP-1 and EP shards do.
TEST(GroupedShapes, Int4ExpertsAreTimedOnTheShardsTheirPackingTakes) {
  EXPECT_EQ(grouped_dtypes({"bf16", "int4"}), (std::set<std::string>{"bf16", "int4"}));
  EXPECT_EQ(grouped_dtypes({"int4", "fp8"}), (std::set<std::string>{"bf16", "fp8", "int4"}));
  const ModelConfig m = load_model_config(resolve_model_path("qwen1.5-moe-a2.7b"));
  std::vector<ShapeNote> notes;
  const ShapeSet s = model_shape_set({m}, 2, {"bf16", "int4"}, &notes);
  int int4 = 0;
  for (const GroupedShapeKey& g : s.grouped) {
    if (g.dtype != "int4") continue;
    ++int4;
    EXPECT_EQ(g.n % 16, 0) << g.n << "x" << g.k;
    EXPECT_EQ(g.k % 128, 0) << g.n << "x" << g.k;
  }
  EXPECT_GE(int4, 4) << "gate_up and down at TP 1 and EP 2";
  bool noted = false;
  for (const ShapeNote& n : notes) noted = noted || (n.what.find("int4 expert.down") != std::string::npos &&
                                                     n.what.find("704") != std::string::npos);
  EXPECT_TRUE(noted) << "the TP-2 down shard [2048, 704] is named in a note";
}

// The router ([experts x hidden]) and Qwen-MoE's shared-expert gate ([1 x hidden]) are timed, in bf16 only (they
// stay dense in every checkpoint), whatever --dtypes: before session 31 no profile had them and every MoE
// prediction priced them from the roofline fit (gpt-oss-20b at 4 sequences: ~3 us a layer short).
TEST(GroupedShapes, TheRouterAndTheSharedGateAreTimedInBf16) {
  const ModelConfig q = load_model_config(resolve_model_path("qwen1.5-moe-a2.7b"));
  for (const std::vector<std::string>& dtypes : {std::vector<std::string>{"bf16", "fp8"}, std::vector<std::string>{"int8"}}) {
    const ShapeSet s = model_shape_set({q}, 2, dtypes);
    EXPECT_EQ(s.gemms.count(GemmShapeKey{60, 2048, "bf16"}), 1u) << "router";
    EXPECT_EQ(s.gemms.count(GemmShapeKey{1, 2048, "bf16"}), 1u) << "shared_gate";
    for (const std::string& d : dtypes)
      if (d != "bf16") EXPECT_EQ(s.gemms.count(GemmShapeKey{60, 2048, d}), 0u) << "the router is never " << d;
  }
  const ModelConfig oss = load_model_config(resolve_model_path("gpt-oss-20b"));
  EXPECT_EQ(model_shape_set({oss}, 1, {"bf16"}).gemms.count(GemmShapeKey{32, 2880, "bf16"}), 1u);
  const ModelConfig llama = load_model_config(resolve_model_path("llama-3.1-8b"));
  for (const GemmShapeKey& g : model_shape_set({llama}, 1, {"bf16"}).gemms) EXPECT_GT(g.n, 1000) << "no router";
}
