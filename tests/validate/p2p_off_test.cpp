// p2p_off_variant (planner/plan/p2p_off.hpp): the one P2P-off conversion, used by the search
// (which simulates both variants) and by `validate --p2p off` (which executes it).
#include <gtest/gtest.h>

#include "planner/plan/p2p_off.hpp"
#include "planner/plan/plan.hpp"

using namespace peerplan;

TEST(P2pOff, EveryBoundaryIsHostStagedCollectivesLoseP2pAndTheNameSaysSo) {
  // pp2 over GPUs 0|1 with a peer boundary: off, the boundary goes through host memory and
  // NCCL runs as with NCCL_P2P_DISABLE=1; the rest of the plan is unchanged.
  Plan p;
  p.name = "pp2[0|1]";
  p.stages = {PlanStage{{0}, 0, 16, 1, true, false}, PlanStage{{1}, 16, 32, 1, false, true}};
  p.boundary_modes = {"peer"};
  p.micro_batches = 2;
  const Plan off = p2p_off_variant(p);
  EXPECT_FALSE(off.p2p);
  EXPECT_EQ(off.boundary_modes, std::vector<std::string>{"host_staged"});
  EXPECT_EQ(off.name, "pp2[0|1] p2p-off");
  EXPECT_EQ(off.micro_batches, 2);
  EXPECT_EQ(off.stages.size(), 2u);
  EXPECT_EQ(without_p2p_off_suffix(off.name), p.name);
  EXPECT_EQ(without_p2p_off_suffix(p.name), p.name) << "a name without the suffix is unchanged";
  EXPECT_EQ(without_p2p_off_suffix(" p2p-off"), " p2p-off") << "the suffix alone is a name, not a suffix";
}

TEST(P2pOff, ABoundaryListIsSizedToTheStagesEvenWhenTheInputHasNone) {
  // A hand-built plan may leave boundary_modes empty; the variant still has one per boundary, so
  // it passes validate_plan.
  Plan p;
  p.name = "pp3";
  p.stages = {PlanStage{{0}, 0, 8, 1, true, false}, PlanStage{{1}, 8, 16, 1, false, false},
              PlanStage{{2}, 16, 32, 1, false, true}};
  const Plan off = p2p_off_variant(p);
  EXPECT_EQ(off.boundary_modes, (std::vector<std::string>{"host_staged", "host_staged"}));
  EXPECT_NO_THROW(validate_plan(off, 32, 0, 4, "pp3"));
}
