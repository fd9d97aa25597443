// A MoE layer's shared experts on a second stream: what the compiler emits (Op::stream, the branch's
// dependencies) and the executor's launch plan from it (profiler/common/shared_stream.hpp): which ops
// leave the main stream, where it forks and joins, every op launched once, in graph order.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "planner/compile/act_fusion.hpp"
#include "planner/compile/compiler.hpp"
#include "profiler/common/env_switch.hpp"
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

OpGraph graph(const std::string& model, const BatchShape& b, int shared_stream, const std::vector<int>& gpus = {0}) {
  auto m = testing::model(model);
  auto topo = testing::machine("nvswitch-8");
  CompileOptions o;
  o.shared_stream = shared_stream;
  return compile_iteration(test_plans::tp(gpus, int(m.cfg.layers)), m.cfg, m.fig, topo->machine(), b, o);
}

std::string short_name(const Op& op) { return op.name.substr(op.name.find('.') + 1); }

const Op* find(const OpGraph& g, const std::string& name) {
  for (const Op& o : g.ops)
    if (o.name == name) return &o;
  return nullptr;
}

TEST(SharedStream, QwenDecodeForksAfterTheRouterAndJoinsAtTheCombine) {
  const OpGraph g = graph("qwen1.5-moe-a2.7b", decode(8), 1);
  const std::vector<StreamStep> steps = stream_steps(g, g.stage_ops[0]);
  ASSERT_EQ(steps.size(), g.stage_ops[0].size());
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i].op, g.stage_ops[0][i]) << "graph order";
  // Layer 5's MLP in launch order: the router GEMM on the main stream, the shared branch on the
  // auxiliary one (forked at its first op), the route and routed experts on the main one, joined at
  // the combine.
  std::vector<std::string> names, streams;
  int forks = 0, joins = 0, aux = 0;
  for (const auto& s : steps) {
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
  // The dependencies the simulator runs: the branch hangs off the router, the route does not wait for
  // it, the combine waits for both.
  const Op& router = *find(g, "L5.router");
  const Op& gate_up = *find(g, "L5.shared.gate_up");
  const Op& route = *find(g, "L5.moe_route");
  const Op& shared_gate = *find(g, "L5.shared_gate");
  const Op& combine = *find(g, "L5.moe_combine");
  const Op& down = *find(g, "L5.expert.down");
  EXPECT_EQ(gate_up.deps, std::vector<int>{router.id});
  EXPECT_EQ(route.deps, std::vector<int>{router.id});
  EXPECT_EQ(combine.deps, (std::vector<int>{std::min(down.id, shared_gate.id), std::max(down.id, shared_gate.id)}));
  EXPECT_EQ(gate_up.stream, 1);
  EXPECT_EQ(route.stream, 0);
}

TEST(SharedStream, OneStreamPastTheThresholdWithoutSharedExpertsOrWhenOff) {
  // 16 decode tokens: past the executor's 8 (kSharedStreamMaxTokens; vLLM's default is 256).
  const OpGraph big = graph("qwen1.5-moe-a2.7b", decode(16), 1);
  for (const Op& op : big.ops) EXPECT_EQ(op.stream, 0) << op.name;
  int aux = 0;
  for (const Op& op : graph("qwen1.5-moe-a2.7b", decode(kSharedStreamMaxTokens), 1).ops) aux += op.stream;
  EXPECT_GT(aux, 0);
  // Off, or as a machine whose profile does not say so: the graph is the one-stream graph, op for op.
  const OpGraph off = graph("qwen1.5-moe-a2.7b", decode(8), 0), as_machine = graph("qwen1.5-moe-a2.7b", decode(8), -1);
  ASSERT_EQ(off.ops.size(), as_machine.ops.size());
  for (size_t i = 0; i < off.ops.size(); ++i) {
    EXPECT_EQ(off.ops[i].name, as_machine.ops[i].name);
    EXPECT_EQ(off.ops[i].deps, as_machine.ops[i].deps);
    EXPECT_EQ(off.ops[i].stream, 0);
  }
  for (const auto& s : stream_steps(off, off.stage_ops[0])) EXPECT_FALSE(s.aux || s.fork || s.join);
  // Mixtral has no shared expert, Llama no experts.
  for (const std::string model : {"mixtral-8x7b", "llama-3.1-8b"})
    for (const Op& op : graph(model, decode(1), 1).ops) EXPECT_EQ(op.stream, 0) << model << " " << op.name;
}

TEST(SharedStream, EachGpuOfATp2GroupForksAndJoinsItsOwnBranch) {
  const OpGraph g = graph("qwen1.5-moe-a2.7b", decode(4), 1, {0, 1});
  std::map<int, int> open, forks;
  for (const auto& s : stream_steps(g, g.stage_ops[0])) {
    const Op& op = g.ops[size_t(s.op)];
    const int gpu = op.gpus[0];
    if (s.fork) {
      EXPECT_EQ(open[gpu], 0) << op.name << ": forked twice";
      open[gpu] = 1, ++forks[gpu];
    }
    if (s.aux) {
      EXPECT_EQ(op.stream, 1) << op.name;
      EXPECT_EQ(open[gpu], 1) << op.name << ": on the auxiliary stream before a fork";
    }
    if (s.join) {
      EXPECT_EQ(op.ew, EwKind::MoeCombine) << op.name;
      EXPECT_EQ(open[gpu], 1) << op.name;
      open[gpu] = 0;
    }
    if (is_collective(op.kind)) {  // the all-reduce after the combine never runs with a branch open
      for (int member : op.gpus) EXPECT_EQ(open[member], 0) << op.name;
    }
  }
  EXPECT_EQ(forks[0], forks[1]);
  EXPECT_GT(forks[0], 0);
}

TEST(SharedStream, TheSwitchIsUnsetZeroOrOne) {
  EXPECT_EQ(shared_stream_from_env(nullptr), -1);
  EXPECT_EQ(shared_stream_from_env(""), -1);
  EXPECT_EQ(shared_stream_from_env("0"), 0);
  EXPECT_EQ(shared_stream_from_env("1"), 1);
  try {
    shared_stream_from_env("yes");
    FAIL() << "accepted yes";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("PEERPLAN_SHARED_STREAM=yes"), std::string::npos) << e.what();
  }
}

TEST(SharedStream, TheActivationSwitchReadsAlike) {
  EXPECT_EQ(fused_act_from_env(nullptr), -1);
  EXPECT_EQ(fused_act_from_env(""), -1);
  EXPECT_EQ(fused_act_from_env("0"), 0);
  EXPECT_EQ(fused_act_from_env("1"), 1);
  EXPECT_EQ(fused_act_from_env("all"), kActEverywhere);
  try {
    fused_act_from_env("on");
    FAIL() << "accepted on";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("PEERPLAN_FUSED_ACT=on"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("epilogue"), std::string::npos) << e.what();
  }
}

TEST(SharedStream, TheSkipSwitchTakesPiecesOfOpNames) {
  EXPECT_TRUE(skip_ops_from_env(nullptr).empty());
  EXPECT_TRUE(skip_ops_from_env("").empty());
  const std::vector<std::string> p = skip_ops_from_env("shared.,shared_gate");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_TRUE(op_skipped("L3.shared.gate_up", p));
  EXPECT_TRUE(op_skipped("L3.shared_gate", p));
  EXPECT_FALSE(op_skipped("L3.expert.gate_up", p));
  EXPECT_FALSE(op_skipped("L3.router", p));
  EXPECT_FALSE(op_skipped("L3.shared.down", {}));
  for (const char* bad : {",", "shared.,", ",router", "a,,b"}) {
    try {
      skip_ops_from_env(bad);
      FAIL() << "accepted " << bad;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("PEERPLAN_SKIP_OPS=") + bad), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace peerplan::exec
