#pragma once
// Shipped files the plan and Lua targets run against, loaded once per process: a dense and an MoE
// model, an 8-GPU machine and a measured 2-GPU profile, so a fuzzed plan or script meets real
// shapes and a real topology.
#include <memory>
#include <string>

#include "planner/core/files.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan::fuzz {

struct ModelFixture {
  ModelConfig cfg;
  ModelFigures fig;
};

inline const ModelFixture& dense_model() {
  static const ModelFixture m = [] {
    ModelFixture f;
    f.cfg = load_model_config(find_data_file("models/llm/llama-3.1-8b/config.json"));
    f.fig = derive_figures(f.cfg);
    return f;
  }();
  return m;
}

inline const ModelFixture& moe_model() {
  static const ModelFixture m = [] {
    ModelFixture f;
    f.cfg = load_model_config(find_data_file("models/llm/mixtral-8x7b/config.json"));
    f.fig = derive_figures(f.cfg);
    return f;
  }();
  return m;
}

inline const Topology& eight_gpus() {
  static const std::unique_ptr<Topology> t =
      std::make_unique<Topology>(load_machine(find_data_file("models/hardware/hgx-h100x8.json")));
  return *t;
}

// The shipped 2xH200 NVLink profile: measured transfer curves (so machine.transfer_time prices from
// measurements, not only nominal figures) and a small machine table (the Lua target pushes it per input).
inline const Topology& two_gpus_measured() {
  static const std::unique_ptr<Topology> t =
      std::make_unique<Topology>(load_machine(find_data_file("models/hardware/h200x2-nvlink.json")));
  return *t;
}

}  // namespace peerplan::fuzz
