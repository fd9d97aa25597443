// The planner's modules depend one way (docs/DEVELOPING.md draws it):
//   core -> model, topology -> plan -> compile -> cost -> strategy -> sim -> search, validate
//        -> report, export -> cli
// A module includes only its own headers and those of modules on an earlier layer (modules on
// one layer, e.g. model and topology, do not include each other), and nothing under planner/
// includes profiler/ (the GPU half). Read from the #include lines of planner/**/*.{hpp,cpp}:
// a violation names file:line, the include and the two layers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// Layer of each module; strategy comes after cost because machine.transfer_time prices with the
// simulator's cost model, and before sim, which never runs a strategy.
const std::map<std::string, int> kLayer = {
    {"core", 0},     {"model", 1},  {"topology", 1}, {"plan", 2},     {"compile", 3}, {"cost", 4},
    {"strategy", 5}, {"sim", 6},    {"search", 7},   {"validate", 7}, {"report", 8},  {"export", 8},
    {"cli", 9},
};

// "planner/cost/x.hpp" -> "cost"; "" when the path is not a module's file.
std::string module_of(const std::string& path) {
  if (path.rfind("planner/", 0) != 0) return "";
  size_t slash = path.find('/', 8);
  return slash == std::string::npos ? "" : path.substr(8, slash - 8);
}

struct Include {
  std::string file;  // relative to the source root
  int line = 0;
  std::string target;
};

std::vector<Include> planner_includes(const fs::path& root) {
  std::vector<Include> out;
  for (const auto& e : fs::recursive_directory_iterator(root / "planner")) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".hpp" && ext != ".cpp")) continue;
    std::ifstream in(e.path());
    std::string text;
    int n = 0;
    while (std::getline(in, text)) {
      ++n;
      size_t p = text.find_first_not_of(" \t");
      if (p == std::string::npos || text.compare(p, 8, "#include") != 0) continue;
      size_t q = text.find('"', p);
      size_t r = q == std::string::npos ? q : text.find('"', q + 1);
      if (r == std::string::npos) continue;  // <system> headers
      out.push_back({fs::relative(e.path(), root).generic_string(), n, text.substr(q + 1, r - q - 1)});
    }
  }
  return out;
}

}  // namespace

TEST(Layering, PlannerModulesIncludeOnlyEarlierLayers) {
  const fs::path root = PEERPLAN_SOURCE_DIR;
  std::vector<Include> incs = planner_includes(root);
  ASSERT_GT(incs.size(), 100u) << "read the includes of " << (root / "planner");
  std::vector<std::string> bad;
  for (const Include& i : incs) {
    const std::string from = module_of(i.file);
    if (!kLayer.count(from)) {
      bad.push_back(i.file + ": module '" + from + "' has no layer: add it to kLayer here and to docs/DEVELOPING.md");
      continue;
    }
    if (i.target.rfind("profiler/", 0) == 0) {
      bad.push_back(i.file + ":" + std::to_string(i.line) + ": includes \"" + i.target +
                    "\": the planner never includes profiler/ (the GPU half implements the planner's interfaces)");
      continue;
    }
    const std::string to = module_of(i.target);
    if (to.empty() || to == from) continue;  // a non-module path (tests/, third party) or its own module
    auto it = kLayer.find(to);
    if (it == kLayer.end()) {
      bad.push_back(i.file + ":" + std::to_string(i.line) + ": includes \"" + i.target + "\" of unknown module '" + to + "'");
    } else if (it->second >= kLayer.at(from)) {
      bad.push_back(i.file + ":" + std::to_string(i.line) + ": " + from + " (layer " + std::to_string(kLayer.at(from)) +
                    ") includes \"" + i.target + "\" of " + to + " (layer " + std::to_string(it->second) +
                    "): a module may include only earlier layers");
    }
  }
  std::string all;
  for (const auto& b : bad) all += "  " + b + "\n";
  EXPECT_TRUE(bad.empty()) << bad.size() << " include(s) against the layering:\n" << all;
}

TEST(Layering, ModuleOfReadsThePath) {
  EXPECT_EQ(module_of("planner/cost/cost_model.hpp"), "cost");
  EXPECT_EQ(module_of("planner/CMakeLists.txt"), "");
  EXPECT_EQ(module_of("profiler/common/summary.hpp"), "");
}
