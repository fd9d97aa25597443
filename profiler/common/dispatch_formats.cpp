#include "profiler/common/dispatch_formats.hpp"

#include "planner/sim/power_state.hpp"

namespace peerplan::profiler {

std::vector<std::vector<DType>> dispatch_formats(const std::vector<ModelConfig>& models,
                                                 const std::set<GroupedShapeKey>& shapes) {
  std::vector<std::vector<DType>> out;
  for (const ModelConfig& m : models) {
    std::set<DType> fs;
    if (m.is_moe())
      for (const GroupedShapeKey& s : shapes)
        if (s.gather && s.k == m.hidden && s.n == 2 * m.expert_intermediate && s.experts == m.experts &&
            s.model_experts == m.experts && s.topk == m.experts_per_token)
          if (const auto d = parse_dtype(s.dtype)) fs.insert(*d);
    out.emplace_back(fs.begin(), fs.end());
  }
  return out;
}

std::vector<DType> formats_without_table(const PowerThrottle& t, const ModelConfig& model,
                                         const std::vector<DType>& formats) {
  std::vector<DType> out;
  for (const DType f : formats) {
    bool have = false;
    for (const GroupedThrottle& g : t.grouped) have = have || (throttle_fits_experts(g, model) && g.dtype == dtype_name(f));
    if (!have) out.push_back(f);
  }
  return out;
}

}  // namespace peerplan::profiler
