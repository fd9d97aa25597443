#pragma once
// The router in front of a replicated plan's replicas (Plan::replicas, Plan::router): which
// replica each arriving request goes to. Time-free like the scheduler: the serving loop tells it
// what each replica holds, it answers with an index.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/workload.hpp"

namespace peerplan {

enum class RouterPolicy { RoundRobin, LeastOutstanding, SessionAffinity };
// "round_robin", "least_outstanding", "session_affinity" (Plan's kRouters); throws InputError otherwise.
RouterPolicy router_policy(const std::string& name);

class Router {
 public:
  Router(RouterPolicy policy, int replicas);
  // The replica for `r`; outstanding[i] = requests replica i holds (arrived, not finished).
  int pick(const Request& r, const std::vector<int64_t>& outstanding);
  int replicas() const { return replicas_; }

 private:
  RouterPolicy policy_;
  int replicas_;
  int64_t arrivals_ = 0;
};

}  // namespace peerplan
