#include "profiler/common/registry.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "planner/core/error.hpp"

namespace peerplan::profiler {

const std::vector<MeasurementInfo>& measurement_table() {
  // Order matters: cheap checks first, so a crash in a late, long measurement loses little
  // (a checkpoint is written after each entry).
  static const std::vector<MeasurementInfo> table = {
      {"launch_overhead", "compute", Scope::PerGpu, "empty-kernel launch overhead (back-to-back launches)", 0.2},
      {"hbm", "compute", Scope::PerGpu, "device-local copy bandwidth, cudaMemcpyAsync D2D (HBM read+write)", 0.5},
      {"h2d_d2h", "host", Scope::PerGpu, "pinned host -> device and device -> host, copy engine", 1.5},
      {"p2p_ce", "transfer", Scope::Pair, "peer copy by copy engine, one direction (cudaMemcpyPeerAsync, peer access on)", 1.0},
      {"p2p_ce_bidir", "transfer", Scope::Pair, "peer copy by copy engine, both directions at once (two streams)", 1.0},
      {"p2p_sm", "transfer", Scope::Pair, "peer access by an SM kernel: dst reads src's memory, src writes dst's memory", 1.5},
      {"nop2p_runtime", "transfer", Scope::Pair, "cudaMemcpyPeerAsync with peer access NOT enabled (the runtime stages it)", 2.0},
      {"host_staged", "transfer", Scope::Pair, "D2H + H2D via pinned host memory, chunked, two streams; NUMA-local and remote", 3.0},
      {"latency_ce", "latency", Scope::Pair, "copy-engine latency of a 4-byte peer copy", 0.3},
      {"latency_sm", "latency", Scope::Pair, "SM latency: dependent loads through peer memory (nvbandwidth), and a ping-pong (one-way)", 0.3},
      {"nccl", "collective", Scope::Group, "NCCL all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, broadcast", 6.0},
      {"nccl_nop2p", "collective", Scope::Group, "the same collectives with NCCL_P2P_DISABLE=1 (child process)", 10.0},
      {"gemm", "compute", Scope::Once, "bf16 cuBLASLt GEMMs of the models' shapes (TP 1..N, tokens 1..8192)", 10.0},
      {"attention", "compute", Scope::Once, "attention decode/prefill kernels of the executor over batch x context", 4.0},
  };
  return table;
}

const MeasurementInfo* find_measurement(const std::string& name) {
  for (const auto& m : measurement_table())
    if (name == m.name) return &m;
  return nullptr;
}

const char* to_string(Scope s) {
  switch (s) {
    case Scope::Pair: return "each GPU pair";
    case Scope::PerGpu: return "each GPU";
    case Scope::Group: return "GPU groups";
    case Scope::Once: return "GPU 0";
  }
  return "?";
}

namespace {

std::vector<std::string> split_names(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    size_t start = 0;
    while (start <= a.size()) {
      size_t comma = a.find(',', start);
      std::string item = a.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      // trim spaces so "--only 'p2p_ce, hbm'" works
      item.erase(0, item.find_first_not_of(" \t"));
      item.erase(item.find_last_not_of(" \t") + 1);
      if (!item.empty()) out.push_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

std::string valid_names() {
  std::string s;
  std::set<std::string> groups;
  for (const auto& m : measurement_table()) {
    s += (s.empty() ? "" : ", ") + std::string(m.name);
    groups.insert(m.group);
  }
  std::string g;
  for (const auto& x : groups) g += (g.empty() ? "" : ", ") + x;
  return "one of the measurement names " + s + "; or a group: " + g + " (see `peerplan profile --list`)";
}

// Expands a name or group into table entries; throws for unknown names.
std::set<std::string> expand(const std::vector<std::string>& names, const char* option) {
  std::set<std::string> out;
  for (const auto& n : names) {
    bool hit = false;
    for (const auto& m : measurement_table())
      if (n == m.name || n == m.group) { out.insert(m.name); hit = true; }
    if (!hit) throw InputError("", option, "'" + n + "' is unknown; expected " + valid_names());
  }
  return out;
}

}  // namespace

std::vector<const MeasurementInfo*> select_measurements(const std::vector<std::string>& only,
                                                        const std::vector<std::string>& skip) {
  auto only_names = split_names(only);
  auto skip_names = split_names(skip);
  std::set<std::string> keep = expand(only_names, "--only");
  std::set<std::string> drop = expand(skip_names, "--skip");
  std::vector<const MeasurementInfo*> out;
  for (const auto& m : measurement_table()) {
    if (!only_names.empty() && !keep.count(m.name)) continue;
    if (drop.count(m.name)) continue;
    out.push_back(&m);
  }
  if (out.empty())
    throw InputError("", only_names.empty() ? "--skip" : "--only",
                     "at least one measurement left to run after --only/--skip; these options removed all of them");
  return out;
}

std::string format_measurement_list() {
  std::string s = fmt::format("{:<16} {:<11} {:<14} {}\n", "NAME", "GROUP", "RUNS ON", "WHAT IT MEASURES");
  for (const auto& m : measurement_table())
    s += fmt::format("{:<16} {:<11} {:<14} {}\n", m.name, m.group, to_string(m.scope), m.description);
  s += "\nSelect with --only NAME|GROUP[,...] and --skip NAME|GROUP[,...]; groups select all their members.\n";
  return s;
}

}  // namespace peerplan::profiler
