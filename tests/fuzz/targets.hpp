#pragma once
// The table of fuzz targets: one row per loader. The replay test (tests/hostile) runs every row
// over its regression inputs (tests/fuzz/regressions/<name>/), its hand-written seeds
// (tests/fuzz/seeds/<name>/) and the shipped files it reads; scripts/fuzz.sh builds the seed
// corpus of fuzz_<name> from the same places.
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.hpp"
#include "tests/fuzz/target_gguf.hpp"
#include "tests/fuzz/target_json_in.hpp"
#include "tests/fuzz/target_lua.hpp"
#include "tests/fuzz/target_machine.hpp"
#include "tests/fuzz/target_model_config.hpp"
#include "tests/fuzz/target_plan.hpp"
#include "tests/fuzz/target_workload.hpp"

namespace peerplan::fuzz {

struct Target {
  const char* name;
  bool (*run)(const std::string& data);  // true: accepted; false: cleanly rejected; else throws
  std::vector<ShippedFiles> shipped;  // shipped inputs must load without even an InputError
};

inline const std::vector<Target>& targets() {
  static const std::vector<Target> table = {
      {"json_in", fuzz_json_in, {{"models", ".json"}}},
      {"model_config", fuzz_model_config, {{"models/llm", "config.json"}, {"tests/data/model", ".json"}}},
      {"workload", fuzz_workload, {{"models/workloads", ".json"}}},
      {"machine", fuzz_machine, {{"models/hardware", ".json"}}},
      {"nccl_xml", fuzz_nccl_xml, {{"models/hardware", ".xml"}, {"tests/data", ".xml"}}},
      {"plan", fuzz_plan, {{"tests/golden", ".plan.json"}, {"tests/data", ".plan.json"}, {"tests/fuzz/seeds/plan", ".plan.json"}}},
      {"lua", fuzz_lua, {{"plugins", ".lua", false}}},
      {"gguf", fuzz_gguf, {{"tests/data/model", ".gguf"}}},
  };
  return table;
}

}  // namespace peerplan::fuzz
