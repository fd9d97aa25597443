#pragma once
// The profile file doubles as its own checkpoint: after each measurement the whole machine JSON is
// rewritten atomically with meta.profile = {complete, completed: [names], options}. `--resume FILE`
// loads it, checks it was taken on the same GPUs with the same sweep, keeps its measurements and
// runs only what is not listed as completed. A measurement interrupted mid-way left nothing in the
// file (it is written only when the measurement ends), so it simply runs again.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/topology/machine.hpp"
#include "profiler/common/registry.hpp"
#include "profiler/profile_api.hpp"

namespace peerplan::profiler {

struct CheckpointState {
  bool complete = false;
  std::vector<std::string> completed;   // measurement names, in the order they finished
  nlohmann::json options = nlohmann::json::object();  // the sweep that produced the data
};

CheckpointState read_checkpoint_state(const Machine& m);  // empty state if the file has none
void write_checkpoint_state(Machine& m, const CheckpointState& s);

// Throws InputError naming the checkpoint file when it was taken on other GPUs (count, UUIDs or
// names differ) or with a different sweep (options differ): mixing them would corrupt the curves.
void check_resume_compatible(const Machine& checkpoint, const Machine& now, const nlohmann::json& options_now);

// The selected measurements minus those already completed, order kept.
std::vector<const MeasurementInfo*> remaining_after_resume(const std::vector<const MeasurementInfo*>& selected,
                                                          const std::vector<std::string>& completed);

// What must match for a checkpoint to be resumed: every option that changes the curves' points.
nlohmann::json sweep_fingerprint(const ProfileOptions& o);

// machine_to_json + write_file_atomic (pretty-printed, 1 space indent, so diffs of profiles read well).
void save_profile(const Machine& m, const std::string& path);

}  // namespace peerplan::profiler
