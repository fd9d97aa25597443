#pragma once
// Shared helpers for the topology tests: small machines written inline, and error checks that
// the message names the file and the field.
#include <string>

#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/topology/machine.hpp"

namespace peerplan::test {

inline std::string data(const std::string& rel) { return std::string(PEERPLAN_TEST_DATA) + "/topology/" + rel; }
inline std::string shipped(const std::string& name) {
  return std::string(PEERPLAN_SOURCE_DIR) + "/models/hardware/" + name + ".json";
}

// A 4-GPU, 1-socket machine: gpu0,gpu1 under sw0, gpu2,gpu3 under sw1, both switches on hb0.
inline nlohmann::json small_machine() {
  return nlohmann::json::parse(R"({
    "schema": "peerplan.machine", "version": 1, "name": "small",
    "gpus": [
      {"id": 0, "name": "G", "memory_bytes": 1000},
      {"id": 1, "name": "G", "memory_bytes": 1000},
      {"id": 2, "name": "G", "memory_bytes": 1000},
      {"id": 3, "name": "G", "memory_bytes": 1000}
    ],
    "nodes": [
      {"id": "cpu0", "kind": "cpu_socket", "numa": 0, "mem_gbps": 100},
      {"id": "hb0", "kind": "host_bridge"},
      {"id": "sw0", "kind": "pcie_switch"},
      {"id": "sw1", "kind": "pcie_switch"}
    ],
    "links": [
      {"a": "gpu0", "b": "sw0", "kind": "pcie", "pcie_gen": 4, "pcie_width": 16},
      {"a": "gpu1", "b": "sw0", "kind": "pcie", "pcie_gen": 4, "pcie_width": 16},
      {"a": "gpu2", "b": "sw1", "kind": "pcie", "pcie_gen": 4, "pcie_width": 16},
      {"a": "gpu3", "b": "sw1", "kind": "pcie", "pcie_gen": 4, "pcie_width": 16},
      {"a": "sw0", "b": "hb0", "kind": "pcie", "gbps": 20},
      {"a": "sw1", "b": "hb0", "kind": "pcie", "gbps": 20},
      {"a": "hb0", "b": "cpu0", "kind": "pcie", "gbps": 40}
    ]
  })");
}

inline Machine parse(const nlohmann::json& j, const std::string& file = "test.json") {
  return parse_machine_json(j.dump(), file);
}

// Expects parse to fail with an InputError naming `file` and `field`, and mentioning `words`.
inline void expect_rejected(const nlohmann::json& j, const std::string& field, const std::string& words) {
  try {
    parse(j, "bad-machine.json");
    ADD_FAILURE() << "expected an InputError for field " << field;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "bad-machine.json");
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad-machine.json"), std::string::npos) << e.what();
  }
}

}  // namespace peerplan::test
