// The models whose GEMM and attention shapes a profile times (--model; default: the shipped three
// the design brief names). CPU-side so option errors are tested without a GPU.
#include "planner/model/model_config.hpp"
#include "profiler/common/profile_models.hpp"
#include "profiler/profile_api.hpp"

namespace peerplan::profiler {

std::vector<std::string> default_profile_models() { return {"llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b"}; }

std::vector<ModelConfig> load_profile_models(const std::vector<std::string>& names) {
  std::vector<ModelConfig> out;
  for (const auto& n : names.empty() ? default_profile_models() : names) out.push_back(load_model_config(resolve_model_path(n)));
  return out;
}

}  // namespace peerplan::profiler
