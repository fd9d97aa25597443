// Max-min fair sharing of edge capacity among concurrent flows, by progressive filling: raise
// every unfrozen flow's rate at the same pace until an edge saturates or a flow meets its demand,
// freeze the flows concerned, repeat. The result is the unique max-min fair allocation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "planner/topology/topology.hpp"

namespace peerplan {

std::vector<double> max_min_rates(const std::vector<std::vector<int>>& flow_edges,
                                  const std::vector<double>& capacity, const std::vector<double>& demand,
                                  const std::vector<std::vector<double>>& flow_weights) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const size_t nf = flow_edges.size();
  if (!demand.empty() && demand.size() != nf)
    throw std::invalid_argument("max_min_rates: " + std::to_string(demand.size()) + " demands for " +
                                std::to_string(nf) + " flows");
  for (double c : capacity)
    if (!(c >= 0)) throw std::invalid_argument("max_min_rates: capacities must be >= 0");
  if (!flow_weights.empty()) {
    if (flow_weights.size() != nf)
      throw std::invalid_argument("max_min_rates: weights for " + std::to_string(flow_weights.size()) + " flows of " +
                                  std::to_string(nf));
    for (size_t f = 0; f < nf; ++f) {
      if (!flow_weights[f].empty() && flow_weights[f].size() != flow_edges[f].size())
        throw std::invalid_argument("max_min_rates: flow " + std::to_string(f) + " has " +
                                    std::to_string(flow_weights[f].size()) + " weights for " +
                                    std::to_string(flow_edges[f].size()) + " edges");
      for (double w : flow_weights[f])
        if (!(w > 0) || !std::isfinite(w)) throw std::invalid_argument("max_min_rates: weights must be finite and > 0");
    }
  }

  // Only the edges some flow crosses take part: they are numbered 0..U-1 (ascending edge order),
  // so a re-rating on a machine of thousands of edges costs what its few flows touch. Per flow:
  // each finite-capacity edge (compact index) with its multiplicity (an edge crossed twice carries 2x).
  std::vector<int> used;
  for (size_t f = 0; f < nf; ++f)
    for (int e : flow_edges[f]) {
      if (e < 0 || size_t(e) >= capacity.size())
        throw std::out_of_range("max_min_rates: flow " + std::to_string(f) + " names edge " + std::to_string(e) +
                                " but there are " + std::to_string(capacity.size()) + " edges");
      if (capacity[size_t(e)] != kInf) used.push_back(e);
    }
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  auto compact = [&](int e) { return int(std::lower_bound(used.begin(), used.end(), e) - used.begin()); };
  std::vector<std::vector<std::pair<int, double>>> uses(nf);
  std::vector<std::pair<int, double>> sorted;
  for (size_t f = 0; f < nf; ++f) {
    sorted.clear();
    const bool weighted = !flow_weights.empty() && !flow_weights[f].empty();
    for (size_t i = 0; i < flow_edges[f].size(); ++i) {
      const int e = flow_edges[f][i];
      if (capacity[size_t(e)] != kInf) sorted.emplace_back(e, weighted ? flow_weights[f][i] : 1.0);
    }
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size();) {
      size_t j = i;
      double w = 0;
      while (j < sorted.size() && sorted[j].first == sorted[i].first) w += sorted[j++].second;
      uses[f].emplace_back(compact(sorted[i].first), w);
      i = j;
    }
  }

  const size_t nu = used.size();
  std::vector<double> rate(nf, 0.0), cap(nf, kInf), remaining(nu), edge_cap(nu);
  for (size_t u = 0; u < nu; ++u) remaining[u] = edge_cap[u] = capacity[size_t(used[u])];
  std::vector<char> active(nf, 1);
  for (size_t f = 0; f < nf; ++f) {
    if (!demand.empty() && demand[f] > 0) cap[f] = demand[f];
    if (uses[f].empty()) {  // nothing limits it but its own demand
      rate[f] = cap[f];
      active[f] = 0;
    }
  }

  std::vector<double> load(nu);
  for (size_t round = 0; round <= nf + capacity.size(); ++round) {
    std::fill(load.begin(), load.end(), 0.0);
    bool any = false;
    for (size_t f = 0; f < nf; ++f)
      if (active[f]) {
        any = true;
        for (auto [e, k] : uses[f]) load[size_t(e)] += k;
      }
    if (!any) break;
    double delta = kInf;
    for (size_t e = 0; e < nu; ++e)
      if (load[e] > 0) delta = std::min(delta, std::max(0.0, remaining[e]) / load[e]);
    for (size_t f = 0; f < nf; ++f)
      if (active[f]) delta = std::min(delta, cap[f] - rate[f]);
    for (size_t f = 0; f < nf; ++f)
      if (active[f]) rate[f] += delta;
    for (size_t e = 0; e < nu; ++e)
      if (load[e] > 0) remaining[e] -= delta * load[e];
    // Freeze flows at their demand and flows crossing a now-saturated edge.
    for (size_t f = 0; f < nf; ++f) {
      if (!active[f]) continue;
      if (rate[f] >= cap[f] * (1 - 1e-12)) {
        rate[f] = cap[f];
        active[f] = 0;
        continue;
      }
      for (auto [e, k] : uses[f])
        if (remaining[size_t(e)] <= 1e-9 * edge_cap[size_t(e)]) {
          active[f] = 0;
          break;
        }
    }
  }
  return rate;
}

}  // namespace peerplan
