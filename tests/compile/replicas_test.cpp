// Replicated plans in the plan contract (Plan::replicas, router) and the memory model: R copies
// of one shape on disjoint GPUs, read and written as JSON, checked like any plan.
#include <functional>

#include <gtest/gtest.h>

#include "planner/compile/compiler.hpp"
#include "planner/core/error.hpp"
#include "planner/plan/plan.hpp"
#include "tests/plan_fixtures.hpp"
#include "tests/strategy/test_fixtures.hpp"

namespace peerplan {
namespace {

Plan dp2_tp2(int layers) {
  Plan base = test_plans::tp({0, 1}, layers, "tp2[0,1]");
  return with_replicas(base, {{0, 1}, {2, 3}}, "least_outstanding");
}

std::string refusal(const Plan& p, int gpus = 8) {
  try {
    validate_plan(p, 32, 0, gpus, "plan.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Replicas, JsonRoundTripKeepsReplicasAndRouter) {
  Plan p = dp2_tp2(32);
  nlohmann::json j = plan_to_json(p);
  EXPECT_EQ(j["replicas"], nlohmann::json::parse("[[0,1],[2,3]]"));
  EXPECT_EQ(j["router"], "least_outstanding");
  Plan back = parse_plan_json(j, "plan.json");
  EXPECT_EQ(back.replicas, p.replicas);
  EXPECT_EQ(back.router, "least_outstanding");
  EXPECT_EQ(back.num_gpus(), 4);
  EXPECT_EQ(back.replica_count(), 2);
  // A one-replica plan writes neither key: files written before replicas read and write the same.
  nlohmann::json one = plan_to_json(test_plans::tp({0, 1}, 32));
  EXPECT_FALSE(one.contains("replicas"));
  EXPECT_FALSE(one.contains("router"));
}

TEST(Replicas, ReplicaPlanMapsStagesAndExpertsPositionForPosition) {
  Plan base = test_plans::tp_pp({{0, 1}, {2, 3}}, 32);
  base.ep = 2;
  base.expert_gpu = {0, 1, 0, 1};
  Plan p = with_replicas(base, {{0, 1, 2, 3}, {7, 6, 5, 4}}, "round_robin");
  Plan r1 = replica_plan(p, 1);
  EXPECT_EQ(r1.stages[0].gpus, (std::vector<int>{7, 6}));
  EXPECT_EQ(r1.stages[1].gpus, (std::vector<int>{5, 4}));
  EXPECT_EQ(r1.expert_gpu, (std::vector<int>{7, 6, 7, 6}));
  EXPECT_TRUE(r1.replicas.empty());
  EXPECT_EQ(r1.name, "pipeline@r1");
  EXPECT_EQ(replica_plan(p, 0).stages[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(p.all_gpus(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(Replicas, BadReplicasAreRefusedNamingTheField) {
  struct Case {
    const char* what;
    std::function<void(Plan&)> spoil;
    std::vector<std::string> said;
  };
  const std::vector<Case> cases = {
      {"a GPU in two replicas", [](Plan& p) { p.replicas[1] = {1, 2}; }, {"replicas/1/0", "GPU 1 in one replica only"}},
      {"a replica of another size", [](Plan& p) { p.replicas[1] = {2, 3, 4}; }, {"replicas/1", "2 GPUs"}},
      {"replica 0 not the plan's own", [](Plan& p) { p.replicas[0] = {1, 0}; }, {"replicas/0", "[0,1]"}},
      {"a GPU the machine lacks", [](Plan& p) { p.replicas[1] = {2, 9}; }, {"replicas/1/1", "0..7"}},
      {"one replica listed", [](Plan& p) { p.replicas.resize(1); }, {"replicas", "at least 2"}},
      {"a misspelt router", [](Plan& p) { p.router = "round-robin"; }, {"router", "round_robin"}},
  };
  for (const Case& c : cases) {
    Plan p = dp2_tp2(32);
    c.spoil(p);
    const std::string why = refusal(p);
    ASSERT_FALSE(why.empty()) << c.what << ": accepted";
    for (const std::string& s : c.said) EXPECT_NE(why.find(s), std::string::npos) << c.what << ": " << why;
    EXPECT_NE(why.find("plan.json"), std::string::npos) << why;
  }
  EXPECT_EQ(refusal(dp2_tp2(32)), "");
}

TEST(Replicas, MemoryIsCheckedOnEveryReplicasGpus) {
  auto m = testing::model("llama-3.1-8b");
  auto topo = testing::machine("nvswitch-8");
  MemoryOptions mo;
  mo.max_seqs = 16;
  mo.context = 4096;
  Plan base = test_plans::tp({0, 1}, int(m.cfg.layers), "tp2[0,1]");
  MemoryReport one = check_memory(base, m.cfg, m.fig, topo->machine(), mo);
  MemoryReport two = check_memory(with_replicas(base, {{0, 1}, {6, 7}}, "round_robin"), m.cfg, m.fig, topo->machine(), mo);
  ASSERT_EQ(two.gpus.size(), 4u);
  EXPECT_EQ(two.gpus[2].gpu, 6);
  EXPECT_EQ(two.gpus[3].gpu, 7);
  EXPECT_EQ(two.gpus[2].weights, one.gpus[0].weights) << "each copy holds its own weights";
  EXPECT_EQ(two.max_seqs_that_fit, one.max_seqs_that_fit) << "per replica, on identical GPUs";
}

}  // namespace
}  // namespace peerplan
