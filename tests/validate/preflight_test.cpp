// Refusals before a plan runs on the GPUs: foreign profile, too many GPUs, memory.
#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/validate/preflight.hpp"

using namespace peerplan;

namespace {

Machine profile_of(const std::string& host, std::vector<std::string> uuids) {
  Machine m;
  m.name = "h200x2";
  m.host = host;
  m.origin = "measured";
  m.measurements = Measurements{};
  for (size_t i = 0; i < uuids.size(); ++i) {
    GpuSpec g;
    g.id = int(i);
    g.uuid = uuids[i];
    g.memory_bytes = 150'000'000'000LL;
    m.gpus.push_back(g);
  }
  return m;
}

HostInfo host_of(const std::string& name, std::vector<std::string> uuids) {
  HostInfo h;
  h.hostname = name;
  for (auto& u : uuids) h.gpus.push_back({"NVIDIA H200", u, 150'000'000'000LL});
  return h;
}

Plan plan_on(std::vector<int> gpus) {
  Plan p;
  p.name = "tp" + std::to_string(gpus.size());
  PlanStage s;
  s.gpus = gpus;
  s.tp = int(gpus.size());
  s.layer_end = 32;
  p.stages.push_back(s);
  return p;
}

std::string field_of_refusal(const Plan& p, const Machine& m, const HostInfo& h, bool fits = true) {
  try {
    preflight(p, "plan.json", m, "profile.json", h, fits, "GPU 0 needs 160.0 GiB, has 139.8 GiB");
  } catch (const InputError& e) {
    return e.file() + ":" + e.field() + ":" + e.expected();
  }
  return "";
}

}  // namespace

TEST(Preflight, SameUuidsPassEvenUnderAnotherHostname) {
  // VMs get new hostnames; GPU UUIDs identify the hardware.
  EXPECT_EQ(profile_host_mismatch(profile_of("a", {"GPU-1", "GPU-2"}), host_of("b", {"GPU-1", "GPU-2"})), "");
}

TEST(Preflight, DifferentUuidIsRefusedNamingTheGpu) {
  std::string why = profile_host_mismatch(profile_of("a", {"GPU-1", "GPU-2"}), host_of("a", {"GPU-1", "GPU-9"}));
  EXPECT_NE(why.find("GPU 1"), std::string::npos) << why;
  EXPECT_NE(why.find("GPU-9"), std::string::npos) << why;
}

TEST(Preflight, WithoutUuidsHostnamesDecide) {
  EXPECT_EQ(profile_host_mismatch(profile_of("h200-a", {"", ""}), host_of("h200-a", {"GPU-1", "GPU-2"})), "");
  EXPECT_NE(profile_host_mismatch(profile_of("h200-a", {"", ""}), host_of("h200-b", {"GPU-1", "GPU-2"})), "");
}

TEST(Preflight, NominalMachineIsNeverThisHost) {
  Machine m = profile_of("x", {"GPU-1"});
  m.origin = "nominal";
  m.measurements.reset();
  EXPECT_NE(profile_host_mismatch(m, host_of("x", {"GPU-1"})).find("nominal"), std::string::npos);
}

TEST(Preflight, PlanNeedingMoreGpusThanTheHostIsRefused) {
  std::string r = field_of_refusal(plan_on({0, 1}), profile_of("a", {"GPU-1"}), host_of("a", {"GPU-1"}));
  EXPECT_EQ(r.rfind("plan.json:stages:", 0), 0u) << r;
  EXPECT_NE(r.find("this host has 1 GPU"), std::string::npos) << r;
}

TEST(Preflight, ForeignProfileIsRefusedUnlessAllowed) {
  Plan p = plan_on({0});
  Machine m = profile_of("a", {"GPU-1"});
  HostInfo h = host_of("b", {"GPU-7"});
  std::string r = field_of_refusal(p, m, h);
  EXPECT_EQ(r.rfind("profile.json:host:", 0), 0u) << r;
  EXPECT_NE(r.find("peerplan profile"), std::string::npos) << r;  // says how to fix it
  PreflightOptions allow;
  allow.allow_other_host = true;
  auto warnings = preflight(p, "plan.json", m, "profile.json", h, true, "", allow);
  EXPECT_EQ(warnings.size(), 1u);
}

TEST(Preflight, PlanThatDoesNotFitMemoryIsRefusedWithTheNumbers) {
  std::string r = field_of_refusal(plan_on({0}), profile_of("a", {"GPU-1"}), host_of("a", {"GPU-1"}), false);
  EXPECT_NE(r.find("160.0 GiB"), std::string::npos) << r;
}

TEST(Preflight, HostWithoutGpusIsRefused) {
  std::string r = field_of_refusal(plan_on({0}), profile_of("a", {"GPU-1"}), host_of("a", {}));
  EXPECT_NE(r.find("none visible"), std::string::npos) << r;
}

TEST(Preflight, FittingPlanOnItsOwnHostPasses) {
  auto w = preflight(plan_on({0, 1}), "plan.json", profile_of("a", {"GPU-1", "GPU-2"}), "profile.json",
                     host_of("a", {"GPU-1", "GPU-2"}), true, "");
  EXPECT_TRUE(w.empty());
}
