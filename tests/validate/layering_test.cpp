// The one-way house (docs/DEVELOPING.md): planner/ is the CPU-only core and never includes the
// profiler or a CUDA / NCCL / NVML / cuBLAS header; the executable's entry point
// (profiler/app/main.cpp) is the only code that sees both halves. This test reads every source
// file under planner/ and fails naming the file and line of any such include, so a shortcut from
// the planner into the profiler cannot come back unnoticed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;

namespace {

// Every #include line of the C++ / CUDA sources under `dir` that matches `bad`, as "file:line: text".
std::vector<std::string> includes_matching(const fs::path& dir, const std::regex& bad) {
  std::vector<std::string> hits;
  const std::regex include_line(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".cu" && ext != ".cuh") continue;
    std::ifstream in(e.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (std::regex_search(line, m, include_line) && std::regex_search(m[1].str(), bad))
        hits.push_back(fs::relative(e.path(), PEERPLAN_SOURCE_DIR).string() + ":" + std::to_string(n) + ": " + line);
    }
  }
  return hits;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "\n  " + x;
  return s;
}

}  // namespace

TEST(Layering, PlannerNeverIncludesTheProfiler) {
  const fs::path planner = fs::path(PEERPLAN_SOURCE_DIR) / "planner";
  ASSERT_TRUE(fs::is_directory(planner)) << planner;
  const auto hits = includes_matching(planner, std::regex("^profiler/"));
  EXPECT_TRUE(hits.empty()) << "planner/ includes the profiler (declare what it needs in planner/, e.g. "
                               "planner/validate/gpu_backend.hpp, and let profiler/ implement it):"
                            << joined(hits);
}

TEST(Layering, PlannerNeverIncludesCudaNcclOrNvml) {
  const fs::path planner = fs::path(PEERPLAN_SOURCE_DIR) / "planner";
  const auto hits = includes_matching(planner, std::regex(R"(^(cuda|cublas|nccl|nvml|curand|cudnn)\w*\.h$|^cuda/)"));
  EXPECT_TRUE(hits.empty()) << "planner/ must build without CUDA:" << joined(hits);
}

TEST(Layering, TheCheckFindsAnIncludeWhenThereIsOne) {
  // The guard itself: a file with the forbidden include is found (else the tests above pass vacuously).
  const fs::path dir = fs::temp_directory_path() / ("peerplan-layering-" + std::to_string(::getpid()));
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "sub" / "x.cpp") << "// a comment\n#include \"planner/core/error.hpp\"\n  #include \"profiler/exec/executor.hpp\"\n";
  const auto hits = includes_matching(dir, std::regex("^profiler/"));
  fs::remove_all(dir);
  ASSERT_EQ(hits.size(), 1u) << joined(hits);
  EXPECT_NE(hits[0].find(":3:"), std::string::npos) << "names the line: " << hits[0];
}
