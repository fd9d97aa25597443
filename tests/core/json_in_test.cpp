// JSON whose tree would dwarf its text (planner/core/json_in.cpp): refused by its value count.
#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"

namespace peerplan {
namespace {

std::string zeros(size_t n) {
  std::string s = "[0";
  s.reserve(2 * n + 2);
  for (size_t i = 1; i < n; ++i) s += ",0";
  return s + "]";
}

TEST(JsonValueCount, TinyValuesPackedPastTheFloorAreRefused) {
  // 3 M zeros in 6 MB: a value per 2 bytes; as a tree ~23x the text (357 MB for 15.6 MB measured).
  try {
    (void)parse_json_text(zeros(3'000'000), "packed.json");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "packed.json");
    EXPECT_NE(std::string(e.what()).find("more than 1500000 values"), std::string::npos) << e.what();
  }
}

TEST(JsonValueCount, BelowTheFloorAnythingGoes) {
  EXPECT_EQ(parse_json_text(zeros(900'000), "ok.json").size(), 900'000u) << "under 1 M values: never refused";
}

}  // namespace
}  // namespace peerplan
