#pragma once
// The human-readable summary `peerplan model` prints: sizes, KV cache, FLOPs, a per-layer table
// with identical layers collapsed, and every weight matrix's shape.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/model_figures.hpp"

namespace peerplan {

// `contexts`: the context lengths at which FLOPs per token are shown (besides context 1).
std::string model_summary_text(const ModelConfig& cfg, const ModelFigures& fig,
                               const std::vector<int64_t>& contexts = {1024, 8192, 32768});

// Unit helpers shared by the summary and other reports: "8.03 B", "14.96 GiB", "16.1 GFLOP".
std::string human_count(double n);
std::string human_bytes(double bytes);
std::string human_flops(double flops);
std::string with_commas(int64_t n);
// Layer indices as compact ranges: {0,1,2,5} -> "0-2,5".
std::string layer_ranges(const std::vector<int64_t>& layers);

}  // namespace peerplan
