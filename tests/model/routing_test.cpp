// The MoE routing model (issue 14): counts are exactly route_token's draws, deterministic, cached
// correctly; uniform touched experts match E (1 - (1 - k/E)^B); skew raises the busiest expert;
// specs parse from the workload and the command line with errors naming file and field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include <unistd.h>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "planner/model/routing.hpp"
#include "planner/model/routing_model.hpp"
#include "planner/model/workload.hpp"

namespace peerplan::routing {
namespace {

std::vector<int32_t> direct_counts(const RoutingSpec& s, int E, int k, int64_t T, int layer) {
  const std::vector<float> cdf = routing_cdf(s, E);
  std::vector<int32_t> c(size_t(E), 0);
  int out[64];
  for (int64_t t = 0; t < T; ++t) {
    route_token(s.seed, layer, t, E, k, cdf.empty() ? nullptr : cdf.data(), out);
    for (int i = 0; i < k; ++i) ++c[size_t(out[i])];
  }
  return c;
}

std::string scratch(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / ("peerplan-test-routing-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto p = (dir / name).string();
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
  return p;
}

TEST(Routing, CountsAreRouteTokensDrawsAtEveryTokenCount) {
  RoutingSpec zipf;
  zipf.skew = Skew::Zipf, zipf.zipf_s = 1.1;
  for (const RoutingSpec& s : {RoutingSpec{}, zipf}) {
    // Across and inside the 64-token checkpoints, increasing and decreasing (cache reuse).
    for (int64_t T : {1, 63, 64, 65, 300, 129, 7, 1000}) {
      const auto& c = expert_counts(s, 60, 4, T, 5);
      EXPECT_EQ(c, direct_counts(s, 60, 4, T, 5)) << s.label() << " T=" << T;
      EXPECT_EQ(std::accumulate(c.begin(), c.end(), int64_t(0)), T * 4);
    }
  }
}

TEST(Routing, DeterministicPerSeedAndLayer) {
  RoutingSpec a, b;
  b.seed = 2;
  const std::vector<int32_t> l0 = expert_counts(a, 64, 6, 200, 0);
  EXPECT_EQ(l0, expert_counts(a, 64, 6, 200, 0));
  EXPECT_NE(l0, expert_counts(a, 64, 6, 200, 1));
  EXPECT_NE(l0, expert_counts(b, 64, 6, 200, 0));
}

TEST(Routing, EachTokenPicksKDistinctExperts) {
  const auto& one = expert_counts(RoutingSpec{}, 8, 2, 1, 3);  // Mixtral, batch 1: 2 of 8
  EXPECT_EQ(group_load(one, 0, 8).touched, 2);
  EXPECT_EQ(group_load(one, 0, 8).max_rows, 1);
  for (int layer = 0; layer < 24; ++layer)  // Qwen1.5-MoE, batch 1: 4 of 60 on every layer
    EXPECT_EQ(group_load(expert_counts(RoutingSpec{}, 60, 4, 1, layer), 0, 60).touched, 4);
}

TEST(Routing, UniformTouchedMatchesTheExpectation) {
  struct Case {
    int E, k;
    int64_t B;
  };
  for (const Case c : {Case{60, 4, 8}, Case{60, 4, 32}, Case{8, 2, 3}, Case{64, 6, 16}, Case{256, 8, 64}}) {
    std::vector<int> layers(400);
    std::iota(layers.begin(), layers.end(), 0);
    const RoutingSummary s = summarize(RoutingSpec{}, c.E, c.k, c.B, layers);
    const double want = expected_touched_uniform(c.E, c.k, c.B);
    EXPECT_NEAR(s.touched, want, 0.02 * want) << c.E << " experts, top-" << c.k << ", batch " << c.B;
    EXPECT_DOUBLE_EQ(s.touched_uniform, want);
  }
  EXPECT_NEAR(expected_touched_uniform(60, 4, 1), 4.0, 1e-12);
  EXPECT_NEAR(expected_touched_uniform(8, 2, 1), 2.0, 1e-12);
}

TEST(Routing, ZipfRaisesTheBusiestExpertAndTouchesFewer) {
  RoutingSpec zipf;
  zipf.skew = Skew::Zipf, zipf.zipf_s = 1.2;
  std::vector<int> layers(50);
  std::iota(layers.begin(), layers.end(), 0);
  const RoutingSummary u = summarize(RoutingSpec{}, 64, 6, 256, layers);
  const RoutingSummary z = summarize(zipf, 64, 6, 256, layers);
  EXPECT_GT(z.busiest_share, 2 * u.busiest_share) << u.busiest_share << " vs " << z.busiest_share;
  RoutingSummary u8 = summarize(RoutingSpec{}, 64, 6, 8, layers), z8 = summarize(zipf, 64, 6, 8, layers);
  EXPECT_LT(z8.touched, u8.touched);
  // A popularity list puts the rows where it says.
  RoutingSpec pop;
  pop.skew = Skew::Popularity;
  pop.popularity.assign(8, 0.0);
  pop.popularity[3] = 10, pop.popularity[5] = 10, pop.popularity[6] = 1;
  const auto& c = expert_counts(pop, 8, 2, 100, 0);
  EXPECT_GT(c[3] + c[5], 150);
  EXPECT_EQ(c[0] + c[1], 0);
}

TEST(Routing, CdfIsWhatTheKernelGets) {
  EXPECT_TRUE(routing_cdf(RoutingSpec{}, 60).empty());
  RoutingSpec zipf;
  zipf.skew = Skew::Zipf, zipf.zipf_s = 1.0;
  const std::vector<float> cdf = routing_cdf(zipf, 60);
  ASSERT_EQ(cdf.size(), 60u);
  EXPECT_EQ(cdf.back(), 1.0f);
  for (size_t i = 1; i < cdf.size(); ++i) EXPECT_GE(cdf[i], cdf[i - 1]);
  // Hot experts are scattered over the ids: the most popular is not simply expert 0 for every seed.
  int first_hot = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    zipf.seed = seed;
    const std::vector<float> c = routing_cdf(zipf, 60);
    first_hot += c[0] > 0.2f;
  }
  EXPECT_LT(first_hot, 8);
  RoutingSpec pop;
  pop.skew = Skew::Popularity;
  pop.popularity = {1, 1, 2};
  EXPECT_EQ(routing_cdf(pop, 3), (std::vector<float>{0.25f, 0.5f, 1.0f}));
  EXPECT_THROW(routing_cdf(pop, 4), InputError);
}

TEST(Routing, CommandLineSpecs) {
  EXPECT_EQ(parse_routing_arg("uniform").skew, Skew::Uniform);
  RoutingSpec z = parse_routing_arg("zipf:1.2,seed=7");
  EXPECT_EQ(z.skew, Skew::Zipf);
  EXPECT_DOUBLE_EQ(z.zipf_s, 1.2);
  EXPECT_EQ(z.seed, 7u);
  EXPECT_EQ(z.label(), "zipf:1.2");
  const std::string f = scratch("pop.json", "[1, 2, 3, 4]");
  RoutingSpec p = parse_routing_arg("popularity:" + f);
  EXPECT_EQ(p.popularity, (std::vector<double>{1, 2, 3, 4}));
  for (const char* bad : {"zipf:0", "zipf:-1", "zipf:abc", "zipf:11", "hot", "uniform,seed=x", "uniform,seed=-3", ""}) {
    try {
      parse_routing_arg(bad);
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "--moe-routing") << bad;
    }
  }
  // A popularity file: its own errors name it.
  try {
    parse_routing_arg("popularity:" + scratch("neg.json", "[1, -2]"));
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("neg.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("non-negative"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_routing_arg("popularity:/nonexistent/pop.json"), InputError);
  // Against the model: one weight per expert.
  try {
    check_routing_for_model(p, 60, "qwen1.5-moe-a2.7b");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("60 weights, got 4"), std::string::npos) << e.what();
    EXPECT_EQ(e.file(), f);
  }
  EXPECT_NO_THROW(check_routing_for_model(p, 0, "dense"));
}

std::string workload_with(const std::string& routing) {
  return R"({"name": "w", "arrival": {"process": "poisson", "rate_rps": 1},
    "prompt_tokens": {"dist": "fixed", "value": 10}, "output_tokens": {"dist": "fixed", "value": 10},
    "moe_routing": )" + routing + "}";
}

TEST(Routing, WorkloadObject) {
  Workload w = parse_workload(workload_with(R"({"skew": "zipf", "exponent": 0.8, "seed": 3})"), "w.json");
  EXPECT_EQ(w.moe_routing.skew, Skew::Zipf);
  EXPECT_DOUBLE_EQ(w.moe_routing.zipf_s, 0.8);
  EXPECT_EQ(w.moe_routing.seed, 3u);
  Workload p = parse_workload(workload_with(R"({"skew": "popularity", "weights": [0, 1, 3]})"), "w.json");
  EXPECT_EQ(p.moe_routing.popularity, (std::vector<double>{0, 1, 3}));
  EXPECT_EQ(parse_workload(workload_with(R"({})"), "w.json").moe_routing.skew, Skew::Uniform);
  struct Bad {
    const char* json;
    const char* field;
  };
  for (const Bad& b : {Bad{R"({"skew": "hot"})", "moe_routing/skew"}, Bad{R"({"skew": "zipf"})", "moe_routing/exponent"},
                       Bad{R"({"skew": "zipf", "exponent": 20})", "moe_routing/exponent"},
                       Bad{R"({"skew": "uniform", "exponent": 1})", "moe_routing/exponent"},
                       Bad{R"({"skew": "popularity", "weights": [0, 0]})", "moe_routing/weights"},
                       Bad{R"({"skew": "popularity", "weights": [1, -1]})", "moe_routing/weights/1"},
                       Bad{R"({"skews": "zipf"})", "moe_routing/skews"}, Bad{R"("zipf")", "moe_routing"}}) {
    try {
      parse_workload(workload_with(b.json), "w.json");
      ADD_FAILURE() << b.json;
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), "w.json") << b.json;
      EXPECT_EQ(e.field(), b.field) << b.json << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace peerplan::routing
