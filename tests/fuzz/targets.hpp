#pragma once
// The table of fuzz targets: one row per loader. The replay test (tests/hostile) runs every row
// over its regression inputs (tests/fuzz/regressions/<name>/), its hand-written seeds
// (tests/fuzz/seeds/<name>/) and the shipped files it reads; scripts/fuzz.sh builds the seed
// corpus of fuzz_<name> from the same places.
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.hpp"
#include "tests/fuzz/target_json_in.hpp"

namespace peerplan::fuzz {

struct Target {
  const char* name;
  bool (*run)(const std::string& data);  // true: accepted; false: cleanly rejected; else throws
  std::vector<ShippedFiles> shipped;  // shipped inputs must load without even an InputError
};

inline const std::vector<Target>& targets() {
  static const std::vector<Target> table = {
      {"json_in", fuzz_json_in, {{"models", ".json"}}},
  };
  return table;
}

}  // namespace peerplan::fuzz
