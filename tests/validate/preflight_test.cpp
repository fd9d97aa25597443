// Refusals before a plan runs on the GPUs: foreign profile, too many GPUs, memory.
#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/topology/executor_launch.hpp"
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

TEST(Preflight, WarnsWhenTheProfileTimedKernelsLaunchedTheOtherWay) {
  // Profiles before session 19 carry no executor_launch: timed serially (executor_launch.hpp).
  Machine old = profile_of("a", {"GPU-1"});
  HostInfo pdl_host = host_of("a", {"GPU-1"});
  pdl_host.executor_launch = "pdl";
  auto w = preflight(plan_on({0}), "plan.json", old, "profile.json", pdl_host, true, "");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("one after another"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("PEERPLAN_PDL=0"), std::string::npos) << w[0];  // says how to run as the profile was timed
  EXPECT_NE(w[0].find("faster"), std::string::npos) << w[0];

  Machine pdl_profile = old;
  pdl_profile.meta[kExecutorLaunchKey] = "pdl";
  EXPECT_TRUE(preflight(plan_on({0}), "plan.json", pdl_profile, "profile.json", pdl_host, true, "").empty());
  HostInfo serial_host = pdl_host;
  serial_host.executor_launch = "serial";
  w = preflight(plan_on({0}), "plan.json", pdl_profile, "profile.json", serial_host, true, "");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("PEERPLAN_PDL=1"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("slower"), std::string::npos) << w[0];

  HostInfo unknown = pdl_host;  // a backend that does not say (e.g. a test double): no warning
  unknown.executor_launch = "";
  EXPECT_TRUE(preflight(plan_on({0}), "plan.json", old, "profile.json", unknown, true, "").empty());
}

TEST(Preflight, WarnsWhenThisHostForcesTheSharedExpertsOntoOtherStreamsThanTheProfile) {
  const Machine one_stream = profile_of("a", {"GPU-1"});  // no executor_shared_stream: one stream
  Machine two_streams = one_stream;
  two_streams.meta[kSharedStreamKey] = true;
  HostInfo h = host_of("a", {"GPU-1"});
  for (const Machine* m : std::initializer_list<const Machine*>{&one_stream, &two_streams}) {
    h.shared_stream = -1;  // unset: the executor follows the profile
    EXPECT_TRUE(preflight(plan_on({0}), "plan.json", *m, "profile.json", h, true, "").empty());
  }
  h.shared_stream = 1;
  auto w = preflight(plan_on({0}), "plan.json", one_stream, "profile.json", h, true, "");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("PEERPLAN_SHARED_STREAM=1 runs a MoE layer's shared experts on a second stream"),
            std::string::npos) << w[0];
  EXPECT_NE(w[0].find("faster than priced"), std::string::npos) << w[0];
  EXPECT_TRUE(preflight(plan_on({0}), "plan.json", two_streams, "profile.json", h, true, "").empty());
  h.shared_stream = 0;
  w = preflight(plan_on({0}), "plan.json", two_streams, "profile.json", h, true, "");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("slower than priced"), std::string::npos) << w[0];
}

TEST(Preflight, WarnsOfAnotherInt4WordOrderOnlyForW4A16Models) {
  const Machine old = profile_of("a", {"GPU-1"});  // before session 22: no executor_w4_layout, GPTQ's order
  EXPECT_EQ(w4_layout_timed(old), "gptq");
  EXPECT_EQ(w4_layout_timed(Machine{}), "");  // nominal: prices no rows
  HostInfo h = host_of("a", {"GPU-1"});
  h.w4_layout = "tiled";
  PreflightOptions w4;
  w4.w4a16 = true;
  auto w = preflight(plan_on({0}), "plan.json", old, "profile.json", h, true, "", w4);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("'gptq' word order but this executor reads 'tiled'"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("faster than priced"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("PEERPLAN_W4_LAYOUT=gptq"), std::string::npos) << w[0];
  // A bf16 model runs no W4A16 GEMM: nothing to say.
  EXPECT_TRUE(preflight(plan_on({0}), "plan.json", old, "profile.json", h, true, "").empty());
  Machine tiled = old;
  tiled.meta[kW4LayoutKey] = "tiled";
  EXPECT_TRUE(preflight(plan_on({0}), "plan.json", tiled, "profile.json", h, true, "", w4).empty());
  h.w4_layout = "";  // a backend that does not say
  EXPECT_TRUE(preflight(plan_on({0}), "plan.json", old, "profile.json", h, true, "", w4).empty());
}

TEST(Preflight, ExecutorLaunchOfNominalMachinesIsEmpty) {
  Machine nominal;
  EXPECT_EQ(executor_launch(nominal), "");
  Machine measured = profile_of("a", {"GPU-1"});
  EXPECT_EQ(executor_launch(measured), "serial");
  measured.meta[kExecutorLaunchKey] = "pdl";
  EXPECT_EQ(executor_launch(measured), "pdl");
}

#include "planner/model/model_config.hpp"

TEST(Preflight, W4A16ModelsAreThoseWithInt4LinearLayers) {
  ModelConfig m = load_model_config(resolve_model_path("llama-3.1-8b"));
  EXPECT_FALSE(uses_w4a16(m));
  apply_precision(m, DType::INT4, std::nullopt);
  EXPECT_TRUE(uses_w4a16(m)) << "--weights int4";
  EXPECT_TRUE(uses_w4a16(load_model_config(resolve_model_path("llama-3.1-70b-awq")))) << "an AWQ checkpoint";
  EXPECT_FALSE(uses_w4a16(load_model_config(resolve_model_path("llama-3.1-8b-fp8"))));
}

TEST(Preflight, W8ExpertModelsAreThoseWithFp8OrInt8RoutedExperts) {
  ModelConfig mixtral = load_model_config(resolve_model_path("mixtral-8x7b"));
  EXPECT_FALSE(uses_w8_experts(mixtral)) << "bf16 experts";
  apply_precision(mixtral, DType::FP8_E4M3, std::nullopt);
  EXPECT_TRUE(uses_w8_experts(mixtral)) << "--weights fp8";
  apply_precision(mixtral, DType::INT8, std::nullopt);
  EXPECT_TRUE(uses_w8_experts(mixtral)) << "--weights int8";
  apply_precision(mixtral, DType::INT4, std::nullopt);
  EXPECT_FALSE(uses_w8_experts(mixtral)) << "--weights int4";
  ModelConfig dense = load_model_config(resolve_model_path("llama-3.1-8b"));
  apply_precision(dense, DType::FP8_E4M3, std::nullopt);
  EXPECT_FALSE(uses_w8_experts(dense)) << "no routed experts";
}

TEST(Preflight, WarnsWhenSmallMatricesAtThreeToEightTokensRunOnAnotherKernel) {
  const Machine old = profile_of("a", {"GPU-1"});  // before session 32: the profile does not say
  EXPECT_EQ(small_gemv_timed(old), -1);
  HostInfo h = host_of("a", {"GPU-1"});
  h.small_gemv = 1;
  EXPECT_TRUE(preflight(plan_on({0}), "plan.json", old, "profile.json", h, true, "").empty())
      << "no warning for every older profile, most of which never timed these shapes";
  Machine gemv = old;
  gemv.meta[kSmallGemvKey] = true;
  EXPECT_EQ(small_gemv_timed(gemv), 1);
  EXPECT_EQ(small_gemv_timed(Machine{}), -1);  // nominal: prices no rows
  EXPECT_TRUE(preflight(plan_on({0}), "plan.json", gemv, "profile.json", h, true, "").empty());
  h.small_gemv = 0;  // PEERPLAN_SMALL_GEMV=0 on a profile timed with the GEMV
  auto w = preflight(plan_on({0}), "plan.json", gemv, "profile.json", h, true, "");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("on the GEMV but this executor runs them on cuBLASLt"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("slower than priced"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("PEERPLAN_SMALL_GEMV"), std::string::npos) << w[0];
  Machine cublas = old;
  cublas.meta[kSmallGemvKey] = false;
  h.small_gemv = 1;
  w = preflight(plan_on({0}), "plan.json", cublas, "profile.json", h, true, "");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("faster than priced"), std::string::npos) << w[0];
}

TEST(Preflight, WarnsOfAnotherTiledKernelForEightBitExpertsOnlyForSuchModels) {
  const Machine old = profile_of("a", {"GPU-1"});  // before session 27: no executor_moe_w8_mma, bf16 tensor cores
  EXPECT_EQ(moe_w8_mma_timed(old), 0);
  EXPECT_EQ(moe_w8_mma_timed(Machine{}), -1);  // nominal: prices no rows
  HostInfo h = host_of("a", {"GPU-1"});
  h.moe_w8_mma = 1;
  PreflightOptions w8;
  w8.w8_experts = true;
  auto w = preflight(plan_on({0}), "plan.json", old, "profile.json", h, true, "", w8);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("on bf16 tensor cores (the codes converted) but this executor runs them on 8-bit tensor cores"),
            std::string::npos) << w[0];
  EXPECT_NE(w[0].find("faster than priced"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("PEERPLAN_MOE_W8_MMA=0"), std::string::npos) << w[0];
  EXPECT_TRUE(preflight(plan_on({0}), "plan.json", old, "profile.json", h, true, "").empty()) << "no 8-bit experts";
  Machine mma = old;
  mma.meta[kMoeW8MmaKey] = true;
  EXPECT_EQ(moe_w8_mma_timed(mma), 1);
  EXPECT_TRUE(preflight(plan_on({0}), "plan.json", mma, "profile.json", h, true, "", w8).empty());
  h.moe_w8_mma = 0;
  w = preflight(plan_on({0}), "plan.json", mma, "profile.json", h, true, "", w8);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("slower than priced"), std::string::npos) << w[0];
  h.moe_w8_mma = -1;  // a backend that does not say
  EXPECT_TRUE(preflight(plan_on({0}), "plan.json", old, "profile.json", h, true, "", w8).empty());
}
