#include "planner/sim/router.hpp"

#include <algorithm>

#include "planner/core/error.hpp"
#include "planner/core/suggest.hpp"
#include "planner/model/routing.hpp"
#include "planner/plan/plan.hpp"

namespace peerplan {

RouterPolicy router_policy(const std::string& name) {
  if (name == "round_robin") return RouterPolicy::RoundRobin;
  if (name == "least_outstanding") return RouterPolicy::LeastOutstanding;
  if (name == "session_affinity") return RouterPolicy::SessionAffinity;
  throw InputError("plan", "router", one_of_with_suggestion(name, kRouters));
}

Router::Router(RouterPolicy policy, int replicas) : policy_(policy), replicas_(std::max(1, replicas)) {}

int Router::pick(const Request& r, const std::vector<int64_t>& outstanding) {
  const int64_t i = arrivals_++;
  if (replicas_ == 1) return 0;
  switch (policy_) {
    case RouterPolicy::RoundRobin:
      return int(i % replicas_);
    case RouterPolicy::LeastOutstanding:
      return int(std::min_element(outstanding.begin(), outstanding.begin() + replicas_) - outstanding.begin());
    case RouterPolicy::SessionAffinity:  // a hash of the session: its requests land together, sessions spread evenly
      return int(routing::mix64(uint64_t(r.session >= 0 ? r.session : r.id)) % uint64_t(replicas_));
  }
  return 0;
}

}  // namespace peerplan
