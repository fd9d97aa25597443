// PEERPLAN_PDL, the switch of programmatic dependent launch (profiler/common/pdl_switch.hpp): unset,
// empty or 1 is on, 0 is off, anything else an error that names the variable and what it accepts.
#include <gtest/gtest.h>

#include <string>

#include "planner/core/error.hpp"
#include "profiler/common/pdl_switch.hpp"

using namespace peerplan;
namespace pdl = peerplan::kernels::pdl;

TEST(PdlSwitch, OnUnlessZero) {
  EXPECT_TRUE(pdl::parse_env(nullptr));
  EXPECT_TRUE(pdl::parse_env(""));
  EXPECT_TRUE(pdl::parse_env("1"));
  EXPECT_FALSE(pdl::parse_env("0"));
}

TEST(PdlSwitch, LaunchModeNeedsHopperAndTheSwitch) {
  const bool was = pdl::enabled();
  pdl::set_enabled(true);
  EXPECT_STREQ(pdl::launch_mode(9), "pdl");
  EXPECT_STREQ(pdl::launch_mode(10), "pdl");
  EXPECT_STREQ(pdl::launch_mode(8), "serial") << "A100 and older launch without the attribute";
  pdl::set_enabled(false);
  EXPECT_STREQ(pdl::launch_mode(9), "serial");
  pdl::set_enabled(was);
}

TEST(PdlSwitch, RejectsOtherValuesNamingTheVariable) {
  for (const char* bad : {"yes", "on", "2", "true", " 1"}) {
    try {
      pdl::parse_env(bad);
      ADD_FAILURE() << "accepted PEERPLAN_PDL=" << bad;
    } catch (const RuntimeError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("PEERPLAN_PDL=" + std::string(bad)), std::string::npos) << m;
      EXPECT_NE(m.find("expected 0 or 1"), std::string::npos) << m;
    }
  }
}

TEST(PdlSwitch, SetEnabledOverridesTheEnvironment) {
  const bool was = pdl::enabled();
  pdl::set_enabled(!was);
  EXPECT_EQ(pdl::enabled(), !was);
  pdl::set_enabled(was);
  EXPECT_EQ(pdl::enabled(), was);
}
