// The all-reduce setting of a plan and each engine's rule (planner/plan/allreduce_rule.hpp):
// known answers taken from the engines' thresholds cited there.
#include "planner/plan/allreduce_rule.hpp"

#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/plan/p2p_off.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/topology.hpp"
#include "tests/cost/cost_test_util.hpp"
#include "tests/plan_fixtures.hpp"

using namespace peerplan;

namespace {
constexpr int64_t KiB = 1024, MiB = 1024 * 1024;
ArGroup nvlink(int n) { return {n, true, true}; }
ArGroup pcie(int n) { return {n, true, false}; }
ArImpl pick(ArSetting s, ArGroup g, int64_t b) { return choose_allreduce(s, g, b).impl; }
}  // namespace

TEST(AllReduceRule, NcclSettingAndOneGpuAlwaysNccl) {
  EXPECT_EQ(pick(ArSetting::Nccl, nvlink(2), 4 * KiB), ArImpl::Nccl);
  EXPECT_EQ(pick(ArSetting::Custom, nvlink(1), 4 * KiB), ArImpl::Nccl) << "one GPU reduces nothing";
}

TEST(AllReduceRule, WithoutP2pEveryRuleFallsBackToNccl) {
  for (ArSetting s : {ArSetting::Custom, ArSetting::AutoVllm, ArSetting::AutoSglang, ArSetting::AutoTrtllm})
    EXPECT_EQ(pick(s, {2, false, true}, 4 * KiB), ArImpl::Nccl) << to_string(s);
}

TEST(AllReduceRule, VllmTwoGpusOneShotStrictlyBelow8MiB) {
  // custom_all_reduce.py: world size 2 needs no NVLink; should_custom_ar: inp_size < max_size (8 MiB).
  EXPECT_EQ(pick(ArSetting::AutoVllm, pcie(2), 4 * KiB), ArImpl::OneShot);
  EXPECT_EQ(pick(ArSetting::AutoVllm, pcie(2), 8 * MiB - 16), ArImpl::OneShot);
  EXPECT_EQ(pick(ArSetting::AutoVllm, pcie(2), 8 * MiB), ArImpl::Nccl);
  EXPECT_EQ(pick(ArSetting::AutoVllm, pcie(2), 4 * KiB + 8), ArImpl::Nccl) << "not a multiple of 16 bytes";
}

TEST(AllReduceRule, VllmNeedsNvlinkBeyondTwoAndASupportedWorldSize) {
  EXPECT_EQ(pick(ArSetting::AutoVllm, pcie(4), 4 * KiB), ArImpl::Nccl) << "more than two PCIe-only GPUs";
  EXPECT_EQ(pick(ArSetting::AutoVllm, nvlink(3), 4 * KiB), ArImpl::Nccl) << "3 not in {2,4,6,8}";
  EXPECT_EQ(pick(ArSetting::AutoVllm, nvlink(16), 4 * KiB), ArImpl::Nccl);
}

TEST(AllReduceRule, VllmSwitchesToTwoShotAt512KiBUpTo4GpusAnd256KiBUpTo8) {
  EXPECT_EQ(pick(ArSetting::AutoVllm, nvlink(4), 512 * KiB - 16), ArImpl::OneShot);
  EXPECT_EQ(pick(ArSetting::AutoVllm, nvlink(4), 512 * KiB), ArImpl::TwoShot);
  EXPECT_EQ(pick(ArSetting::AutoVllm, nvlink(8), 256 * KiB - 16), ArImpl::OneShot);
  EXPECT_EQ(pick(ArSetting::AutoVllm, nvlink(8), 256 * KiB), ArImpl::TwoShot);
  EXPECT_EQ(pick(ArSetting::AutoVllm, nvlink(6), 300 * KiB), ArImpl::TwoShot);
  EXPECT_EQ(pick(ArSetting::AutoSglang, nvlink(8), 256 * KiB), ArImpl::TwoShot) << "SGLang keeps vLLM's kernel";
}

TEST(AllReduceRule, TrtllmAutoNeedsNvlinkAndItsWorkspace) {
  EXPECT_EQ(pick(ArSetting::AutoTrtllm, pcie(2), 4 * KiB), ArImpl::Nccl) << "AUTO: NCCL without NVLink";
  EXPECT_EQ(pick(ArSetting::AutoTrtllm, nvlink(2), 16 * MiB), ArImpl::OneShot) << "two ranks: 16 MiB workspace";
  EXPECT_EQ(pick(ArSetting::AutoTrtllm, nvlink(2), 16 * MiB + 16), ArImpl::Nccl);
  EXPECT_EQ(pick(ArSetting::AutoTrtllm, nvlink(4), 1 * MiB - 16), ArImpl::OneShot);
  EXPECT_EQ(pick(ArSetting::AutoTrtllm, nvlink(4), 1 * MiB), ArImpl::TwoShot);
  EXPECT_EQ(pick(ArSetting::AutoTrtllm, nvlink(8), 512 * KiB), ArImpl::TwoShot);
  EXPECT_EQ(pick(ArSetting::AutoTrtllm, nvlink(8), 8 * MiB + 16), ArImpl::Nccl);
}

TEST(AllReduceRule, CustomRunsPeerKernelsWhereverP2pWorks) {
  EXPECT_EQ(pick(ArSetting::Custom, pcie(4), 4 * KiB), ArImpl::OneShot) << "no NVLink or world-size condition";
  EXPECT_EQ(pick(ArSetting::Custom, pcie(2), 64 * MiB), ArImpl::OneShot) << "no size cap";
  EXPECT_EQ(pick(ArSetting::Custom, pcie(4), 1 * MiB), ArImpl::TwoShot);
  EXPECT_EQ(pick(ArSetting::Custom, pcie(3), 4 * KiB), ArImpl::OneShot);
}

TEST(AllReduceRule, GroupReadsP2pAndNvlinkFromTheTopology) {
  Topology sw(simtest::pcie_switch_machine(4));
  ArGroup g = allreduce_group(sw, {0, 1, 2, 3}, true);
  EXPECT_EQ(g.n, 4);
  EXPECT_TRUE(g.p2p_all);
  EXPECT_FALSE(g.nvlink_all);
  EXPECT_FALSE(allreduce_group(sw, {0, 1}, false).p2p_all) << "the plan's P2P off wins";
  Topology nop2p(simtest::pcie_switch_machine(2, "none"));
  EXPECT_FALSE(allreduce_group(nop2p, {0, 1}, true).p2p_all);
  Topology nv(load_machine("models/hardware/h200x2-nvlink.json"));
  ArGroup h = allreduce_group(nv, {0, 1}, true);
  EXPECT_TRUE(h.p2p_all);
  EXPECT_TRUE(h.nvlink_all);
}

TEST(AllReduceSetting, NamesRoundTripAndUnknownNamesThrow) {
  for (const std::string& n : allreduce_setting_names()) EXPECT_EQ(to_string(allreduce_setting_from_string(n)), n);
  EXPECT_THROW(allreduce_setting_from_string("auto"), std::invalid_argument) << "auto must name its engine";
}

TEST(AllReduceSetting, PlanJsonReadsWritesAndChecksIt) {
  Plan p = test_plans::tp({0, 1}, 4);
  EXPECT_FALSE(plan_to_json(p).contains("allreduce")) << "nccl is the default and is not written";
  p.allreduce = ArSetting::AutoVllm;
  nlohmann::json j = plan_to_json(p);
  EXPECT_EQ(j["allreduce"], "auto:vllm");
  EXPECT_EQ(parse_plan_json(j, "t").allreduce, ArSetting::AutoVllm);
  j["allreduce"] = "auto:vlm";
  try {
    parse_plan_json(j, "t");
    FAIL() << "an unknown setting must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("auto:vllm"), std::string::npos) << e.what();
  }
  Plan c = test_plans::tp({0, 1}, 4);
  c.allreduce = ArSetting::Custom;
  c.p2p = false;
  EXPECT_THROW(validate_plan(c, 4, 0, 2, "t"), InputError) << "custom kernels need P2P";
}

TEST(AllReduceSetting, P2pOffVariantRunsNccl) {
  Plan p = test_plans::tp({0, 1}, 4);
  p.allreduce = ArSetting::Custom;
  EXPECT_EQ(p2p_off_variant(p).allreduce, ArSetting::Nccl);
}

TEST(AllReduceSetting, VariantsOnlyForTpGroupsWithP2p) {
  Plan p = test_plans::tp({0, 1}, 4, "tp2");
  auto v = allreduce_variants(p, {ArSetting::Nccl, ArSetting::Custom, ArSetting::AutoVllm, ArSetting::Custom});
  ASSERT_EQ(v.size(), 3u) << "the plan itself, then each other setting once";
  EXPECT_EQ(v[0].name, "tp2");
  EXPECT_EQ(v[1].name, "tp2 ar:custom");
  EXPECT_EQ(v[2].allreduce, ArSetting::AutoVllm);
  EXPECT_EQ(allreduce_variants(test_plans::tp({0}, 4), {ArSetting::Custom}).size(), 1u) << "one GPU";
  EXPECT_EQ(allreduce_variants(p2p_off_variant(p), {ArSetting::Custom}).size(), 1u) << "P2P off";
}
