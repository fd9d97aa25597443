#pragma once
// Sweep planning: which sizes, token counts and sample counts a profile measures. Pure functions,
// unit-tested on CPU, so the GPU code only executes the plan.
#include <cstdint>
#include <string>
#include <utility>
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

// The rows one routed expert's cuBLASLt matmul is timed at (the expert_gemms table,
// profiler/measure/expert_gemm.cpp): 32, 64, ... up to the busiest expert's rows in any eager call
// (tokens > kGraphTimedMaxRows) of the grouped sweep's token counts `tokens` (grouped_token_counts),
// routed as the compiler counts them (uniform, default seed) at each of the first kExpertRowsLayers
// layers, not only the sweep's layer 0: the pricer sums the curve over every served layer's experts.
// That count rounded up to 32, capped at the tokens (a token picks distinct experts), is the last
// point. `topk` of the model's `experts` routed experts (an EP shard's experts get the same rows, so
// its busiest is at most this). Empty when no token count is eager: decode graphs never take cuBLAS.
inline constexpr int kExpertRowsLayers = 64;
inline constexpr int64_t kExpertRowsStep = 32;
std::vector<int64_t> expert_gemm_rows(const std::vector<int64_t>& tokens, int64_t topk, int64_t experts);

// Rows to time inside the steps of that sweep where cuBLASLt changed kernels: every `fine` rows strictly
// between two timed points whose difference departs from the curve's typical step (the median
// difference) by more than 3 % of the larger time and twice the typical step itself (a drop, or a jump
// several steps tall), the `max_steps` steps that depart most. `timed`: (rows, seconds), rows ascending.
// Why: a kernel change is a discontinuity in rows; between points 32 rows apart the pricer interpolates
// across it, and experts whose rows fall there were priced up to 25 % off (tests/cost/
// cublas_experts_cost_test.cpp: a layer straddling the step 6.7 % high with steps of 32, 0.6 % with 4).
std::vector<int64_t> refine_expert_rows(const std::vector<std::pair<int64_t, double>>& timed, int64_t fine = 4,
                                        size_t max_steps = 6);

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
