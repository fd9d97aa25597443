// The executor's launch order for shared experts on a second stream (profiler/common/shared_stream.hpp),
// on compiled graphs: which ops leave the main stream, where it forks and joins, and that every op is
// launched exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "planner/compile/compiler.hpp"
#include "profiler/common/shared_stream.hpp"
#include "tests/plan_fixtures.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan::exec {
namespace {

BatchShape decode(int64_t seqs) {
  BatchShape b;
  b.decode_seqs = seqs, b.decode_context = 1024;
  return b;
}

OpGraph graph(const std::string& model, const BatchShape& b, const std::vector<int>& gpus = {0}) {
  auto m = testing::model(model);
  auto topo = testing::machine("nvswitch-8");
  return compile_iteration(test_plans::tp(gpus, int(m.cfg.layers)), m.cfg, m.fig, topo->machine(), b);
}

std::string short_name(const Op& op) { return op.name.substr(op.name.find('.') + 1); }

TEST(SharedStream, QwenDecodeForksAfterTheRouterAndJoinsAtTheCombine) {
  const OpGraph g = graph("qwen1.5-moe-a2.7b", decode(8));
  const std::vector<int>& ids = g.stage_ops[0];
  const std::vector<StreamStep> order = shared_stream_order(g, ids);
  // Every op exactly once.
  ASSERT_EQ(order.size(), ids.size());
  std::vector<int> seen;
  for (const auto& s : order) seen.push_back(s.op);
  std::vector<int> want = ids;
  std::sort(seen.begin(), seen.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(seen, want);
  // Layer 5's MLP, in launch order: the router GEMM on the main stream, then the shared branch on the
  // auxiliary one (forked at its first op), the route and routed experts on the main one, joined at
  // the combine.
  std::vector<std::string> names, streams;
  int forks = 0, joins = 0, aux = 0;
  for (const auto& s : order) {
    const Op& op = g.ops[size_t(s.op)];
    forks += s.fork, joins += s.join, aux += s.aux;
    if (op.layer != 5) continue;
    const std::string n = short_name(op);
    if (n == "router" || n.rfind("shared", 0) == 0 || n.rfind("expert", 0) == 0 || n.rfind("moe_", 0) == 0) {
      names.push_back(n);
      streams.push_back(std::string(s.aux ? "aux" : "main") + (s.fork ? "+fork" : "") + (s.join ? "+join" : ""));
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"router", "shared.gate_up", "shared.act", "shared.down", "shared_gate",
                                             "moe_route", "expert.gate_up", "expert.act", "expert.down",
                                             "moe_combine"}));
  EXPECT_EQ(streams, (std::vector<std::string>{"main", "aux+fork", "aux", "aux", "aux", "main", "main", "main", "main",
                                               "main+join"}));
  const int layers = int(testing::model("qwen1.5-moe-a2.7b").cfg.layers);
  EXPECT_EQ(forks, layers);
  EXPECT_EQ(joins, layers);
  EXPECT_EQ(aux, 4 * layers);
}

TEST(SharedStream, OnlyAtOrUnderTheTokenThresholdAndOnlyWithSharedExperts) {
  // 300 decode tokens: past vLLM's 256, one stream.
  const OpGraph big = graph("qwen1.5-moe-a2.7b", decode(300));
  for (const auto& s : shared_stream_order(big, big.stage_ops[0])) EXPECT_FALSE(s.aux || s.fork || s.join);
  // A 256-token iteration takes it; the threshold is the caller's to lower.
  const OpGraph at = graph("qwen1.5-moe-a2.7b", decode(256));
  int aux = 0;
  for (const auto& s : shared_stream_order(at, at.stage_ops[0])) aux += s.aux;
  EXPECT_GT(aux, 0);
  aux = 0;
  for (const auto& s : shared_stream_order(at, at.stage_ops[0], 128)) aux += s.aux;
  EXPECT_EQ(aux, 0);
  // Mixtral has no shared expert, Llama no experts: the order is the graph's.
  for (const std::string model : {"mixtral-8x7b", "llama-3.1-8b"}) {
    const OpGraph g = graph(model, decode(1));
    const auto order = shared_stream_order(g, g.stage_ops[0]);
    ASSERT_EQ(order.size(), g.stage_ops[0].size()) << model;
    for (size_t i = 0; i < order.size(); ++i) {
      EXPECT_EQ(order[i].op, g.stage_ops[0][i]) << model;
      EXPECT_FALSE(order[i].aux || order[i].fork || order[i].join) << model;
    }
  }
}

TEST(SharedStream, EachGpuOfATp2GroupForksAndJoinsItsOwnBranch) {
  const OpGraph g = graph("qwen1.5-moe-a2.7b", decode(4), {0, 1});
  std::map<int, int> open, forks;
  for (const auto& s : shared_stream_order(g, g.stage_ops[0])) {
    const Op& op = g.ops[size_t(s.op)];
    const int gpu = op.gpus[0];
    if (s.fork) {
      EXPECT_EQ(open[gpu], 0) << op.name << ": forked twice";
      open[gpu] = 1, ++forks[gpu];
    }
    if (s.aux) {
      EXPECT_TRUE(is_shared_expert_op(op)) << op.name;
      EXPECT_EQ(open[gpu], 1) << op.name << ": on the auxiliary stream before a fork";
    }
    if (s.join) {
      EXPECT_EQ(op.ew, EwKind::MoeCombine) << op.name;
      EXPECT_EQ(open[gpu], 1) << op.name;
      open[gpu] = 0;
    }
    // The all-reduce after the combine never runs with a branch open.
    if (is_collective(op.kind)) {
      for (int member : op.gpus) EXPECT_EQ(open[member], 0) << op.name;
    }
  }
  EXPECT_EQ(forks[0], forks[1]);
  EXPECT_GT(forks[0], 0);
}

TEST(SharedStream, TheSwitchIsZeroOrOne) {
  EXPECT_FALSE(shared_stream_from_env(nullptr));
  EXPECT_FALSE(shared_stream_from_env(""));
  EXPECT_FALSE(shared_stream_from_env("0"));
  EXPECT_TRUE(shared_stream_from_env("1"));
  try {
    shared_stream_from_env("yes");
    FAIL() << "accepted yes";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("PEERPLAN_SHARED_STREAM=yes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace peerplan::exec
