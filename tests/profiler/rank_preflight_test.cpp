// `validate --mpi` preflight against the ranks' GPUs (rank r owns global GPU r, on any host):
// the pure check that runs on every rank after MpiBus has gathered the descriptions.
#include <gtest/gtest.h>

#include <functional>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "profiler/common/rank_preflight.hpp"
#include "tests/plan_fixtures.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

namespace {

constexpr int64_t kGiB = int64_t(1) << 30;

std::string uuid_of(int g) { return fmt::format("GPU-4a99908{}-a1c3-f67b-1cc2-0867c741128{}", g, g); }

// A merged MPI profile of 2 hosts x 2 GPUs (what matters here: GPUs, UUIDs, hosts per rank).
Machine profile() {
  Machine m;
  m.name = "mpi-2hosts-4gpus";
  m.host = "hostA,hostB";
  m.origin = "measured";
  m.measurements = Measurements{};
  for (int g = 0; g < 4; ++g) {
    GpuSpec s;
    s.id = g;
    s.name = "NVIDIA H200";
    s.uuid = uuid_of(g);
    s.memory_bytes = 140 * kGiB;
    m.gpus.push_back(s);
    m.meta["mpi"]["ranks"].push_back({{"rank", g}, {"host", g < 2 ? "hostA" : "hostB"}, {"device", g % 2}});
  }
  return m;
}

// What each rank reports: its host, CUDA ordinal = local rank, UUID as CUDA gives it (32 hex
// digits, no "GPU-" and dashes), its GPU's memory.
std::vector<RankInfo> ranks(int n = 4) {
  std::vector<RankInfo> r;
  for (int g = 0; g < n; ++g) {
    std::string raw;
    for (char c : uuid_of(g).substr(4))
      if (c != '-') raw += c;
    r.push_back(RankInfo{g, g < 2 ? "hostA" : "hostB", g % 2, 2, g % 2, 2, raw, 140 * kGiB});
  }
  return r;
}

Plan tp4() { return test_plans::tp({0, 1, 2, 3}, 80, "tp4[0,1,2,3]"); }

// The plan needs 40 GiB of weights + 10 GiB of KV and 2 GiB reserve on each GPU (capacities from the profile).
MemoryReport fits() {
  MemoryReport m;
  for (int g = 0; g < 4; ++g) m.gpus.push_back(GpuMemory{g, 140 * kGiB, 40 * kGiB, 10 * kGiB, 0, 2 * kGiB});
  return m;
}

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.file() + " " + e.field() + ": " + e.expected();
  }
  return "(accepted)";
}

}  // namespace

TEST(RankPreflight, APlanOverTwoHostsPassesWhenEveryRankHasItsProfileGpu) {
  // The single-host check would refuse this plan on hostA (2 GPUs there, the plan uses 4).
  auto w = preflight_ranks(tp4(), "plan.json", profile(), "ab.json", ranks(), fits());
  EXPECT_TRUE(w.empty()) << w.front();
  EXPECT_EQ(normalise_gpu_uuid("GPU-4A999085-a1c3"), "4a999085a1c3") << "one GPU, two spellings";
}

TEST(RankPreflight, MessagesSpellUuidsAsNvidiaSmiDoes) {
  // CUDA reports 32 bare hex digits; the profile holds nvidia-smi's form. A message mixing the
  // two (seen on the H200, 2026-12-01) hides that they are the same kind of name.
  EXPECT_EQ(display_gpu_uuid("84385b859b58ac623d260949c826b050"), "GPU-84385b85-9b58-ac62-3d26-0949c826b050");
  EXPECT_EQ(display_gpu_uuid("GPU-4a999085-a1c3-f67b-1cc2-0867c7411289"), "GPU-4a999085-a1c3-f67b-1cc2-0867c7411289");
  EXPECT_EQ(display_gpu_uuid("MIG-1234"), "MIG-1234") << "not a GPU UUID: left as it is";
  auto r = ranks();
  r[3].uuid = "ffffffff000000000000000000000000";
  std::string msg = refusal([&] { preflight_ranks(tp4(), "plan.json", profile(), "ab.json", r, fits()); });
  EXPECT_NE(msg.find("GPU-ffffffff-0000-0000-0000-000000000000"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("ffffffff000000000000000000000000"), std::string::npos) << msg;
}

TEST(RankPreflight, AWrongUuidIsRefusedNamingTheRankAndItsHost) {
  auto r = ranks();
  r[3].uuid = "GPU-ffffffff-0000-0000-0000-000000000000";  // rank 3 landed on another GPU
  std::string msg = refusal([&] { preflight_ranks(tp4(), "plan.json", profile(), "ab.json", r, fits()); });
  EXPECT_NE(msg.find("ab.json host"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GPU 3 of the profile is " + uuid_of(3)), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 3 (host hostB, CUDA device 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("peerplan profile --mpi"), std::string::npos) << "says how to get a matching profile: " << msg;
  // --allow-other-host: a warning instead.
  PreflightOptions allow{true};
  auto w = preflight_ranks(tp4(), "plan.json", profile(), "ab.json", r, fits(), allow);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("rank 3"), std::string::npos);
}

TEST(RankPreflight, WithoutUuidsTheHostOfEachRankIsCompared) {
  auto r = ranks();
  for (auto& x : r) x.uuid.clear();
  EXPECT_TRUE(preflight_ranks(tp4(), "plan.json", profile(), "ab.json", r, fits()).empty());
  r[2].host = "hostC";
  std::string msg = refusal([&] { preflight_ranks(tp4(), "plan.json", profile(), "ab.json", r, fits()); });
  EXPECT_NE(msg.find("GPU 2 of the profile was measured on host 'hostB' but rank 2"), std::string::npos) << msg;
  // A single-process profile names one host for all its GPUs.
  Machine one = profile();
  one.meta = nlohmann::json::object();
  one.host = "hostA";
  EXPECT_NE(profile_ranks_mismatch(one, r).find("GPU 2 of the profile was measured on host 'hostA'"), std::string::npos);
}

TEST(RankPreflight, TooFewRanksSaysHowManyToStart) {
  std::string msg = refusal([&] { preflight_ranks(tp4(), "plan.json", profile(), "ab.json", ranks(2), fits()); });
  EXPECT_NE(msg.find("plan.json stages"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mpirun -np 4"), std::string::npos) << msg;
  EXPECT_NE(refusal([&] { preflight_ranks(tp4(), "plan.json", profile(), "ab.json", {}, fits()); }).find("at least one"),
            std::string::npos);
}

TEST(RankPreflight, ARankWhoseGpuIsTooSmallForItsShareIsRefused) {
  auto r = ranks();
  r[2].memory_bytes = 48 * kGiB;  // the plan needs 52 GiB there
  std::string msg = refusal([&] { preflight_ranks(tp4(), "plan.json", profile(), "ab.json", r, fits()); });
  EXPECT_NE(msg.find("needs 52.0 GiB on GPU 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 2 (host hostB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has 48.0 GiB"), std::string::npos) << msg;
  // Enough for the plan but well under the profile's figure: run, with a warning.
  r[2].memory_bytes = 80 * kGiB;
  auto w = preflight_ranks(tp4(), "plan.json", profile(), "ab.json", r, fits());
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("GPU 2"), std::string::npos) << w[0];
  // The memory check on the profile's figures still refuses a plan that does not fit at all.
  MemoryReport no = fits();
  no.fits = false;
  no.why = "GPU 1 needs 150.0 GiB";
  EXPECT_NE(refusal([&] { preflight_ranks(tp4(), "plan.json", profile(), "ab.json", ranks(), no); })
                .find("GPU 1 needs 150.0 GiB"),
            std::string::npos);
}

TEST(RankPreflight, ANominalMachineIsNeverTheseGpus) {
  Machine m = profile();
  m.origin = "nominal";
  m.measurements.reset();
  EXPECT_NE(refusal([&] { preflight_ranks(tp4(), "plan.json", m, "hgx.json", ranks(), fits()); }).find("nominal"),
            std::string::npos);
}

TEST(RankPreflight, WarnsWhenTheProfileTimedTheOtherLaunchMode) {
  // profile() carries no executor_launch: timed serially, as every profile before session 19.
  HostInfo host;
  host.executor_launch = "pdl";
  auto w = preflight_ranks(tp4(), "plan.json", profile(), "ab.json", ranks(), fits(), {}, host);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("PEERPLAN_PDL=0"), std::string::npos) << w[0];
  host.executor_launch = "serial";
  EXPECT_TRUE(preflight_ranks(tp4(), "plan.json", profile(), "ab.json", ranks(), fits(), {}, host).empty());
}

// The same executor warnings as a one-host validate: here the shared experts' stream and the int4 word order.
TEST(RankPreflight, WarnsWhenTheRanksExecutorRunsOtherwiseThanTheProfile) {
  HostInfo host;
  host.shared_stream = 1;  // PEERPLAN_SHARED_STREAM=1 where profile() prices one stream
  host.w4_layout = "tiled";  // profile() has no executor_w4_layout: GPTQ's order
  PreflightOptions w4;
  w4.w4a16 = true;
  auto w = preflight_ranks(tp4(), "plan.json", profile(), "ab.json", ranks(), fits(), w4, host);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("PEERPLAN_SHARED_STREAM=1"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("PEERPLAN_W4_LAYOUT=gptq"), std::string::npos) << w[1];
  EXPECT_EQ(preflight_ranks(tp4(), "plan.json", profile(), "ab.json", ranks(), fits(), {}, host).size(), 1u)
      << "a model without int4 weights: no word-order warning";
}
