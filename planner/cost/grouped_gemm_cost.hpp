#pragma once
// Prices a routed-experts grouped GEMM (OpKind::GroupedGemm, issue 14): one kernel over the
// `touched` experts of a GPU that received rows, `rows` rows in all, the busiest with `max_rows`.
//
// The rule works per expert. w(r) is the time one expert of [k,n] takes on r rows inside a
// grouped launch; a measured point (rows m_i, touched t_i, time s_i) gives w(m_i / t_i) = s_i / t_i.
// Between measured rows-per-expert w is linear, below the smallest it is that point's time (the
// expert's weights must be read however few rows it gets; where the smallest lies above one row per
// expert, as the cuBLAS path's rows do, the line through the two smallest points, between the weight
// read and that point's time), above the largest it grows in proportion (compute-bound; for the gemv
// kernels, busiest expert <= 4 rows, it stays flat: a gemv reads an expert's weights once whatever its
// rows). So at decode (about one row per expert) the time is touched experts
// x one weight read, at prefill it is rows x the per-row FLOPs -- which is what a grouped kernel
// does. The busiest expert is priced on its own rows and the others on the rest:
//   time = w(max_rows) + (touched - 1) w((rows - max_rows) / (touched - 1))
// (equal to touched x w(rows / touched) when balanced, and more when one expert holds extra tiles).
//
// A launch's fixed part c0 is taken out first: the intercept of time against touched experts over
// the decode-like points (<= 2 rows per expert), so time = c0 + the rule, w from (s_i - c0) / t_i;
// at gemv sizes over the op's own kernel's rows where they give it (two touched counts or more).
// Linear interpolation across the weight-bound / compute-bound knee overestimates when points
// are far apart (the synthetic test: 19 % with points 4x apart in tokens at the knee).
//
// Table: the profile's "grouped_gemms" entries of the same (n, k), weight format and path (the grouped
// kernel, or in eager iterations cuBLASLt per expert), this GPU's first, any GPU's otherwise. An
// entry with the op's exact (rows, touched) is Measured; else
// Interpolated between rows-per-expert points, Extrapolated beyond them.
// Without entries of this (n, k), the cost model uses the same rule with the fitted GEMM price
// of one expert (Fitted), or a roofline on the op's touched weight bytes and FLOPs.
#include <functional>
#include <optional>
#include <vector>

#include "planner/compile/op_graph.hpp"
#include "planner/cost/compute_cost.hpp"
#include "planner/model/moe_kernel_class.hpp"
#include "planner/topology/measurements.hpp"

namespace peerplan {

// The busiest-plus-rest rule above for any per-expert price w(rows).
double grouped_time(const std::function<double(double rows)>& per_expert, int64_t rows, int64_t touched,
                    int64_t max_rows);

// Whether the executor runs the op as cuBLASLt calls per expert (an eager iteration's prefill-sized
// groups: moe_cublas_path, planner/model/moe_kernel_class.hpp) rather than the grouped kernel.
bool grouped_op_takes_cublas(const Op& op, double min_gflop = kMoeCublasMinGflop);

// nullopt when the table has no entry of the op's (n, k) and weight format. Rows of the op's path
// (GroupedGemmTime::cublas) only, where the table has any; cublas_min_gflop: the profile's threshold.
// floor_s: one expert's weight read (bytes over HBM bandwidth; 0 unknown), the least an expert costs where
// the op's rows per expert lie below its path's smallest (there the line through the two smallest points).
std::optional<ComputePrice> grouped_gemm_from_table(const std::vector<GroupedGemmTime>& table, int gpu, const Op& op,
                                                    double cublas_min_gflop = kMoeCublasMinGflop, double floor_s = 0);

// The cuBLAS path priced per expert (profiles with an expert_gemms table, session 29): the op's layers'
// mean of the sum, over each touched expert, of one expert's call at its own rows (w(r): the table's
// rows of the op's (n, k) and format, linear between its steps of 32 rows, flat below the smallest,
// in proportion above the largest), plus the path's own part: offsets' copy, synchronisation, the
// gather of gate_up's rows. That part is a + b rows fitted to the grouped table's cuBLAS rows of the
// same (n, k) and format that record their experts' rows (row time - the sum of w over them; their
// median where they are of one row count). nullopt unless the op takes
// the cuBLAS path, carries its experts' rows (Op::group_expert_rows) and both tables have its shape
// (this GPU's rows first, any GPU's otherwise). Why per expert: cuBLASLt changes kernels at per-expert
// row counts (Mixtral int8: faster past 512 rows, slower past 1024), which a mean rows per expert
// interpolated between token counts straddles (docs/moe_routing.md).
std::optional<ComputePrice> cublas_experts_from_table(const std::vector<ExpertGemmTime>& experts,
                                                      const std::vector<GroupedGemmTime>& grouped, int gpu,
                                                      const Op& op, double cublas_min_gflop = kMoeCublasMinGflop);

}  // namespace peerplan
