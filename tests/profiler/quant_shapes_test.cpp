// The shapes the executor's quantized kernels take (profiler/common/quant_shapes.hpp), one rule for the
// runners and the engine's check of a plan's ops before any weight is made.
#include "profiler/common/quant_shapes.hpp"

#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/core/files.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/topology/machine.hpp"
#include "profiler/common/gemm_shapes.hpp"
#include "tests/plan_fixtures.hpp"

namespace peerplan::kernels {
namespace {

TEST(QuantShapes, EachFormatsRule) {
  EXPECT_TRUE(quant_gemm_shape_ok(DType::BF16, 200, 10944)) << "bf16 takes any shape";
  EXPECT_TRUE(quant_gemm_shape_ok(DType::INT4, 2048, 1408));
  EXPECT_FALSE(quant_gemm_shape_ok(DType::INT4, 2048, 10944)) << "k not a multiple of the 128-k group";
  EXPECT_FALSE(quant_gemm_shape_ok(DType::INT4, 2044, 1408)) << "n not a multiple of 8";
  EXPECT_TRUE(quant_gemm_shape_ok(DType::FP8_E4M3, 2048, 10944));
  EXPECT_FALSE(quant_gemm_shape_ok(DType::INT8, 2048, 10940));
  EXPECT_FALSE(quant_gemm_shape_ok(DType::MXFP4, 2048, 2048)) << "no MXFP4 GEMM";
  EXPECT_TRUE(quant_grouped_shape_ok(DType::INT4, 2816, 2048));
  EXPECT_FALSE(quant_grouped_shape_ok(DType::INT4, 2048, 704)) << "Qwen1.5-MoE's down at TP 2";
  EXPECT_FALSE(quant_grouped_shape_ok(DType::INT4, 2056, 2048)) << "n not a multiple of the 16-row tile";
  EXPECT_TRUE(quant_grouped_shape_ok(DType::FP8_E4M3, 2048, 704));
  EXPECT_TRUE(quant_grouped_shape_ok(DType::INT8, 2048, 704)) << "int8 experts: the FP8 kernels' k step";
  EXPECT_FALSE(quant_grouped_shape_ok(DType::INT8, 2048, 720)) << "k not a multiple of 32";
  EXPECT_TRUE(quant_grouped_shape_ok(DType::MXFP4, 5760, 2880)) << "gpt-oss gate_up: 45 chunks of 64 k";
  EXPECT_TRUE(quant_grouped_shape_ok(DType::MXFP4, 1440, 2880)) << "gpt-oss gate_up at TP 4";
  EXPECT_FALSE(quant_grouped_shape_ok(DType::MXFP4, 2880, 720)) << "gpt-oss down at TP 4: k not a multiple of 64";
  EXPECT_FALSE(quant_grouped_shape_ok(DType::MXFP4, 2888, 2880)) << "n not a multiple of the 16-row tile";
  EXPECT_NE(quant_shape_rule(DType::INT4, true).find("128"), std::string::npos);
}

ModelConfig shipped(const std::string& name) { return load_model_config(find_data_file("models/llm/" + name + "/config.json")); }

OpGraph decode_graph(const ModelConfig& c, const std::vector<int>& tp, const std::string& machine = "h200x2-nvlink") {
  BatchShape b;
  b.decode_seqs = 4, b.decode_context = 512;
  const Machine m = load_machine(find_data_file("models/hardware/" + machine + ".json"));
  return compile_iteration(test_plans::tp(tp, int(c.layers)), c, derive_figures(c), m, b);
}

// What the engine refuses before it makes a weight: DeepSeek-V2-Lite in int4 (its layer-0 dense MLP's down
// has k = 10944), Qwen1.5-MoE's int4 experts split at TP 2 (k = 704); the same models in bf16 and fp8, and
// Qwen1.5-MoE in int4 on one GPU, run.
TEST(QuantShapes, TheEnginesCheckNamesTheOpAndTheShape) {
  ModelConfig dsv2 = shipped("deepseek-v2-lite");
  EXPECT_EQ(unrunnable_quant_op(decode_graph(dsv2, {0})), "");
  apply_precision(dsv2, DType::INT4, std::nullopt);
  const std::string why = unrunnable_quant_op(decode_graph(dsv2, {0}));
  EXPECT_NE(why.find("L0."), std::string::npos) << why;
  EXPECT_NE(why.find("10944"), std::string::npos) << why;
  EXPECT_NE(why.find("int4"), std::string::npos) << why;
  EXPECT_NE(why.find("multiple of 128"), std::string::npos) << why;
  apply_precision(dsv2, DType::FP8_E4M3, std::nullopt);
  EXPECT_EQ(unrunnable_quant_op(decode_graph(dsv2, {0})), "");

  ModelConfig qwen = shipped("qwen1.5-moe-a2.7b");
  apply_precision(qwen, DType::INT4, std::nullopt);
  EXPECT_EQ(unrunnable_quant_op(decode_graph(qwen, {0})), "") << "int4 Qwen1.5-MoE on one GPU runs";
  const std::string tp2 = unrunnable_quant_op(decode_graph(qwen, {0, 1}));
  EXPECT_NE(tp2.find("704"), std::string::npos) << tp2;
  EXPECT_NE(tp2.find("grouped expert kernels"), std::string::npos) << tp2;
  apply_precision(qwen, DType::INT8, std::nullopt);
  EXPECT_EQ(unrunnable_quant_op(decode_graph(qwen, {0, 1})), "") << "int8 experts split at TP 2 run (k = 704)";
}

// gpt-oss's MXFP4 experts: whole on one GPU (gate_up [5760, 2880] and down [2880, 2880] are 45 chunks of 64 k);
// split by TP, each rank's share of the 2880 intermediate is padded to a multiple of 64 as engines pad it at load
// (1440 -> 1472 at TP 2, 720 -> 768 at TP 4), so every shard runs, and the profiler times the same padded shapes.
TEST(QuantShapes, GptOssMxfp4ExpertsRunWholeAndPaddedUnderTp) {
  for (const char* name : {"gpt-oss-20b", "gpt-oss-120b"}) {
    const ModelConfig oss = shipped(name);
    for (const auto& [gpus, inter] : std::vector<std::pair<std::vector<int>, int64_t>>{
             {{0}, 2880}, {{0, 1}, 1472}, {{0, 1, 2, 3}, 768}}) {
      const OpGraph g = decode_graph(oss, gpus, "hgx-h100x8");
      int mx = 0;
      for (const Op& o : g.ops) {
        if (o.kind != OpKind::GroupedGemm || o.gpus.front() != 0) continue;
        EXPECT_EQ(o.wdtype, DType::MXFP4) << name << ": its checkpoint's experts are MXFP4";
        if (o.name.find("expert.gate_up") != std::string::npos) EXPECT_EQ(o.n, 2 * inter) << name << " " << o.name;
        if (o.name.find("expert.down") != std::string::npos) EXPECT_EQ(o.k, inter) << name << " " << o.name;
        ++mx;
      }
      EXPECT_GT(mx, 0) << name;
      EXPECT_EQ(unrunnable_quant_op(g), "") << name << " at TP " << gpus.size();
      bool profiled = false;
      for (const profiler::WeightShape& w : profiler::weight_shapes(oss, int(gpus.size())))
        if (w.tp == int(gpus.size()) && w.name == "expert.down") profiled = w.k == inter;
      EXPECT_TRUE(profiled) << name << ": the profiler times the padded down projection at TP " << gpus.size();
    }
  }
  // bf16 experts keep their exact share (Qwen1.5-MoE's 1408 / 2 = 704).
  const OpGraph q = decode_graph(shipped("qwen1.5-moe-a2.7b"), {0, 1});
  for (const Op& o : q.ops)
    if (o.kind == OpKind::GroupedGemm && o.name.find("expert.down") != std::string::npos) EXPECT_EQ(o.k, 704);
}

}  // namespace
}  // namespace peerplan::kernels
