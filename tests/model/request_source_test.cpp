// RequestSource / WorkloadStream (planner/model/workload_requests.hpp): a workload's requests drawn
// lazily in arrival order, identical on every stream, with the over-context rule applied once.
#include <gtest/gtest.h>

#include "model_test_util.hpp"
#include "planner/core/error.hpp"
#include "planner/model/workload.hpp"
#include "planner/model/workload_requests.hpp"

namespace peerplan {
namespace {

std::vector<Request> drain(RequestStream& s) {
  std::vector<Request> out;
  for (Request r; s.next(r);) out.push_back(r);
  return out;
}

bool same(const std::vector<Request>& a, const std::vector<Request>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].id != b[i].id || a[i].arrival_s != b[i].arrival_s || a[i].prompt_tokens != b[i].prompt_tokens ||
        a[i].output_tokens != b[i].output_tokens)
      return false;
  return true;
}

TEST(RequestSource, EveryStreamYieldsTheSameRequestsInArrivalOrder) {
  Workload w = load_workload(resolve_workload_path("chat"));  // Poisson, lognormal lengths, 2000 requests
  const RequestSource src(w);
  EXPECT_EQ(src.size(), 2000);
  WorkloadStream a = src.stream(), b = src.stream();
  Request first;
  ASSERT_TRUE(b.next(first));  // b ahead of a: streams are independent
  const auto ra = drain(a), rb = drain(b);
  ASSERT_EQ(ra.size(), 2000u);
  EXPECT_TRUE(same({ra.begin() + 1, ra.end()}, rb));
  EXPECT_TRUE(same(ra, src.all()));
  EXPECT_TRUE(same(ra, w.generate()));
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i].id, int64_t(i));
    if (i) {
      EXPECT_GE(ra[i].arrival_s, ra[i - 1].arrival_s);
    }
  }
  EXPECT_EQ(a.total(), 2000);
}

TEST(RequestSource, PromptsOverTheContextAreRefusedOnceOrDroppedAndRenumbered) {
  nlohmann::json j = {{"arrival", {{"process", "poisson"}, {"rate_rps", 2}}},
                      {"num_requests", 400},
                      {"prompt_tokens", {{"dist", "uniform"}, {"min", 1000}, {"max", 3000}}},
                      {"output_tokens", {{"dist", "fixed"}, {"value", 8}}}};
  Workload w = parse_workload(j.dump(), "w.json");
  const auto raw = w.generate();
  size_t over = 0;
  for (const Request& r : raw) over += r.prompt_tokens > 2000;
  ASSERT_GT(over, 100u);
  ASSERT_LT(over, 300u);
  bind_model_context(w, 2000, "m", false);
  InputError e = test::expect_input_error([&] { RequestSource s(w); });
  EXPECT_EQ(e.field(), "prompt_tokens");
  EXPECT_NE(std::string(e.what()).find(std::to_string(over) + " of 400 requests"), std::string::npos) << e.what();
  bind_model_context(w, 2000, "m", true);
  const RequestSource src(w);
  EXPECT_EQ(src.dropped(), int64_t(over));
  EXPECT_EQ(src.size(), int64_t(400 - over));
  WorkloadStream s = src.stream();
  const auto kept = drain(s);
  ASSERT_EQ(kept.size(), 400 - over);
  size_t k = 0;
  for (const Request& r : raw) {
    if (r.prompt_tokens > 2000) continue;
    EXPECT_EQ(kept[k].id, int64_t(k)) << "the survivors are numbered 0..n-1";
    EXPECT_EQ(kept[k].arrival_s, r.arrival_s);
    EXPECT_EQ(kept[k].prompt_tokens, r.prompt_tokens);
    ++k;
  }
  EXPECT_EQ(requests_dropped_over_context(w), int64_t(over));
  // A bound no prompt can exceed needs no pass over the requests (and drops nothing).
  bind_model_context(w, 3000, "m", false);
  EXPECT_EQ(RequestSource(w).size(), 400);
}

}  // namespace
}  // namespace peerplan
