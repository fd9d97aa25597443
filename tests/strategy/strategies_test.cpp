// The built-in strategies on the shipped models and the test machines: what they propose, where
// they place it, and that every plan is valid and compiles.
#include <algorithm>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/core/error.hpp"
#include "planner/strategy/strategy_runner.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan {
namespace {

std::vector<CandidatePlan> run(const std::string& strategy, const std::string& model, const Topology& topo,
                               std::map<std::string, std::string> sets = {}) {
  auto m = testing::model(model);
  return run_strategies({resolve_strategy(strategy)}, m.cfg, m.fig, CostModel(topo), sets, MemoryOptions{});
}

const CandidatePlan* find(const std::vector<CandidatePlan>& v, const std::string& name) {
  for (const auto& c : v)
    if (c.plan.name == name) return &c;
  return nullptr;
}

std::vector<std::string> names(const std::vector<CandidatePlan>& v) {
  std::vector<std::string> n;
  for (const auto& c : v) n.push_back(c.plan.name);
  return n;
}

TEST(Strategies, BuiltinsAreListedWithParameters) {
  std::set<std::string> stems;
  for (const auto& f : builtin_strategy_files()) stems.insert(std::filesystem::path(f).stem().string());
  EXPECT_EQ(stems, (std::set<std::string>{"data_parallel", "expert_parallel", "hybrid", "pipeline_parallel", "single_gpu",
                                          "tensor_parallel"}));
  StrategyInfo tp = describe_strategy(resolve_strategy("tensor_parallel"));
  EXPECT_EQ(tp.name, "tensor_parallel");
  ASSERT_EQ(tp.params.size(), 2u);
  EXPECT_EQ(tp.params[1].name, "tp");
  EXPECT_EQ(tp.params[1].type, "int");
  EXPECT_EQ(tp.params[1].default_value, 0);
}

TEST(Strategies, UnknownStrategyNameListsTheBuiltins) {
  try {
    resolve_strategy("tensor_paralel");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor_parallel"), std::string::npos) << e.what();
  }
}

TEST(Strategies, SingleGpuIsTheBaselineOnGpu0) {
  auto topo = testing::machine("nvswitch-8");
  auto plans = run("single_gpu", "llama-3.1-8b", *topo);
  ASSERT_EQ(names(plans), std::vector<std::string>{"single[0]"});  // all 8 GPUs are one symmetry class
  // 256 sequences x 4096 tokens need 128 GiB of KV: the memory check says no, and how many fit
  // (80 GiB - 15 weights - 10 reserve - 0.6 act) / 0.5 GiB per sequence = 108.
  EXPECT_FALSE(plans[0].memory.fits);
  EXPECT_EQ(plans[0].memory.max_seqs_that_fit, 108);
  EXPECT_EQ(plans[0].plan.stages[0].layer_end, 32);
}

TEST(Strategies, TensorParallelOnA2SocketPcieBoxPutsTp2UnderOneSwitch) {
  // P2P works only under a switch here: TP2 must be a same-switch pair, not GPUs on two sockets.
  auto topo = testing::machine("pcie-2socket-8");
  auto plans = run("tensor_parallel", "llama-3.1-8b", *topo);
  EXPECT_EQ(names(plans), (std::vector<std::string>{"tp2[0,1]", "tp4[0,1,2,3]", "tp8[0,1,2,3,4,5,6,7]"}));
  const CandidatePlan* tp2 = find(plans, "tp2[0,1]");
  ASSERT_TRUE(tp2);
  EXPECT_EQ(topo->path_type(0, 1), PathType::PIX);
  EXPECT_TRUE(tp2->plan.p2p);
  EXPECT_FALSE(find(plans, "tp4[0,1,2,3]")->plan.p2p);  // crosses switches: no P2P on this box
}

TEST(Strategies, TensorParallelFollowsNvlinkIslandsNotIdentityOrder) {
  // Islands are {0,2,4,6} and {1,3,5,7}: identity order {0,1,2,3} would cross the slow link.
  auto topo = testing::machine("nvl-2x4");
  auto plans = run("tensor_parallel", "llama-3.1-8b", *topo, {{"tp", "4"}});
  EXPECT_EQ(names(plans), std::vector<std::string>{"tp4[0,2,4,6]"});
  auto tp2 = run("tensor_parallel", "llama-3.1-8b", *topo, {{"tp", "2"}});
  EXPECT_EQ(names(tp2), std::vector<std::string>{"tp2[0,2]"});
}

TEST(Strategies, AllPlacementsEnumeratesGroupsModuloSymmetry) {
  // 8 GPUs, 4 switches, 2 sockets: a pair is same-switch, same-socket or cross-socket: 3 classes.
  auto topo = testing::machine("pcie-2socket-8");
  auto plans = run("tensor_parallel", "llama-3.1-8b", *topo, {{"tp", "2"}, {"all_placements", "true"}});
  EXPECT_EQ(names(plans), (std::vector<std::string>{"tp2[0,1]", "tp2[0,2]", "tp2[0,4]"}));
}

TEST(Strategies, SetOptionsAreTypedAgainstTheDeclaration) {
  auto topo = testing::machine("pcie-2socket-8");
  try {
    run("tensor_parallel", "llama-3.1-8b", *topo, {{"tp", "two"}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("an integer for parameter 'tp' of tensor_parallel"), std::string::npos) << e.what();
  }
  try {
    run("tensor_parallel", "llama-3.1-8b", *topo, {{"pp", "2"}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("all_placements (tensor_parallel), tp (tensor_parallel)"), std::string::npos)
        << e.what();
  }
}

TEST(Strategies, PipelineIsContiguousMemoryBalancedAndUsesPeerOnlyWhereP2pWorks) {
  auto topo = testing::machine("pcie-2socket-8");
  auto plans = run("pipeline_parallel", "llama-3.1-70b", *topo, {{"pp", "4"}});
  ASSERT_EQ(plans.size(), 1u);
  const Plan& p = plans[0].plan;
  ASSERT_EQ(p.stages.size(), 4u);
  // 80 layers of 1.71 GB; the embedding and LM head (2.1 GB each) weigh about a layer and a bit:
  // the DP gives the first and last stage one layer fewer than the middle ones.
  std::vector<int64_t> counts;
  for (const auto& s : p.stages) counts.push_back(s.layer_end - s.layer_begin);
  EXPECT_EQ(counts, (std::vector<int64_t>{19, 21, 21, 19}));
  for (size_t i = 0; i + 1 < p.stages.size(); ++i) {
    int a = p.stages[i].gpus[0], b = p.stages[i + 1].gpus[0];
    EXPECT_EQ(p.boundary_modes[i], topo->p2p_usable(a, b) ? "peer" : "host_staged") << p.name;
  }
  // The chain keeps consecutive stages as close as possible: two same-switch boundaries.
  int peer = int(std::count(p.boundary_modes.begin(), p.boundary_modes.end(), "peer"));
  EXPECT_EQ(peer, 2) << p.name;
  EXPECT_EQ(p.micro_batches, 4);
}

TEST(Strategies, ExpertParallelProposesEveryDegreeDividingTheExperts) {
  auto topo = testing::machine("nvswitch-8");
  auto plans = run("expert_parallel", "mixtral-8x7b", *topo);
  EXPECT_EQ(names(plans), (std::vector<std::string>{"ep2-tp[0,1]", "ep2-dp[0,1]", "ep4-tp[0,1,2,3]", "ep4-dp[0,1,2,3]",
                                                   "ep8-tp[0,1,2,3,4,5,6,7]", "ep8-dp[0,1,2,3,4,5,6,7]"}));
  const Plan& p = find(plans, "ep4-dp[0,1,2,3]")->plan;
  EXPECT_EQ(p.expert_gpu, (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(p.ep_attention, "replicated");
  EXPECT_TRUE(run("expert_parallel", "llama-3.1-8b", *topo).empty());  // dense model: nothing to spread
  // Qwen1.5-MoE: 60 experts, 16 heads: EP 2..6 all divide 60.
  auto qwen = run("expert_parallel", "qwen1.5-moe-a2.7b", *topo, {{"attention", "replicated"}});
  EXPECT_EQ(qwen.size(), 5u);
}

TEST(Strategies, HybridKeepsTpInsideIslandsAndPpAcrossThem) {
  auto topo = testing::machine("nvl-2x4");
  auto plans = run("hybrid", "llama-3.1-70b", *topo, {{"tp", "4"}});
  ASSERT_EQ(names(plans), std::vector<std::string>{"tp4pp2[0,2,4,6|1,3,5,7]"});
  EXPECT_EQ(plans[0].plan.boundary_modes, std::vector<std::string>{"peer"});
  // TP2: four groups, all inside islands.
  for (const auto& c : run("hybrid", "llama-3.1-70b", *topo, {{"tp", "2"}}))
    for (const auto& s : c.plan.stages) EXPECT_EQ(topo->path_type(s.gpus[0], s.gpus[1]), PathType::NV) << c.plan.name;
}

TEST(Strategies, AUserStrategyInANewFileRunsWithoutRebuilding) {
  // tests/data/strategy/fast_chain_pipeline.lua: consecutive stages on the fastest links.
  auto topo = testing::machine("nvl-2x4");
  auto m = testing::model("llama-3.1-8b");
  std::string file = testing::strategy_data("fast_chain_pipeline.lua");
  auto plans = run_strategies({file}, m.cfg, m.fig, CostModel(*topo), {}, MemoryOptions{});
  ASSERT_EQ(plans.size(), 1u);
  const Plan& p = plans[0].plan;
  EXPECT_EQ(p.name, "chainpp4[0|2|4|6]");
  for (size_t i = 0; i + 1 < p.stages.size(); ++i)
    EXPECT_EQ(topo->path_type(p.stages[i].gpus[0], p.stages[i + 1].gpus[0]), PathType::NV);
  EXPECT_EQ(p.strategy, "fast_chain_pipeline");
  EXPECT_EQ(describe_strategy(file).params[0].name, "stages");
}

TEST(Strategies, ScriptPlansAreValidatedNamingScriptAndIndex) {
  auto topo = testing::machine("nvswitch-8");
  auto m = testing::model("llama-3.1-8b");
  auto bad = testing::write_script("gap.lua",
      "return {name = 'gap', candidates = function(model)\n"
      "  return {{name = 'ok', stages = {{gpus = {0}, layer_begin = 0, layer_end = model.layers}}},\n"
      "          {name = 'gap', stages = {{gpus = {0}, layer_begin = 0, layer_end = 10},\n"
      "                                    {gpus = {1}, layer_begin = 12, layer_end = model.layers}}, boundary_modes = {'peer'}}}\n"
      "end}\n");
  try {
    run_strategies({bad}, m.cfg, m.fig, CostModel(*topo), {}, MemoryOptions{});
    FAIL();
  } catch (const InputError& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("gap.lua: plan #2 (gap): field 'stages[2].layer_begin': 10 (stages must cover"), std::string::npos) << w;
  }
  auto tp3 = testing::write_script("tp3.lua",
      "return {name = 'tp3', candidates = function(model)\n"
      "  return {{name = 'tp3', stages = {{gpus = {0, 1, 2}, layer_begin = 0, layer_end = model.layers}}}}\n"
      "end}\n");
  try {
    run_strategies({tp3}, m.cfg, m.fig, CostModel(*topo), {}, MemoryOptions{});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a TP degree dividing the 32 attention heads"), std::string::npos) << e.what();
  }
}

// Every built-in on every shipped model and every machine (test machines + models/hardware):
// plans are valid (the runner validates), fit checks run, and each compiles into a sound op graph.
TEST(Strategies, EveryBuiltinOnEveryModelAndMachineCompiles) {
  std::vector<std::string> machines = {testing::strategy_data("pcie-2socket-8.json"), testing::strategy_data("nvswitch-8.json"),
                                       testing::strategy_data("nvl-2x4.json")};
  std::string hw = find_data_file("models/hardware");
  if (std::filesystem::is_directory(hw))
    for (const auto& e : std::filesystem::directory_iterator(hw))
      if (e.path().extension() == ".json") machines.push_back(e.path().string());
  int total = 0;
  for (const std::string model : {"llama-3.1-8b", "llama-3.1-70b", "mistral-7b", "mixtral-8x7b", "qwen1.5-moe-a2.7b",
                                  "deepseek-v2-lite"}) {
    auto m = testing::model(model);
    for (const auto& mf : machines) {
      Topology topo(load_machine(mf));
      auto plans = run_strategies({}, m.cfg, m.fig, CostModel(topo), {}, MemoryOptions{});
      EXPECT_FALSE(plans.empty()) << model << " on " << mf;
      BatchShape b;
      b.prefill_seqs = 2, b.prefill_tokens = 300, b.prefill_context = 150, b.decode_seqs = 24, b.decode_context = 900;
      for (const auto& c : plans) {
        ++total;
        OpGraph g = compile_iteration(c.plan, m.cfg, m.fig, topo.machine(), b);
        std::set<int> layers;
        size_t in_stages = 0;
        for (const auto& ops : g.stage_ops) in_stages += ops.size();
        EXPECT_EQ(in_stages, g.ops.size()) << c.plan.name;
        for (const auto& op : g.ops) {
          for (int d : op.deps) ASSERT_LT(d, op.id) << c.plan.name << " " << op.name;
          if (op.kind == OpKind::Attention) layers.insert(op.layer);
        }
        EXPECT_EQ(int64_t(layers.size()), m.cfg.layers) << c.plan.name << ": every layer has attention";
      }
    }
  }
  EXPECT_GT(total, 100);
}

}  // namespace
}  // namespace peerplan

namespace peerplan {
namespace {

TEST(DataParallel, ReplicasOfTp4OnTheTwoHalvesOfAnNvswitchBox) {
  auto topo = testing::machine("nvswitch-8");
  auto plans = run("data_parallel", "llama-3.1-70b", *topo);
  const CandidatePlan* dp = nullptr;
  for (const auto& c : plans)
    if (c.plan.replica_count() == 2 && c.plan.stages[0].tp == 4) dp = &c;
  ASSERT_NE(dp, nullptr) << "dp2 x tp4 among: " << ::testing::PrintToString(names(plans));
  EXPECT_EQ(dp->plan.num_gpus(), 8);
  EXPECT_EQ(dp->plan.router, "least_outstanding");
  std::set<int> all;
  for (const auto& r : dp->plan.replicas) all.insert(r.begin(), r.end());
  EXPECT_EQ(all.size(), 8u) << "two disjoint groups of four";
  EXPECT_GE(dp->memory.max_seqs_that_fit, 64) << "each copy holds its weights and a KV cache: " << dp->memory.why;
  // Every proposal is a valid plan whose replicas cover disjoint GPUs and whose copies fit.
  for (const auto& c : plans) {
    EXPECT_GE(c.plan.replica_count(), 2) << c.plan.name;
    EXPECT_LE(c.plan.num_gpus(), 8) << c.plan.name;
    EXPECT_EQ(c.plan.name.rfind("dp", 0), 0u) << c.plan.name;
  }
  // 70B in bf16 does not fit one 80 GB GPU: no replicated single-GPU plan is proposed.
  for (const auto& c : plans) EXPECT_GT(c.plan.gpu_order().size(), 1u) << c.plan.name;
}

TEST(DataParallel, EightSingleGpuCopiesOfAnEightBModel) {
  auto topo = testing::machine("nvswitch-8");
  auto plans = run("data_parallel", "llama-3.1-8b", *topo, {{"replicas", "8"}});
  const CandidatePlan* dp8 = find(plans, "dp8xsingle[0]");
  ASSERT_NE(dp8, nullptr) << ::testing::PrintToString(names(plans));
  EXPECT_EQ(dp8->plan.all_gpus(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  for (const auto& c : plans) EXPECT_EQ(c.plan.replica_count(), 8) << c.plan.name;
}

TEST(DataParallel, MoeCopiesMapTheirExpertsOntoTheirOwnGpus) {
  auto topo = testing::machine("nvswitch-8");
  auto plans = run("data_parallel", "mixtral-8x7b", *topo);
  const CandidatePlan* ep = nullptr;
  for (const auto& c : plans)
    if (c.plan.ep == 2 && c.plan.replica_count() == 4) ep = &c;
  ASSERT_NE(ep, nullptr) << ::testing::PrintToString(names(plans));
  for (int r = 0; r < 4; ++r) {
    Plan rp = replica_plan(ep->plan, r);
    const auto& mine = ep->plan.replicas[size_t(r)];
    for (int g : rp.expert_gpu) EXPECT_NE(std::find(mine.begin(), mine.end(), g), mine.end()) << "replica " << r;
  }
}

}  // namespace
}  // namespace peerplan
