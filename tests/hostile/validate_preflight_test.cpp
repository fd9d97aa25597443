// Hostile inputs to `validate`'s preflight (planner/validate/preflight): a profile measured on
// another host, a hand-written machine passed off as a profile, a plan naming GPUs the host lacks.
// Each must be refused with an InputError (exit 2) naming the file to fix and how.
#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/validate/preflight.hpp"

namespace peerplan {
namespace {

Machine measured_profile(const std::string& host, const std::vector<std::string>& uuids) {
  Machine m;
  m.name = "h200x2";
  m.host = host;
  m.origin = "measured";
  m.measurements = Measurements{};
  for (size_t i = 0; i < uuids.size(); ++i) {
    GpuSpec g;
    g.id = int(i);
    g.name = "NVIDIA H200";
    g.uuid = uuids[i];
    g.memory_bytes = 150'000'000'000;
    m.gpus.push_back(g);
  }
  return m;
}

HostInfo this_host(const std::string& hostname, const std::vector<std::string>& uuids) {
  HostInfo h;
  h.hostname = hostname;
  for (const auto& u : uuids) h.gpus.push_back({"NVIDIA H200", u, 150'000'000'000});
  return h;
}

Plan plan_on(std::vector<int> gpus) {
  Plan p;
  p.name = "tp";
  PlanStage s;
  s.gpus = std::move(gpus);
  s.tp = int(s.gpus.size());
  s.layer_end = 32;
  p.stages.push_back(s);
  return p;
}

InputError refusal(const Plan& plan, const Machine& profile, const HostInfo& host) {
  try {
    (void)preflight(plan, "best.plan.json", profile, "profile.json", host, true, "");
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "preflight accepted a run it must refuse";
  return InputError("", "", "<accepted>");
}

TEST(ValidateHostile, ProfileFromAnotherHostByGpuUuid) {
  auto e = refusal(plan_on({0, 1}), measured_profile("node-a", {"GPU-aaaa", "GPU-bbbb"}),
                   this_host("node-b", {"GPU-cccc", "GPU-dddd"}));
  EXPECT_EQ(e.file(), "profile.json");
  EXPECT_NE(std::string(e.what()).find("GPU-aaaa"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("peerplan profile"), std::string::npos) << "must say how to fix it: " << e.what();
}

TEST(ValidateHostile, ProfileFromAnotherHostByHostname) {
  auto e = refusal(plan_on({0}), measured_profile("node-a", {"", ""}), this_host("node-b", {"", ""}));
  EXPECT_EQ(e.file(), "profile.json");
  EXPECT_NE(std::string(e.what()).find("node-a"), std::string::npos) << e.what();
}

TEST(ValidateHostile, HandWrittenMachineIsNotAProfile) {
  Machine nominal = measured_profile("", {"", ""});
  nominal.origin = "nominal";
  nominal.measurements.reset();
  auto e = refusal(plan_on({0}), nominal, this_host("node-b", {"GPU-1", "GPU-2"}));
  EXPECT_EQ(e.file(), "profile.json");
}

TEST(ValidateHostile, PlanNamingAGpuTheHostLacks) {
  auto e = refusal(plan_on({0, 7}), measured_profile("n", {"GPU-1", "GPU-2"}), this_host("n", {"GPU-1", "GPU-2"}));
  EXPECT_EQ(e.file(), "best.plan.json");
  EXPECT_NE(std::string(e.what()).find("7"), std::string::npos) << e.what();
}

TEST(ValidateHostile, HostWithNoGpus) {
  auto e = refusal(plan_on({0}), measured_profile("n", {"GPU-1"}), this_host("n", {}));
  EXPECT_EQ(e.file(), "best.plan.json");
}

TEST(ValidateHostile, AbsurdProfileMemoryDoesNotOverflowTheComparison) {
  // A profile claiming 4e18 bytes per GPU: memory_bytes * 95 overflows int64 (UB, caught by the
  // sanitizer build). The comparison must stay defined; here it warns that the host has less.
  Machine p = measured_profile("n", {"GPU-1"});
  p.gpus[0].memory_bytes = 4'000'000'000'000'000'000;
  auto w = preflight(plan_on({0}), "best.plan.json", p, "profile.json", this_host("n", {"GPU-1"}), true, "");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("GiB"), std::string::npos);
}

}  // namespace
}  // namespace peerplan
