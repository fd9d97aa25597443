#pragma once
// llama.cpp's layer placement under --split-mode layer, reproduced so the export can check that
// the --tensor-split it writes places each layer where the plan does.
#include <cstdint>
#include <vector>

namespace peerplan::export_detail {

// The --tensor-split values for stages of `stage_layers` decoder layers: the layer counts, the
// last stage's plus one for the output layer llama.cpp offloads as layer n_layer.
std::vector<int64_t> llamacpp_layer_split(const std::vector<int64_t>& stage_layers);
// The device llama.cpp gives each of the n_layer + 1 offloaded layers (all offloaded) for `split`,
// as src/llama-model.cpp computes it in float: upper_bound of layer / (n_layer + 1) in the
// normalised cumulative split.
std::vector<int> llamacpp_layer_devices(const std::vector<int64_t>& split, const std::vector<int64_t>& stage_layers);
// The device the plan gives each layer (the output layer with the last stage).
std::vector<int> llamacpp_plan_devices(const std::vector<int64_t>& stage_layers);

}  // namespace peerplan::export_detail
