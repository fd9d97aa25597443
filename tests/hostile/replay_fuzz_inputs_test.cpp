// Replays every fuzz input that matters through the very code the fuzzers run (tests/fuzz/targets.hpp):
//  - tests/fuzz/regressions/<target>/: inputs that once broke a loader. They must now be either
//    accepted or rejected with an InputError naming the file; never another exception or a crash.
//  - tests/fuzz/seeds/<target>/: hand-written hostile seeds, same rule.
//  - the shipped files a target reads (models/..., plugins/...): these must be ACCEPTED.
// Under scripts/sanitize.sh this runs with ASan + UBSan, so memory errors and UB fail it too.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/fuzz/targets.hpp"
#include "tests/hostile/hostile_support.hpp"

namespace fs = std::filesystem;
using peerplan::fuzz::Target;

namespace peerplan::fuzz {
inline void PrintTo(const Target& t, std::ostream* os) { *os << t.name; }  // readable test names
}  // namespace peerplan::fuzz

namespace {

const fs::path kSource = PEERPLAN_SOURCE_DIR;

std::vector<fs::path> files_under(const fs::path& dir, const std::string& suffix = "", bool recursive = true) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  auto take = [&](const fs::directory_entry& e) {
    if (!e.is_regular_file()) return;
    const std::string name = e.path().filename().string();
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(e.path());
  };
  if (recursive) {
    for (const auto& e : fs::recursive_directory_iterator(dir)) take(e);
  } else {
    for (const auto& e : fs::directory_iterator(dir)) take(e);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Runs one input; returns "" if it behaved, else what went wrong.
std::string replay(const Target& t, const fs::path& file, bool must_accept) {
  const std::string data = peerplan::hostile::read_file(file.string());
  try {
    bool accepted = t.run(data);
    if (must_accept && !accepted) return "a shipped file was rejected by the loader";
    return "";
  } catch (const std::exception& e) {
    return std::string("threw instead of a clean InputError: ") + e.what();
  }
}

class Replay : public ::testing::TestWithParam<Target> {};

TEST_P(Replay, RegressionInputsAreAcceptedOrCleanlyRejected) {
  const Target& t = GetParam();
  const auto files = files_under(kSource / "tests/fuzz/regressions" / t.name);
  for (const auto& f : files) EXPECT_EQ(replay(t, f, false), "") << "input: " << f;
}

TEST_P(Replay, HandWrittenSeedsAreAcceptedOrCleanlyRejected) {
  const Target& t = GetParam();
  for (const auto& f : files_under(kSource / "tests/fuzz/seeds" / t.name)) EXPECT_EQ(replay(t, f, false), "") << "input: " << f;
}

TEST_P(Replay, ShippedFilesAreAccepted) {
  const Target& t = GetParam();
  size_t n = 0;
  for (const auto& src : t.shipped)
    for (const auto& f : files_under(kSource / src.dir, src.suffix, src.recursive)) {
      ++n;
      EXPECT_EQ(replay(t, f, true), "") << "shipped file: " << f;
    }
  // A target with no shipped inputs would fuzz from hand-written seeds alone: the table must say where they are.
  EXPECT_GT(n, 0u) << "no shipped inputs found for '" << t.name << "' under the directories its table row names";
}

INSTANTIATE_TEST_SUITE_P(FuzzTargets, Replay, ::testing::ValuesIn(peerplan::fuzz::targets()),
                         [](const auto& info) { return std::string(info.param.name); });

// Every target in the table has a libFuzzer entry point, and every entry point is in the table,
// so nothing is fuzzed without being replayed or replayed without being fuzzed.
TEST(FuzzTable, EveryTargetHasAnEntryPointAndViceVersa) {
  std::vector<std::string> entry_points, table;
  for (const auto& f : files_under(kSource / "tests/fuzz", ".cpp")) {
    std::string stem = f.stem().string();
    if (f.parent_path() == kSource / "tests/fuzz" && stem.rfind("fuzz_", 0) == 0) entry_points.push_back(stem.substr(5));
  }
  for (const auto& t : peerplan::fuzz::targets()) table.push_back(t.name);
  std::sort(table.begin(), table.end());
  EXPECT_EQ(entry_points, table);
}

}  // namespace
