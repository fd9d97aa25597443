#include "profiler/common/moe_cublas_rule.hpp"

#include <cmath>
#include <cstdlib>
#include <cstdio>

#include "planner/core/error.hpp"

namespace peerplan::kernels {

double moe_gflop_per_expert(const MoeExpertLoad& l) { return peerplan::moe_gflop_per_expert(l.rows, l.touched, l.n, l.k); }

bool moe_use_cublas(const MoeExpertLoad& l, bool eager, double min_gflop) {
  return eager && moe_cublas_path(l.rows, l.touched, l.max_rows, l.n, l.k, min_gflop < 0 ? moe_cublas_min_gflop() : min_gflop);
}

double moe_cublas_min_gflop() {
  const char* e = std::getenv("PEERPLAN_MOE_CUBLAS_MIN_GFLOP");
  if (!e || !*e) return kMoeCublasMinGflop;
  char* end = nullptr;
  const double v = std::strtod(e, &end);
  if (end == e || *end != '\0' || !std::isfinite(v) || v < 0)
    throw InputError("", "PEERPLAN_MOE_CUBLAS_MIN_GFLOP",
                     std::string("a number >= 0 (GFLOP per touched expert; 0 = always cuBLAS when eager); found \"") +
                         e + "\"");
  return v;
}

std::string moe_cublas_rule_text(double min_gflop) {
  const double t = min_gflop < 0 ? moe_cublas_min_gflop() : min_gflop;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%g", t);
  if (t <= 0)
    return "eager calls with n, k multiples of 128: cuBLASLt per touched expert always (threshold 0); "
           "in CUDA graphs the grouped kernel";
  return std::string("eager calls with n, k multiples of 128, busiest expert > 32 rows and 2 * rows / touched * n * k >= ") +
         buf + " GFLOP: cuBLASLt per touched expert (offsets copied to the host, one stream sync; gate_up's rows "
               "gathered first); otherwise, and in CUDA graphs, the grouped kernel";
}

}  // namespace peerplan::kernels
