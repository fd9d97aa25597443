#pragma once
// Helpers shared by the model tests: shipped/test config paths and "config with one key changed".
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "planner/core/error.hpp"
#include "planner/model/model_config.hpp"

namespace peerplan::test {

inline std::string shipped_config(const std::string& name) {
  return std::string(PEERPLAN_SOURCE_DIR) + "/models/llm/" + name + "/config.json";
}
inline const char* kTruncatedConfig = "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"hidden_size\": 4096,\n  \"num_hidden_la";

inline std::string test_data(const std::string& rel) { return std::string(PEERPLAN_TEST_DATA) + "/model/" + rel; }

// Writes `content` to a fresh file in the temp directory and returns its path. Used for inputs
// that are deliberately not valid model configs: tests/data/model/*.json must all be valid configs
// (the fuzz replay test accepts every one of them).
inline std::string temp_file(const std::string& name, const std::string& content) {
  // The pid keeps parallel test processes (ctest -j) from sharing, and half-reading, one file.
  std::string path = (std::filesystem::temp_directory_path() /
                      ("peerplan-model-test-" + std::to_string(::getpid()) + "-" + name)).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  return path;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// Runs `f` and returns the InputError it throws; fails the test if it throws nothing or another type.
template <class F>
InputError expect_input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return InputError("", "", "");
  }
  ADD_FAILURE() << "expected InputError, nothing was thrown";
  return InputError("", "", "");
}

}  // namespace peerplan::test
