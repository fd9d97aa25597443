#pragma once
// Loads the models named by --model (shipped names or config.json paths); the defaults when empty.
#include <string>
#include <vector>

#include "planner/model/model_config.hpp"

namespace peerplan::profiler {

std::vector<ModelConfig> load_profile_models(const std::vector<std::string>& names);

}  // namespace peerplan::profiler
