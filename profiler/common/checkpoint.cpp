#include "profiler/common/checkpoint.hpp"

#include "profiler/common/profile_models.hpp"

#include <algorithm>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"

namespace peerplan::profiler {

CheckpointState read_checkpoint_state(const Machine& m) {
  CheckpointState s;
  if (!m.meta.contains("profile") || !m.meta["profile"].is_object()) return s;
  const auto& p = m.meta["profile"];
  if (p.contains("complete") && p["complete"].is_boolean()) s.complete = p["complete"].get<bool>();
  if (p.contains("completed") && p["completed"].is_array())
    for (const auto& n : p["completed"])
      if (n.is_string()) s.completed.push_back(n.get<std::string>());
  if (p.contains("options")) s.options = p["options"];
  return s;
}

void write_checkpoint_state(Machine& m, const CheckpointState& s) {
  m.meta["profile"] = {{"complete", s.complete}, {"completed", s.completed}, {"options", s.options}};
}

void check_resume_compatible(const Machine& cp, const Machine& now, const nlohmann::json& options_now) {
  const std::string file = cp.source_file;
  if (cp.gpu_count() != now.gpu_count())
    throw InputError(file, "/gpus", "a checkpoint of this host's " + std::to_string(now.gpu_count()) +
                                        " GPUs; it holds " + std::to_string(cp.gpu_count()) +
                                        " (start a fresh profile without --resume)");
  for (int i = 0; i < now.gpu_count(); ++i) {
    const auto& a = cp.gpus[size_t(i)];
    const auto& b = now.gpus[size_t(i)];
    bool same = (!a.uuid.empty() && !b.uuid.empty()) ? a.uuid == b.uuid : a.name == b.name;
    if (!same)
      throw InputError(file, "/gpus/" + std::to_string(i),
                       "GPU " + std::to_string(i) + " to be " + (b.uuid.empty() ? b.name : b.uuid) +
                           " as on this host; the checkpoint has " + (a.uuid.empty() ? a.name : a.uuid) +
                           " (check CUDA_VISIBLE_DEVICES, or start a fresh profile)");
  }
  auto st = read_checkpoint_state(cp);
  if (!st.options.empty() && st.options != options_now)
    throw InputError(file, "/meta/profile/options",
                     "the same sweep options as this run (" + options_now.dump() + "); the checkpoint used " +
                         st.options.dump() + " (rerun with the same options, or start a fresh profile)");
}

std::vector<const MeasurementInfo*> remaining_after_resume(const std::vector<const MeasurementInfo*>& selected,
                                                          const std::vector<std::string>& completed) {
  std::vector<const MeasurementInfo*> out;
  for (const auto* m : selected)
    if (std::find(completed.begin(), completed.end(), m->name) == completed.end()) out.push_back(m);
  return out;
}

void save_profile(const Machine& m, const std::string& path) { write_file_atomic(path, machine_to_json(m).dump(1) + "\n"); }

nlohmann::json sweep_fingerprint(const ProfileOptions& o) {
  return {{"quick", o.quick}, {"min_bytes", o.min_bytes}, {"max_bytes", o.max_bytes}, {"coll_max_bytes", o.coll_max_bytes},
          {"nop2p_coll_max_bytes", o.nop2p_coll_max_bytes}, {"samples", o.samples}, {"warmup", o.warmup}, {"duty", o.duty},
          {"models", o.models.empty() ? default_profile_models() : o.models}, {"max_tokens", o.max_tokens},
          {"all_groups", o.all_groups}};
}

}  // namespace peerplan::profiler
