#pragma once
// The Pareto front of plans over two figures that are both better when higher (issue 16): tokens/s
// per GPU (what a GPU earns: throughput / the plan's GPUs) against tokens/s per user (how fast one
// user's answer streams: 1 / TPOT p50). A plan is on the front when no other plan is at least as
// good in both and strictly better in one.
#include <cstddef>
#include <vector>

namespace peerplan {

struct ParetoPoint {
  double per_gpu = 0;   // output tokens/s per GPU
  double per_user = 0;  // tokens/s per user
};

// Indices of the non-dominated points, from the highest tokens/s per GPU down (so from the lowest
// tokens/s per user up); equal points are all kept, in index order. A point with a non-finite
// coordinate is left out and dominates nothing.
std::vector<size_t> pareto_front(const std::vector<ParetoPoint>& points);

}  // namespace peerplan
