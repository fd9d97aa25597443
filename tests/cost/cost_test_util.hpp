#pragma once
// Small machines written inline, so each cost test reads as its own closed-form case.
#include <string>

#include "planner/topology/machine.hpp"

namespace peerplan::simtest {

// n GPUs on one PCIe switch (Gen5 x16 = 63 GB/s per direction, nominal), P2P allowed, one socket.
inline Machine pcie_switch_machine(int n, const std::string& p2p = "all") {
  std::string gpus, links;
  for (int i = 0; i < n; ++i) {
    gpus += std::string(i ? "," : "") + R"({"id": )" + std::to_string(i) +
            R"(, "name": "H100", "memory_bytes": 85899345920, "peak_bf16_tflops": 1000, "hbm_gbps": 2000})";
    links += R"({"a": "gpu)" + std::to_string(i) + R"(", "b": "sw0", "kind": "pcie", "gbps": 50, "latency_us": 1},)";
  }
  std::string text = R"({"schema": "peerplan.machine", "version": 1, "name": "test", "origin": "nominal",
    "gpus": [)" + gpus + R"(],
    "nodes": [{"id": "cpu0", "kind": "cpu_socket", "numa": 0, "mem_gbps": 100},
              {"id": "hb0", "kind": "host_bridge"}, {"id": "sw0", "kind": "pcie_switch"}],
    "links": [)" + links + R"(
      {"a": "sw0", "b": "hb0", "kind": "pcie", "gbps": 50, "latency_us": 1},
      {"a": "hb0", "b": "cpu0", "kind": "pcie", "gbps": 50, "latency_us": 1}],
    "p2p": ")" + p2p + R"("})";
  return parse_machine_json(text, "test-machine.json");
}

}  // namespace peerplan::simtest
