#include "profiler/common/registry.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "planner/core/error.hpp"

namespace peerplan::profiler {

const std::vector<MeasurementInfo>& measurement_table() {
  static const std::vector<MeasurementInfo> table = [] {
    std::vector<MeasurementInfo> t;
#define PEERPLAN_ROW(name, group, scope, mpi, models, est, help) \
  t.push_back({#name, group, Scope::scope, MpiRun::mpi, models, est, help, t.size()});
    PEERPLAN_MEASUREMENTS(PEERPLAN_ROW)
#undef PEERPLAN_ROW
    return t;
  }();
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

const char* to_string(MpiRun r) {
  switch (r) {
    case MpiRun::EachRank: return "each rank";
    case MpiRun::RankZero: return "rank 0";
    case MpiRun::Own: return "ranks";  // its own MPI code (IPC, shared memory, NCCL per rank)
    case MpiRun::None: return "-";
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

std::string valid_names(RunMode mode) {
  std::vector<std::string> names;
  std::set<std::string> groups;
  for (const auto& m : measurement_table())
    if (m.runs_in(mode)) {
      names.push_back(m.name);
      groups.insert(m.group);
    }
  return fmt::format("one of the measurement names{} {}; or a group: {} (see `peerplan profile --list`)",
                     mode == RunMode::Mpi ? " that run with --mpi:" : "", fmt::join(names, ", "),
                     fmt::join(groups, ", "));
}

// Expands names and groups into table entries that run in `mode`; throws for unknown names, for
// names without an entry in `mode`, and for groups with no member in `mode`.
std::set<std::string> expand(const std::vector<std::string>& names, const char* option, RunMode mode) {
  std::set<std::string> out;
  for (const auto& n : names) {
    if (const MeasurementInfo* m = find_measurement(n)) {
      if (!m->runs_in(mode))
        throw InputError("", option,
                         "'" + n + "' runs only in a single process (it has no MPI entry): measure it with `peerplan "
                         "profile --only " + n + "` without --mpi; expected " + valid_names(mode));
      out.insert(m->name);
      continue;
    }
    bool group = false, member = false;
    for (const auto& m : measurement_table())
      if (n == m.group) {
        group = true;
        if (m.runs_in(mode)) { out.insert(m.name); member = true; }
      }
    if (!group) throw InputError("", option, "'" + n + "' is unknown; expected " + valid_names(mode));
    if (!member)
      throw InputError("", option, "group '" + n + "' has no measurement that runs with --mpi; expected " + valid_names(mode));
  }
  return out;
}

}  // namespace

std::vector<const MeasurementInfo*> select_measurements(const std::vector<std::string>& only,
                                                        const std::vector<std::string>& skip, RunMode mode) {
  auto only_names = split_names(only);
  auto skip_names = split_names(skip);
  std::set<std::string> keep = expand(only_names, "--only", mode);
  std::set<std::string> drop = expand(skip_names, "--skip", mode);
  std::vector<const MeasurementInfo*> out;
  for (const auto& m : measurement_table()) {
    if (!m.runs_in(mode)) continue;
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
  std::string s = fmt::format("{:<16} {:<11} {:<14} {:<11} {}\n", "NAME", "GROUP", "RUNS ON", "WITH --MPI",
                              "WHAT IT MEASURES");
  for (const auto& m : measurement_table())
    s += fmt::format("{:<16} {:<11} {:<14} {:<11} {}\n", m.name, m.group, to_string(m.scope), to_string(m.mpi),
                     m.description);
  s += "\nSelect with --only NAME|GROUP[,...] and --skip NAME|GROUP[,...]; groups select all their members.\n"
       "With --mpi only the measurements with an entry in WITH --MPI run (a group selects those of its members);\n"
       "naming one marked '-' is an error: run it without --mpi.\n";
  return s;
}

}  // namespace peerplan::profiler
