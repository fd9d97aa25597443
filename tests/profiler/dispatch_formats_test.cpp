// Which expert formats a paced profile times the MoE dispatch's throttle mixes in (profiler/common/
// dispatch_formats.hpp): each model's whole gate_up among the profiled grouped shapes, and what `--add-model`
// still has to time.
#include <gtest/gtest.h>

#include "planner/core/files.hpp"
#include "profiler/common/dispatch_formats.hpp"

namespace peerplan::profiler {
namespace {

ModelConfig model(const std::string& name) {
  return load_model_config(find_data_file("models/llm/" + name + "/config.json"));
}

GroupedShapeKey gate_up(const ModelConfig& m, const std::string& dtype, int64_t experts = 0) {
  GroupedShapeKey k;
  k.n = 2 * m.expert_intermediate, k.k = m.hidden, k.experts = experts ? experts : m.experts, k.topk = m.experts_per_token;
  k.model_experts = m.experts, k.gather = true, k.dtype = dtype;
  return k;
}

TEST(DispatchFormats, EachModelsWholeGateUpInEveryFormatProfiled) {
  const ModelConfig mixtral = model("mixtral-8x7b"), qwen = model("qwen1.5-moe-a2.7b"), dense = model("llama-3.1-8b");
  std::set<GroupedShapeKey> shapes = {gate_up(mixtral, "bf16"), gate_up(mixtral, "int8"), gate_up(qwen, "fp8")};
  GroupedShapeKey down = gate_up(mixtral, "fp8");
  down.gather = false, down.n = mixtral.hidden, down.k = mixtral.expert_intermediate;
  shapes.insert(down);                          // down: not the dispatch's key shape
  shapes.insert(gate_up(qwen, "int4", 30));     // an EP shard: the mixes run every expert on one GPU
  const auto f = dispatch_formats({mixtral, qwen, dense}, shapes);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0], (std::vector<DType>{DType::BF16, DType::INT8}));
  EXPECT_EQ(f[1], (std::vector<DType>{DType::FP8_E4M3}));
  EXPECT_TRUE(f[2].empty()) << "a dense model has no dispatch";
}

TEST(DispatchFormats, AddModelTimesOnlyTheFormatsWithoutATable) {
  const ModelConfig mixtral = model("mixtral-8x7b");
  PowerThrottle t;
  GroupedThrottle g;
  g.hidden = mixtral.hidden, g.intermediate = mixtral.expert_intermediate, g.experts = mixtral.experts;
  g.topk = mixtral.experts_per_token, g.tokens = 2048, g.dtype = "bf16";
  t.grouped.push_back(g);
  EXPECT_EQ(formats_without_table(t, mixtral, {DType::BF16, DType::INT8}), std::vector<DType>{DType::INT8});
  t.grouped.back().dtype = "int8";
  EXPECT_EQ(formats_without_table(t, mixtral, {DType::INT8}), std::vector<DType>{});
  EXPECT_EQ(formats_without_table(t, model("qwen1.5-moe-a2.7b"), {DType::INT8}), std::vector<DType>{DType::INT8})
      << "another expert shape's table does not count";
}

}  // namespace
}  // namespace peerplan::profiler
