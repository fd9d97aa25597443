#pragma once
// Shared by test_strategy and test_compile: shipped models, the test machines under
// tests/data/strategy/, and scratch Lua files.
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <unistd.h>

#include "planner/core/files.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan::testing {

inline std::string strategy_data(const std::string& rel) { return std::string(PEERPLAN_TEST_DATA) + "/strategy/" + rel; }

struct ModelFix {
  ModelConfig cfg;
  ModelFigures fig;
};
inline ModelFix model(const std::string& name) {
  ModelFix m;
  m.cfg = load_model_config(find_data_file("models/llm/" + name + "/config.json"));
  m.fig = derive_figures(m.cfg);
  return m;
}

// A test machine by file stem (tests/data/strategy/<stem>.json).
inline std::unique_ptr<Topology> machine(const std::string& stem) {
  return std::make_unique<Topology>(load_machine(strategy_data(stem + ".json")));
}

// Writes a script into a per-process scratch directory and returns its path.
inline std::string write_script(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / ("peerplan-test-strategy-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

}  // namespace peerplan::testing
