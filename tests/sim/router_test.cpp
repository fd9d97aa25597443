// Replicated plans: the router in front of R replicas, each with its own scheduler and pipeline,
// on one simulated clock (planner/sim/router.hpp, run_serving with ReplicaServers).
#include <set>

#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/sim/router.hpp"
#include "planner/sim/serving.hpp"

using namespace peerplan;

namespace {

class FixedPricer : public IterationPricer {
 public:
  explicit FixedPricer(double s) { cost_.stage_s = {s}; }
  int num_stages() const override { return 1; }
  const IterationCost& price(const BatchShape&) override { return cost_; }

 private:
  IterationCost cost_;
};

struct Replicas {
  std::vector<std::unique_ptr<Scheduler>> scheds;
  std::vector<std::unique_ptr<FixedPricer>> pricers;
  std::vector<ReplicaServer> servers;
  Replicas(int n, double step_s, int64_t max_seqs) {
    SchedulerConfig c;
    c.max_num_seqs = max_seqs;
    for (int i = 0; i < n; ++i) {
      scheds.push_back(std::make_unique<Scheduler>(c));
      pricers.push_back(std::make_unique<FixedPricer>(step_s));
      servers.push_back({scheds.back().get(), pricers.back().get()});
    }
  }
};

ServingRun serve(const std::vector<Request>& reqs, int replicas, RouterPolicy policy, double step_s, int64_t max_seqs = 1) {
  Replicas r(replicas, step_s, max_seqs);
  Router router(policy, replicas);
  VectorStream in(reqs);
  return run_serving(in, r.servers, router, 0, 0);
}

}  // namespace

TEST(Router, TwoReplicasCarryWhatOneCannot) {
  // Arrivals every 0.6 D, one token each, one sequence per iteration: one server is at 167 % load
  // and its queue grows without bound; round robin gives each of two replicas an arrival every
  // 1.2 D > D, so nobody waits and every TTFT is exactly D.
  const double D = 0.010;
  std::vector<Request> reqs;
  for (int i = 0; i < 200; ++i) reqs.push_back({i, 0.6 * D * i, 1, 1});
  ServingRun two = serve(reqs, 2, RouterPolicy::RoundRobin, D);
  for (const RequestTiming& t : two.requests) EXPECT_NEAR(t.first_token_s - t.arrival_s, D, 1e-12) << "request " << t.id;
  EXPECT_EQ(two.routed, (std::vector<int64_t>{100, 100}));
  ServingRun one = serve(reqs, 1, RouterPolicy::RoundRobin, D);
  const RequestTiming& last = one.requests.back();
  // The 200th request waits for 199 services begun from t = 0: it starts at 199 D.
  EXPECT_NEAR(last.first_token_s, 200 * D, 1e-9);
}

TEST(Router, LeastOutstandingAvoidsTheReplicaHoldingALongRequest) {
  // Request 0 generates 100 tokens on replica 0 (one sequence per iteration: it holds replica 0
  // for 100 D). Request 1 (short) goes to replica 1 and is done at 2.5 D. Request 2 arrives at 3 D:
  // round robin sends it to replica 0, behind the long one (first token at 101 D); least
  // outstanding sends it to the idle replica 1 (first token at 4 D).
  const double D = 0.010;
  std::vector<Request> reqs = {{0, 0.0, 1, 100}, {1, 1.5 * D, 1, 1}, {2, 3 * D, 1, 1}};
  ServingRun rr = serve(reqs, 2, RouterPolicy::RoundRobin, D);
  ServingRun lo = serve(reqs, 2, RouterPolicy::LeastOutstanding, D);
  EXPECT_NEAR(rr.requests[2].first_token_s, 101 * D, 1e-9);
  EXPECT_NEAR(lo.requests[2].first_token_s, 4 * D, 1e-9);
  EXPECT_EQ(rr.routed, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(lo.routed, (std::vector<int64_t>{1, 2}));
}

TEST(Router, SessionAffinityKeepsASessionOnOneReplica) {
  std::vector<Request> reqs;
  for (int i = 0; i < 40; ++i) {
    Request r{i, 0.001 * i, 8, 4};
    r.session = i < 20 ? 7 : -1;  // twenty turns of one conversation, then twenty of their own
    reqs.push_back(r);
  }
  Router router(RouterPolicy::SessionAffinity, 4);
  std::vector<int64_t> outstanding(4, 0);
  std::vector<int> picked;
  for (const Request& r : reqs) picked.push_back(router.pick(r, outstanding));
  for (int i = 1; i < 20; ++i) EXPECT_EQ(picked[size_t(i)], picked[0]) << "turn " << i << " of session 7";
  std::vector<int> seen(4, 0);
  for (int i = 20; i < 40; ++i) ++seen[size_t(picked[size_t(i)])];
  for (int c : seen) EXPECT_GT(c, 0) << "requests without a session spread over every replica";
}

TEST(Router, OneReplicaThroughTheReplicaCallIsTheSingleCallEventForEvent) {
  std::vector<Request> reqs;
  for (int i = 0; i < 300; ++i) reqs.push_back({i, 0.004 * i, 64 + i % 7, 1 + i % 13});
  SchedulerConfig c;
  c.max_num_seqs = 8;
  Scheduler a(c), b(c);
  FixedPricer pa(0.01), pb(0.01);
  ServingRun old = run_serving(reqs, a, pa, 0, 0);
  Router router(RouterPolicy::LeastOutstanding, 1);
  VectorStream in(reqs);
  ServingRun now = run_serving(in, {ReplicaServer{&b, &pb}}, router, 0, 0);
  ASSERT_EQ(old.requests.size(), now.requests.size());
  for (size_t i = 0; i < old.requests.size(); ++i) {
    EXPECT_EQ(old.requests[i].first_token_s, now.requests[i].first_token_s);
    EXPECT_EQ(old.requests[i].finish_s, now.requests[i].finish_s);
  }
  EXPECT_EQ(old.events, now.events);
}

TEST(Router, UnknownPolicyNamesTheNearest) {
  try {
    router_policy("least_outstandng");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("least_outstanding"), std::string::npos) << e.what();
  }
}

TEST(Router, WorkloadSessionsAreDrawnOnTheirOwnStream) {
  // `sessions` spreads requests over conversations without changing any other draw: the same
  // arrivals, prompts and outputs with and without it.
  Workload w;
  w.num_requests = 500;
  w.rate_rps = 10;
  Workload s = w;
  s.sessions = 12;
  std::vector<Request> a = w.generate(), b = s.generate();
  ASSERT_EQ(a.size(), b.size());
  std::set<int64_t> seen;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival_s, b[i].arrival_s);
    EXPECT_EQ(a[i].prompt_tokens, b[i].prompt_tokens);
    EXPECT_EQ(a[i].output_tokens, b[i].output_tokens);
    EXPECT_EQ(a[i].session, -1);
    ASSERT_GE(b[i].session, 0);
    ASSERT_LT(b[i].session, 12);
    seen.insert(b[i].session);
  }
  EXPECT_EQ(seen.size(), 12u);
}
