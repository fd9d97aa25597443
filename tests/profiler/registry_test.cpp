#include <gtest/gtest.h>

#include <set>

#include "planner/core/error.hpp"
#include "profiler/common/registry.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

static std::vector<std::string> names(const std::vector<const MeasurementInfo*>& v) {
  std::vector<std::string> out;
  for (auto* m : v) out.push_back(m->name);
  return out;
}

TEST(Registry, NamesAreUniqueAndDescribed) {
  std::set<std::string> seen;
  for (const auto& m : measurement_table()) {
    EXPECT_TRUE(seen.insert(m.name).second) << "duplicate name " << m.name << ": --only would be ambiguous";
    EXPECT_GT(std::string(m.description).size(), 10u) << m.name << " needs a description for --list";
    EXPECT_GT(m.est_seconds, 0) << m.name << " needs a time estimate for the ETA";
  }
  // The measurements are all present.
  for (const char* n : {"p2p_ce", "p2p_ce_bidir", "p2p_sm", "nop2p_runtime", "host_staged", "latency_ce", "latency_sm",
                        "h2d_d2h", "hbm", "nccl", "nccl_nop2p", "gemm", "attention", "launch_overhead"})
    EXPECT_NE(find_measurement(n), nullptr) << n;
}

TEST(Registry, NoOptionsSelectsEverythingInTableOrder) {
  auto all = select_measurements({}, {});
  ASSERT_EQ(all.size(), measurement_table().size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_STREQ(all[i]->name, measurement_table()[i].name);
}

TEST(Registry, OnlyAcceptsNamesGroupsAndCommaLists) {
  EXPECT_EQ(names(select_measurements({"hbm"}, {})), std::vector<std::string>{"hbm"});
  // "latency" is a group: both latency measurements, in table order.
  EXPECT_EQ(names(select_measurements({"latency"}, {})), (std::vector<std::string>{"latency_ce", "latency_sm"}));
  // Comma list with spaces, order follows the table not the argument.
  EXPECT_EQ(names(select_measurements({"p2p_ce_bidir, p2p_ce"}, {})), (std::vector<std::string>{"p2p_ce", "p2p_ce_bidir"}));
}

TEST(Registry, SkipRemovesAfterOnly) {
  auto v = names(select_measurements({"collective"}, {"nccl_nop2p"}));
  EXPECT_EQ(v, std::vector<std::string>{"nccl"});
  auto all_but_compute = names(select_measurements({}, {"compute"}));
  for (const auto& n : all_but_compute) EXPECT_NE(find_measurement(n)->group, std::string("compute")) << n;
}

TEST(Registry, UnknownNameIsAnInputErrorListingValidNames) {
  try {
    select_measurements({"p2p_cee"}, {});
    FAIL() << "an unknown name must be rejected, not ignored";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--only");
    std::string msg = e.what();
    EXPECT_NE(msg.find("p2p_cee"), std::string::npos) << msg;
    EXPECT_NE(msg.find("p2p_ce_bidir"), std::string::npos) << "the valid names should be listed: " << msg;
  }
  EXPECT_THROW(select_measurements({}, {"nope"}), InputError);
}

TEST(Registry, SelectingNothingIsAnError) {
  // --only hbm --skip hbm leaves nothing: say so instead of writing an empty profile.
  EXPECT_THROW(select_measurements({"hbm"}, {"hbm"}), InputError);
}

TEST(Registry, ListShowsEveryMeasurement) {
  std::string s = format_measurement_list();
  for (const auto& m : measurement_table()) EXPECT_NE(s.find(m.name), std::string::npos) << m.name;
}
