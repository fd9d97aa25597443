#pragma once
// `peerplan profile --compare A B`: do two profiles of the same host agree? (single-process vs
// MPI, today vs last month, before vs after a driver update). Matches every figure the two have in
// common and reports each one's relative difference, largest first. CPU-only.
#include <string>
#include <vector>

#include "planner/topology/machine.hpp"

namespace peerplan::profiler {

struct CompareRow {
  std::string kind;   // "transfer", "collective", "hbm", "launch", "gemm"
  std::string what;   // e.g. "p2p_ce gpu0->gpu1 @1 GiB", "all_reduce [0,1] @2 GiB busBw"
  std::string unit;   // "GB/s", "us"
  double a = 0, b = 0;
  double diff() const { return a != 0 ? (b - a) / a : 0; }  // relative, of B against A
};

struct ProfileComparison {
  std::vector<CompareRow> rows;       // sorted by |diff|, largest first
  std::vector<std::string> notes;     // e.g. different hosts, figures only in one profile
  double median_abs_diff = 0, max_abs_diff = 0;
};

// Bandwidths at the largest size both measured, and the time of the smallest (latency-bound)
// size; collectives as nccl-tests busBw; GEMMs matched by GPU and shape (one row: the geometric
// mean ratio and the worst shape).
ProfileComparison compare_profiles(const Machine& a, const Machine& b);
std::string format_comparison(const ProfileComparison& c, const std::string& name_a, const std::string& name_b,
                              size_t max_rows = 40);

}  // namespace peerplan::profiler
