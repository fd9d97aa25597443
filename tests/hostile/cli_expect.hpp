#pragma once
// Assertions shared by the CLI-level hostile tests: bad input ends with exit code 2, one
// "peerplan: error:" message naming the file and the field, no crash or hang, and an output file
// given with --out is left exactly as it was (no partial file, no temporary left beside it).
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/hostile/hostile_support.hpp"

namespace peerplan::hostile {

inline void expect_input_error(const CliResult& r, const std::string& file, const std::vector<std::string>& mentions) {
  EXPECT_FALSE(r.timed_out) << "hang: " << r.describe();
  EXPECT_EQ(r.signal, 0) << "crashed: " << r.describe();
  EXPECT_EQ(r.exit_code, 2) << "bad input must exit 2: " << r.describe();
  EXPECT_NE(r.err.find("peerplan: error:"), std::string::npos) << r.describe();
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.describe();
  if (!file.empty()) {
    EXPECT_NE(r.err.find(file), std::string::npos) << "the message must name " << file << ": " << r.describe();
  }
  for (const auto& m : mentions) EXPECT_NE(r.err.find(m), std::string::npos) << "the message must mention '" << m << "': " << r.describe();
}

// An --out target holding earlier results: after a failed run it must be byte-identical, and the
// directory must hold nothing else (no partial or temporary file).
class PreviousOutput {
 public:
  explicit PreviousOutput(const ScratchDir& dir) : path_((dir / "out" / "result.json").string()) {
    dir.write("out/result.json", kContent);
  }
  const std::string& path() const { return path_; }
  void expect_untouched() const {
    EXPECT_EQ(read_file(path_), kContent) << "a failed run changed the previous output " << path_;
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path_).parent_path()))
      names.push_back(e.path().filename().string());
    EXPECT_EQ(names, std::vector<std::string>{"result.json"}) << "a partial or temporary file was left beside the output";
  }

 private:
  static constexpr const char* kContent = "{\"previous\": \"results a failed run must not touch\"}\n";
  std::string path_;
};

inline nlohmann::json shipped_json(const std::string& relpath) {
  return nlohmann::json::parse(read_file(std::string(PEERPLAN_SOURCE_DIR) + "/" + relpath));
}

// A copy of `base` with the value at JSON pointer `ptr` replaced (or removed when `value` is
// discarded), serialised; `raw` replaces the value's text verbatim (for 1e999, NaN...).
inline std::string with_value(nlohmann::json base, const std::string& ptr, const nlohmann::json& value) {
  base[nlohmann::json::json_pointer(ptr)] = value;
  return base.dump(1);
}
inline std::string with_raw(const nlohmann::json& base, const std::string& ptr, const std::string& raw) {
  const std::string marker = "\"@@RAW@@\"";
  std::string text = with_value(base, ptr, "@@RAW@@");
  return text.replace(text.find(marker), marker.size(), raw);
}

}  // namespace peerplan::hostile
