#pragma once
// Compute costs: measured GEMM and attention tables first, a roofline otherwise. Pure functions.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/compile/op_graph.hpp"
#include "planner/cost/cost_source.hpp"
#include "planner/topology/measurements.hpp"

namespace peerplan {

struct ComputePrice {
  double seconds = 0;
  CostSource source = CostSource::Nominal;
};

// Roofline: the slower of doing the FLOPs at the peak rate and moving the bytes at the bandwidth.
double roofline_s(double flops, double bytes, double flops_per_s, double bytes_per_s);

// The piecewise-linear rule shared by GEMM (x = m), attention (x = work) and grouped GEMMs (x =
// rows per expert): points (x, t) in any order; exact x: Measured; between: linear, Interpolated;
// above the largest x: proportional to x from it; below the smallest: its time (both Extrapolated).
ComputePrice from_points(std::vector<std::pair<double, double>> pts, double x);

// A GEMM [m,k] x [k,n] from the measured table (entries of `gpu` first; any GPU of the profile if
// that one has no entry for this (n,k)). Only the SAME (n,k) is used: the TP shard shape is what
// the op carries. Exact m: Measured. Between measured m: linear in m, Interpolated. Above: scaled
// by m from the largest point (compute-bound), below: the smallest point's time (weight-read
// bound); both Extrapolated. nullopt when the table has no such (n,k).
// Rows of `dtype` only ("bf16", "fp8", "int8", "int4": the weight format the kernel ran), and of
// `batch` products per call only (1: plain GEMMs; > 1: strided-batched calls, timed as a whole).
std::optional<ComputePrice> gemm_from_table(const std::vector<GemmTime>& table, int gpu, int64_t m, int64_t n,
                                            int64_t k, const std::string& dtype = "bf16", int64_t batch = 1);

// Attention from the measured table: same phase, heads, kv heads and head dim (per GPU); "work"
// = batch * q_len * context. Exact shape: Measured; between: linear in work, Interpolated;
// beyond: proportional above, the smallest time below, Extrapolated. nullopt when no entry matches.
// Only rows whose kv_dtype is the op's (bf16 or fp8 KV cache). sms: the GPU's SM count (0 unknown);
// with it prefill between grid points follows prefill_wave_model (planner/cost/attention_grid.hpp).
std::optional<ComputePrice> attention_from_table(const std::vector<AttentionTime>& table, int gpu, const Op& op,
                                                 int sms = 0);

}  // namespace peerplan
