// The profile times every GEMM the compiler emits (profiler/common/model_shapes.cpp, gemm_shapes.cpp): for each
// shipped model card, at TP 1 and 2, every Gemm op of a mixed iteration has its key in the profiled shape set, so
// `plan` and `simulate` on a fresh profile price no GEMM from the roofline fit. Before session 31 the MoE router,
// Qwen-MoE's shared-expert gate and MLA's q / q_a / q_b / kv_a / kv_b were missing (only validate measured them).
#include <gtest/gtest.h>

#include <string>

#include "planner/compile/compiler.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/shape_set.hpp"
#include "planner/validate/missing_shapes.hpp"
#include "profiler/common/model_shapes.hpp"
#include "tests/plan_fixtures.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

TEST(ProfiledGemms, EveryCompiledGemmOfEveryShippedModelIsProfiled) {
  for (const char* name : {"deepseek-v2-lite", "deepseek-v3", "gpt-oss-120b", "gpt-oss-20b", "llama-3.1-70b",
                           "llama-3.1-70b-awq", "llama-3.1-70b-fp8", "llama-3.1-8b", "llama-3.1-8b-fp8", "mistral-7b",
                           "mixtral-8x7b", "qwen1.5-moe-a2.7b"}) {
    const ModelConfig m = load_model_config(resolve_model_path(name));
    const ModelFigures fig = derive_figures(m);
    const ShapeSet s = model_shape_set({m}, 2, {"bf16", "fp8", "int8", "int4"});
    for (int tp : {1, 2}) {
      if (m.heads % tp != 0) continue;
      std::vector<int> gpus;
      for (int g = 0; g < tp; ++g) gpus.push_back(g);
      const Plan plan = test_plans::tp(gpus, int(m.layers));
      Machine host;
      host.gpus.resize(size_t(tp));
      BatchShape b;  // a mixed iteration: prefill GEMMs (MLA's kv_b) and decode ones
      b.prefill_seqs = 1, b.prefill_tokens = 256, b.prefill_context = 256;
      b.decode_seqs = 2, b.decode_context = 512;
      int gemms = 0;
      for (const Op& op : compile_iteration(plan, m, fig, host, b).ops) {
        if (op.kind != OpKind::Gemm) continue;
        ++gemms;
        const GemmShapeKey k = gemm_shape_key(op);
        EXPECT_EQ(s.gemms.count(k), 1u) << name << " TP " << tp << ": " << op.name << " " << k.n << " x " << k.k << " "
                                        << k.dtype << " batch " << k.batch << " is not profiled";
      }
      EXPECT_GT(gemms, 0) << name;
    }
  }
}
