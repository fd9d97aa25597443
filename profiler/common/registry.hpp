#pragma once
// The one table of measurements (as nvbandwidth's createTestcases()): names, groups and
// descriptions live here, CPU-side, so `--list`, `--only` and `--skip` are validated and tested
// without a GPU. Each name has exactly one implementation in profiler/measure/<name>.cu; the GPU
// side checks at start-up that the two lists match.
#include <string>
#include <vector>

namespace peerplan::profiler {

enum class Scope {
  Pair,       // runs on every ordered GPU pair (not applicable with one GPU)
  PerGpu,     // runs on each GPU
  Group,      // runs on GPU groups (full set and every pair); needs >= 2 GPUs
  Once,       // runs once (e.g. on GPU 0)
};

struct MeasurementInfo {
  const char* name;         // --only/--skip name, also the checkpoint key
  const char* group;        // "transfer", "latency", "host", "collective", "compute"
  Scope scope;
  const char* description;  // one line for --list
  double est_seconds;       // rough cost on a 2-GPU host, for the progress bar's ETA before any timing
};

// Every measurement, in the order a profile runs them.
const std::vector<MeasurementInfo>& measurement_table();
const MeasurementInfo* find_measurement(const std::string& name);

// Resolves --only / --skip (names or group names, comma-separated lists allowed) into the ordered
// list of measurements to run. Unknown names throw InputError listing the valid ones;
// giving both --only and --skip is allowed (skip applies after only); an empty result is an error.
std::vector<const MeasurementInfo*> select_measurements(const std::vector<std::string>& only,
                                                        const std::vector<std::string>& skip);

// The `--list` text: a table of name, group, scope and description.
std::string format_measurement_list();

const char* to_string(Scope s);

}  // namespace peerplan::profiler
