// planner/ is the CPU-only core: it never includes a CUDA / NCCL / NVML / cuBLAS header (it builds
// and runs on hosts without the toolkit; the GPU work goes through planner/validate/gpu_backend.hpp,
// which the profiler implements). This test reads every source file under planner/ and fails
// naming the file and line of any such include. (Includes of profiler/ and the order of the
// planner's modules: tests/layering.)
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

std::regex cuda_header() { return std::regex(R"(^(cuda|cublas|nccl|nvml|curand|cudnn)\w*\.h$|^cuda/)"); }

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "\n  " + x;
  return s;
}

}  // namespace

TEST(PlannerHeaders, NeverCudaNcclOrNvml) {
  const fs::path planner = fs::path(PEERPLAN_SOURCE_DIR) / "planner";
  const auto hits = includes_matching(planner, cuda_header());
  EXPECT_TRUE(hits.empty()) << "planner/ must build without CUDA:" << joined(hits);
}

TEST(PlannerHeaders, TheCheckFindsAnIncludeWhenThereIsOne) {
  // The guard itself: a file with a CUDA include is found (else the test above passes vacuously),
  // with its line; a comment mentioning it is not an include.
  const fs::path dir = fs::temp_directory_path() / ("peerplan-headers-" + std::to_string(::getpid()));
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "sub" / "x.cpp") << "// #include <cuda_runtime.h>\n#include \"planner/core/error.hpp\"\n  #include <nccl.h>\n";
  const auto hits = includes_matching(dir, cuda_header());
  fs::remove_all(dir);
  ASSERT_EQ(hits.size(), 1u) << joined(hits);
  EXPECT_NE(hits[0].find(":3:"), std::string::npos) << "names the line: " << hits[0];
}
