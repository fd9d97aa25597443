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

// Two hosts, two GPUs each under one PCIe switch (50 GB/s), a NIC per host, 25 GB/s between them.
inline Machine two_host_machine() {
  std::string gpus, links;
  for (int i = 0; i < 4; ++i) {
    const std::string h = i < 2 ? "A" : "B";
    gpus += std::string(i ? "," : "") + R"({"id": )" + std::to_string(i) +
            R"(, "name": "H100", "memory_bytes": 85899345920, "peak_bf16_tflops": 1000, "hbm_gbps": 2000})";
    links += R"({"a": "gpu)" + std::to_string(i) + R"(", "b": "sw)" + h + R"(", "kind": "pcie", "gbps": 50, "latency_us": 1},)";
  }
  for (const std::string h : {"A", "B"})
    links += R"({"a": "nic)" + h + R"(", "b": "sw)" + h + R"(", "kind": "pcie", "gbps": 50, "latency_us": 1},
               {"a": "sw)" + h + R"(", "b": "hb)" + h + R"(", "kind": "pcie", "gbps": 50, "latency_us": 1},
               {"a": "hb)" + h + R"(", "b": "cpu)" + h + R"(", "kind": "pcie", "gbps": 50, "latency_us": 1},)";
  std::string text = R"({"schema": "peerplan.machine", "version": 1, "name": "two-hosts", "origin": "nominal",
    "gpus": [)" + gpus + R"(],
    "nodes": [{"id": "cpuA", "kind": "cpu_socket", "numa": 0}, {"id": "hbA", "kind": "host_bridge"},
              {"id": "swA", "kind": "pcie_switch"}, {"id": "nicA", "kind": "nic"},
              {"id": "cpuB", "kind": "cpu_socket", "numa": 1}, {"id": "hbB", "kind": "host_bridge"},
              {"id": "swB", "kind": "pcie_switch"}, {"id": "nicB", "kind": "nic"}],
    "links": [)" + links + R"(
      {"a": "nicA", "b": "nicB", "kind": "network", "gbps": 25, "latency_us": 5}],
    "p2p": "same_switch"})";
  Machine m = parse_machine_json(text, "two-hosts.json");
  // Measured: a peer copy curve of 0 -> 1 (12 us + bytes / 40 GB/s) and the network curve of the
  // host pair, sampled on 0 -> 2 only (as an MPI profile does: 30 us + bytes / 10 GB/s).
  auto curve = [](int src, int dst, const std::string& mode, double alpha, double Bps) {
    TransferCurve c{src, dst, mode, "", {}};
    for (int64_t b = 4096; b <= (int64_t(1) << 28); b *= 4) c.points.push_back({b, compute_stats({alpha + double(b) / Bps})});
    return c;
  };
  m.measurements = Measurements{};
  m.measurements->transfers = {curve(0, 1, "p2p_ce", 12e-6, 40e9), curve(0, 2, "net_nccl", 30e-6, 10e9)};
  return m;
}

}  // namespace peerplan::simtest
