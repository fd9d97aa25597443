#include "planner/export/llamacpp_split.hpp"

#include <algorithm>

namespace peerplan::export_detail {

std::vector<int64_t> llamacpp_layer_split(const std::vector<int64_t>& stage_layers) {
  std::vector<int64_t> v = stage_layers;
  if (!v.empty()) ++v.back();
  return v;
}

std::vector<int> llamacpp_layer_devices(const std::vector<int64_t>& split, const std::vector<int64_t>& stage_layers) {
  int64_t n_layer = 0;
  for (int64_t n : stage_layers) n_layer += n;
  // As llama.cpp: float cumulative sums, normalised by the total, then upper_bound per layer.
  std::vector<float> cum(split.size());
  float sum = 0;
  for (size_t i = 0; i < split.size(); ++i) cum[i] = (sum += float(split[i]));
  for (float& c : cum) c /= sum;
  const int act = int(n_layer + 1);
  std::vector<int> dev;
  for (int il = 0; il <= n_layer; ++il) {
    auto it = std::upper_bound(cum.begin(), cum.end(), float(il) / float(act));
    dev.push_back(int(std::min<size_t>(size_t(it - cum.begin()), split.size() - 1)));
  }
  return dev;
}

std::vector<int> llamacpp_plan_devices(const std::vector<int64_t>& stage_layers) {
  std::vector<int> dev;
  for (size_t s = 0; s < stage_layers.size(); ++s) dev.insert(dev.end(), size_t(stage_layers[s]), int(s));
  dev.push_back(int(stage_layers.size()) - 1);  // the output layer
  return dev;
}

}  // namespace peerplan::export_detail
