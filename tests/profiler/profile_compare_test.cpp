#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "profiler/common/profile_compare.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

namespace {
Machine shipped() { return load_machine(find_data_file("models/hardware/h200x2-nvlink.json")); }
}  // namespace

TEST(CompareProfiles, AProfileAgreesWithItself) {
  Machine a = shipped();
  auto c = compare_profiles(a, a);
  EXPECT_GT(c.rows.size(), 20u) << "transfers, collectives, HBM, launch and GEMMs are all matched";
  EXPECT_EQ(c.max_abs_diff, 0.0);
  EXPECT_TRUE(c.notes.empty());
}

TEST(CompareProfiles, ASlowerPathShowsFirstWithItsDifference) {
  Machine a = shipped(), b = shipped();
  // B's peer copy gpu0->gpu1 takes 25 % longer at every size: its bandwidth is 20 % lower.
  bool found = false;
  for (auto& t : b.measurements->transfers)
    if (t.mode == "p2p_ce" && t.src == 0 && t.dst == 1) {
      for (auto& p : t.points) p.time.median *= 1.25;
      found = true;
    }
  ASSERT_TRUE(found) << "the shipped profile has p2p_ce gpu0->gpu1";
  auto c = compare_profiles(a, b);
  ASSERT_FALSE(c.rows.empty());
  EXPECT_EQ(c.rows[0].kind, "transfer");
  EXPECT_NE(c.rows[0].what.find("p2p_ce gpu0->gpu1"), std::string::npos) << c.rows[0].what;
  EXPECT_NEAR(std::abs(c.rows[0].diff()), 0.25, 1e-9) << "either the bandwidth (-20 %) or the small-size time (+25 %) leads";
  EXPECT_NEAR(c.max_abs_diff, 0.25, 1e-9);
  std::string text = format_comparison(c, "a.json", "b.json");
  EXPECT_NE(text.find("p2p_ce gpu0->gpu1"), std::string::npos);
  EXPECT_NE(text.find("largest 25.0 %"), std::string::npos) << text;
}

TEST(CompareProfiles, NotesDifferentHostsAndRefusesUnmeasuredMachines) {
  Machine a = shipped(), b = shipped();
  b.gpus[0].uuid = "GPU-other";
  EXPECT_FALSE(compare_profiles(a, b).notes.empty());
  Machine nominal = load_machine(find_data_file("models/hardware/hgx-h100x8.json"));
  EXPECT_THROW(compare_profiles(a, nominal), InputError);
}
