#pragma once
// The router in front of an executed plan's copies (issue 16): requests reach the copies as they
// arrive on the run's real clock, each sent where the simulator's Router (planner/sim/router.hpp,
// the one routing rule) would send it given what every copy holds at that moment. Each copy's
// serving loop runs on its own host thread (as each engine replica runs in its own process behind
// a real router) and polls here; the copies share nothing else. CPU only and thread-safe, so the
// routing the executor does is tested on CPU (tests/validate/routed_inbox_test.cpp).
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "planner/model/workload.hpp"
#include "planner/sim/router.hpp"

namespace peerplan {

class RoutedInbox {
 public:
  // `requests` in any order (sorted here by arrival, then id: Workload::generate's order).
  RoutedInbox(std::vector<Request> requests, RouterPolicy policy, int copies);

  // Routes every request that has arrived by `now`, in arrival order, each to the copy the router
  // picks from what the copies hold then (routed and not finished), and hands `copy` the requests
  // routed to it that it has not taken yet. A request is routed at the first poll of any copy at or
  // after its arrival: an idle copy polls at next_arrival(), a busy one after every iteration.
  std::vector<Request> take(int copy, double now);
  // Arrival time of the next request not routed yet; nullopt once every request is routed.
  std::optional<double> next_arrival() const;
  // One of `copy`'s requests finished: it holds one fewer (least_outstanding counts this).
  void finished(int copy);
  // Every request routed and taken by its copy: a copy whose scheduler has finished all it took
  // has nothing more to do.
  bool drained(int copy) const;

  int copies() const { return int(outstanding_.size()); }
  int64_t size() const { return int64_t(requests_.size()); }
  // The copy each routed request went to, by request id order of routing: {id, copy}.
  std::vector<std::pair<int64_t, int>> routed() const;

 private:
  void route_until(double now);  // callers hold mu_

  mutable std::mutex mu_;
  std::vector<Request> requests_;
  Router router_;
  size_t next_ = 0;                          // first request not routed yet
  std::vector<int64_t> outstanding_;         // per copy: routed, not finished
  std::vector<std::vector<Request>> queued_; // per copy: routed, not taken yet
  std::vector<std::pair<int64_t, int>> routed_;
};

}  // namespace peerplan
