#pragma once
// Sweep planning: which sizes, token counts and sample counts a profile measures. Pure functions,
// unit-tested on CPU, so the GPU code only executes the plan.
#include <cstdint>
#include <string>
#include <vector>

#include "profiler/profile_api.hpp"

namespace peerplan::profiler {

// Log-spaced sizes from min to max (both included), factor 2 between points; each size rounded
// to a multiple of 4 bytes (kernels move 4-byte words). Throws InputError if min > max or min < 4.
std::vector<int64_t> log_sizes(int64_t min_bytes, int64_t max_bytes, double factor = 2.0);

// "4K", "4KiB", "64M", "1G", "1GiB", "4096" -> bytes (binary units, as nvbandwidth's -b MiB).
// Throws InputError naming `option` for anything else.
int64_t parse_size(const std::string& text, const std::string& option);
std::string format_size(int64_t bytes);  // 4096 -> "4 KiB", 1<<30 -> "1 GiB"

// Powers of two from 1 to max (max included even if not a power of two).
std::vector<int64_t> token_counts(int64_t max_tokens);

// The grouped expert GEMMs' token counts: `tokens`, plus the midpoint 1.5 t between each count t >=
// kGraphTimedMaxRows and 2 t when both are there (midpoints from 384 on: eager calls). Eager calls take cuBLASLt per expert, whose time
// is not linear in the rows between powers of two (Mixtral int8 gate_up per expert at 128 / 256 / 512 /
// 1024 rows: 71 / 143 / 187 / 352 us, H100, session 26 P; a 2515-token chunk ran 12 % under the price
// interpolated between 512 and 1024 rows per expert).
std::vector<int64_t> grouped_token_counts(const std::vector<int64_t>& tokens);

struct SweepPlan {
  std::vector<int64_t> transfer_sizes;   // peer / host / local copies
  std::vector<int64_t> collective_sizes; // NCCL, P2P allowed
  std::vector<int64_t> nop2p_collective_sizes;  // NCCL with NCCL_P2P_DISABLE=1
  std::vector<int64_t> tokens;           // GEMM M dimension
  int samples = 20;                      // kept per point
  int warmup = 3;
  bool quick = false;
  double duty = 1.0;                     // compute tables: share of time the GPU works (--duty)
};

// Validates the options (InputError naming the option) and derives the plan. --quick keeps the
// shape of a full profile with 5 sizes, 5 samples and tokens up to 256, for a smoke run of seconds.
SweepPlan plan_sweep(const ProfileOptions& opts);

// Copies per timed region for a point: enough that one region lasts ~target_s at the expected
// bandwidth (so event resolution and launch gaps vanish), at least 1, at most max_reps.
// The idle time after a compute table's region of `region_s` seconds so the GPU works `duty` of
// the time: region_s (1 / duty - 1), at most 50 ms (beyond that it only lengthens the profile).
double compute_idle_s(double region_s, double duty);

int reps_for(int64_t bytes, double expected_gbps, double target_s = 200e-6, int max_reps = 1000);

}  // namespace peerplan::profiler
