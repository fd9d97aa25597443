#include "planner/report/pareto.hpp"

#include <algorithm>
#include <cmath>

namespace peerplan {

std::vector<size_t> pareto_front(const std::vector<ParetoPoint>& p) {
  auto finite = [](const ParetoPoint& x) { return std::isfinite(x.per_gpu) && std::isfinite(x.per_user); };
  // Quadratic on purpose: a search ranks tens to hundreds of plans, and the pairwise rule is the definition.
  std::vector<size_t> front;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!finite(p[i])) continue;
    bool dominated = false;
    for (size_t j = 0; j < p.size() && !dominated; ++j) {
      if (j == i || !finite(p[j])) continue;
      dominated = p[j].per_gpu >= p[i].per_gpu && p[j].per_user >= p[i].per_user &&
                  (p[j].per_gpu > p[i].per_gpu || p[j].per_user > p[i].per_user);
    }
    if (!dominated) front.push_back(i);
  }
  std::stable_sort(front.begin(), front.end(), [&](size_t a, size_t b) {
    if (p[a].per_gpu != p[b].per_gpu) return p[a].per_gpu > p[b].per_gpu;
    return p[a].per_user < p[b].per_user;
  });
  return front;
}

}  // namespace peerplan
