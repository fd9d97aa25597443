// RoutedInbox (planner/validate/routed_inbox.hpp): how the executor's copies receive requests on the
// run's clock, through the simulator's router.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "planner/validate/routed_inbox.hpp"

using namespace peerplan;

namespace {

std::vector<Request> arrivals(std::vector<double> at) {
  std::vector<Request> r;
  for (size_t i = 0; i < at.size(); ++i) r.push_back(Request{int64_t(i), at[i], 100, 10, -1});
  return r;
}

std::vector<int64_t> ids(const std::vector<Request>& v) {
  std::vector<int64_t> out;
  for (const Request& r : v) out.push_back(r.id);
  return out;
}

}  // namespace

TEST(RoutedInbox, NothingIsHandedOutBeforeItArrives) {
  RoutedInbox in(arrivals({0.5, 0.1, 0.3}), RouterPolicy::RoundRobin, 1);  // out of order: sorted here
  EXPECT_EQ(in.next_arrival(), 0.1);
  EXPECT_TRUE(in.take(0, 0.05).empty());
  EXPECT_EQ(ids(in.take(0, 0.35)), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(in.next_arrival(), 0.5);
  EXPECT_FALSE(in.drained(0));
  EXPECT_EQ(ids(in.take(0, 1.0)), (std::vector<int64_t>{0}));
  EXPECT_FALSE(in.next_arrival().has_value());
  EXPECT_TRUE(in.drained(0));
}

TEST(RoutedInbox, RoundRobinAlternatesWhicheverCopyPolls) {
  RoutedInbox in(arrivals({0.0, 0.1, 0.2, 0.3}), RouterPolicy::RoundRobin, 2);
  // Copy 1 polls first, late: every arrival is routed then, in arrival order, not to the poller.
  EXPECT_EQ(ids(in.take(1, 1.0)), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(ids(in.take(0, 1.0)), (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(in.drained(0));
  EXPECT_TRUE(in.drained(1));
}

TEST(RoutedInbox, LeastOutstandingSeesWhatTheCopiesFinished) {
  RoutedInbox in(arrivals({0.0, 0.1, 0.2, 0.3}), RouterPolicy::LeastOutstanding, 2);
  EXPECT_EQ(ids(in.take(0, 0.15)), (std::vector<int64_t>{0}));  // 0 -> copy 0, 1 -> copy 1 (ties: lowest)
  EXPECT_EQ(ids(in.take(1, 0.15)), (std::vector<int64_t>{1}));
  in.finished(1);  // copy 1 is empty again, copy 0 still holds request 0
  EXPECT_EQ(ids(in.take(1, 0.25)), (std::vector<int64_t>{2}));
  in.finished(0);
  in.finished(1);  // both empty: request 3 goes to copy 0 (the lowest index)
  EXPECT_EQ(ids(in.take(0, 0.35)), (std::vector<int64_t>{3}));
  const auto r = in.routed();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[2], (std::pair<int64_t, int>{2, 1}));
  EXPECT_EQ(r[3], (std::pair<int64_t, int>{3, 0}));
}

TEST(RoutedInbox, SessionAffinityRoutesAsTheSimulatorsRouter) {
  std::vector<Request> reqs = arrivals({0.0, 0.1, 0.2, 0.3, 0.4, 0.5});
  for (Request& r : reqs) r.session = r.id % 3;
  RoutedInbox in(reqs, RouterPolicy::SessionAffinity, 2);
  Router sim(RouterPolicy::SessionAffinity, 2);
  std::vector<int64_t> none(2, 0);
  std::set<int64_t> at[2];
  for (int64_t id : ids(in.take(0, 1.0))) at[0].insert(id);
  for (int64_t id : ids(in.take(1, 1.0))) at[1].insert(id);
  for (const Request& r : reqs) EXPECT_TRUE(at[sim.pick(r, none)].count(r.id)) << "request " << r.id;
}

TEST(RoutedInbox, TwoCopiesOnTheirOwnThreadsGetEveryRequestOnce) {
  std::vector<double> at;
  for (int i = 0; i < 2000; ++i) at.push_back(i * 1e-3);
  RoutedInbox in(arrivals(at), RouterPolicy::RoundRobin, 2);
  std::atomic<double> clock{0};
  std::vector<int64_t> got[2];
  auto copy = [&](int c) {
    while (!in.drained(c)) {
      for (const Request& r : in.take(c, clock.load())) {
        got[c].push_back(r.id);
        in.finished(c);
      }
      clock.store(clock.load() + 1e-4);  // both threads advance a shared fake clock
    }
  };
  std::thread a(copy, 0), b(copy, 1);
  a.join();
  b.join();
  std::set<int64_t> all(got[0].begin(), got[0].end());
  all.insert(got[1].begin(), got[1].end());
  EXPECT_EQ(all.size(), 2000u);
  EXPECT_EQ(got[0].size() + got[1].size(), 2000u);
  EXPECT_EQ(got[0].size(), 1000u);  // round robin: half each, whichever thread polled
}
