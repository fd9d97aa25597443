// Qwen3's QK-norm op (issue 23 item 4) is priced as every elementwise op is: by the bytes it moves
// over the profile's measured HBM bandwidth ("derived"; profiles have no elementwise points), the
// same as an RmsNorm of those bytes, never below the per-kernel floor.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/topology.hpp"
#include "tests/plan_fixtures.hpp"

namespace peerplan {
namespace {

const Op& named(const OpGraph& g, const std::string& name) {
  for (const auto& o : g.ops)
    if (o.name == name) return o;
  throw std::runtime_error("no op " + name);
}

TEST(QkNormCost, PricedByBytesOnTheMeasuredHbmLikeAnRmsNorm) {
  const ModelConfig cfg = load_model_config(std::string(PEERPLAN_TEST_DATA) + "/model/qwen3-8b.json");
  const ModelFigures fig = derive_figures(cfg);
  const Machine machine = load_machine(resolve_machine_path("h200x2-nvlink"));
  ASSERT_TRUE(machine.measurements && !machine.measurements->hbm_gbps.empty());
  const Topology topo(machine);
  const CostModel cost(topo);
  const double hbm = machine.measurements->hbm_gbps[0] * 1e9;
  for (int64_t tokens : {int64_t(1), int64_t(4096)}) {
    BatchShape b;
    if (tokens == 1) b.decode_seqs = 1, b.decode_context = 512;
    else b.prefill_seqs = 1, b.prefill_tokens = tokens, b.prefill_context = tokens;
    const OpGraph g = compile_iteration(test_plans::tp({0}, int(cfg.layers)), cfg, fig, machine, b);
    const Op& qn = named(g, "L3.qk_norm");
    ASSERT_EQ(qn.ew, EwKind::QkNorm);
    EXPECT_DOUBLE_EQ(qn.mem_bytes, (double(tokens) * 40 * 128 * 2 + 256) * 2);
    const OpCost& c = cost.price(qn, tokens == 1);
    EXPECT_EQ(c.source, CostSource::Derived) << tokens;
    EXPECT_NEAR(c.seconds, std::max(qn.mem_bytes / hbm, cost.min_kernel_s(0)), 1e-12) << tokens;
    // An RmsNorm moving the same bytes costs the same: the kind selects the executor's kernel only.
    Op rms = qn;
    rms.ew = EwKind::RmsNorm;
    rms.name = "L3.attn_norm";
    EXPECT_DOUBLE_EQ(cost.price(rms, tokens == 1).seconds, c.seconds) << tokens;
  }
  // 4096 tokens: 84 MB over the measured HBM is tens of microseconds, well above the kernel floor.
  BatchShape big;
  big.prefill_seqs = 1, big.prefill_tokens = 4096, big.prefill_context = 4096;
  const OpGraph g = compile_iteration(test_plans::tp({0}, int(cfg.layers)), cfg, fig, machine, big);
  EXPECT_GT(cost.price(named(g, "L0.qk_norm"), false).seconds, 5 * cost.min_kernel_s(0));
}

}  // namespace
}  // namespace peerplan
