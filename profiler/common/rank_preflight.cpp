#include "profiler/common/rank_preflight.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "profiler/common/exec_message.hpp"

namespace peerplan::profiler {

namespace {

double gib(int64_t b) { return double(b) / double(int64_t(1) << 30); }

std::string rank_text(const RankInfo& r) {
  return fmt::format("rank {} (host {}, CUDA device {}{})", r.rank, r.host, r.device,
                     r.uuid.empty() ? std::string() : ", " + display_gpu_uuid(r.uuid));
}

// The host the profile recorded for GPU g: an MPI profile lists every rank's host.
std::string profile_host_of(const Machine& profile, int g) {
  const nlohmann::json& m = profile.meta;
  if (m.is_object() && m.contains("mpi") && m["mpi"].is_object() && m["mpi"].contains("ranks") &&
      m["mpi"]["ranks"].is_array() && size_t(g) < m["mpi"]["ranks"].size()) {
    const nlohmann::json& r = m["mpi"]["ranks"][size_t(g)];
    if (r.is_object() && r.contains("host") && r["host"].is_string()) return r["host"].get<std::string>();
  }
  return profile.host;
}

}  // namespace

std::string normalise_gpu_uuid(const std::string& uuid) {
  std::string s = uuid;
  if (s.rfind("GPU-", 0) == 0) s = s.substr(4);
  std::string out;
  for (char c : s)
    if (std::isxdigit(static_cast<unsigned char>(c))) out += char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string display_gpu_uuid(const std::string& uuid) {
  const std::string h = normalise_gpu_uuid(uuid);
  if (h.size() != 32) return uuid;
  return "GPU-" + h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

std::string profile_ranks_mismatch(const Machine& profile, const std::vector<RankInfo>& ranks) {
  if (!profile.measured() || profile.origin != "measured")
    return fmt::format("'{}' is a nominal machine description, not a profile measured on these GPUs", profile.name);
  for (const GpuSpec& g : profile.gpus) {
    if (g.id < 0 || size_t(g.id) >= ranks.size()) continue;  // no rank runs there
    const RankInfo& r = ranks[size_t(g.id)];
    if (!g.uuid.empty() && !r.uuid.empty()) {
      if (normalise_gpu_uuid(g.uuid) != normalise_gpu_uuid(r.uuid))
        return fmt::format("GPU {} of the profile is {} but {} is a different GPU", g.id, display_gpu_uuid(g.uuid),
                           rank_text(r));
      continue;
    }
    const std::string h = profile_host_of(profile, g.id);
    if (h.empty()) return fmt::format("the profile records neither a UUID nor a host for GPU {}", g.id);
    if (h != r.host)
      return fmt::format("GPU {} of the profile was measured on host '{}' but {} runs on '{}'", g.id, h, rank_text(r),
                         r.host);
  }
  return "";
}

std::vector<std::string> preflight_ranks(const Plan& plan, const std::string& plan_file, const Machine& profile,
                                         const std::string& profile_file, const std::vector<RankInfo>& ranks,
                                         const MemoryReport& mem, const PreflightOptions& opt,
                                         const HostInfo& host) {
  std::vector<std::string> warnings;
  if (ranks.empty()) throw InputError(plan_file, "--mpi", "at least one MPI rank");
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i].rank != int(i))
      throw RuntimeError(fmt::format("validate --mpi: rank descriptions out of order (entry {} is rank {})", i,
                                     ranks[i].rank));
  exec::check_plan_ranks(plan.all_gpus(), int(ranks.size()), plan_file);  // too few ranks: the -np to use
  const std::string why = profile_ranks_mismatch(profile, ranks);
  if (!why.empty()) {
    const std::string msg = why + ". A prediction from other GPUs cannot be validated on these: profile them (`mpirun "
                                  "-np N peerplan profile --mpi --out these.json` with the same launch) and pass "
                                  "--machine these.json";
    if (!opt.allow_other_host) throw InputError(profile_file, "host", msg + " (or --allow-other-host to run anyway)");
    warnings.push_back(msg);
  }
  for (std::string& w : executor_mismatches(profile, host, opt)) warnings.push_back(std::move(w));
  if (!mem.fits)
    throw InputError(plan_file, "stages",
                     fmt::format("a plan that fits these GPUs' memory: {}. Use more GPUs, fewer concurrent sequences "
                                 "(workload max_num_seqs) or shorter contexts",
                                 mem.why));
  for (int g : plan.all_gpus()) {
    const RankInfo& r = ranks[size_t(g)];
    if (r.memory_bytes <= 0) continue;  // unknown: the executor's own allocation check decides
    auto need = std::find_if(mem.gpus.begin(), mem.gpus.end(), [&](const GpuMemory& m) { return m.gpu == g; });
    if (need != mem.gpus.end() && need->used() > r.memory_bytes)
      throw InputError(plan_file, "stages",
                       fmt::format("a plan that fits rank {}'s GPU: it needs {:.1f} GiB on GPU {} (weights {:.1f}, "
                                   "KV {:.1f}, activations {:.1f}, reserve {:.1f}) but {} has {:.1f} GiB",
                                   g, gib(need->used()), g, gib(need->weights), gib(need->kv_cache),
                                   gib(need->activations), gib(need->reserve), rank_text(r), gib(r.memory_bytes)));
    if (size_t(g) < profile.gpus.size() && profile.gpus[size_t(g)].memory_bytes > 0 &&
        double(r.memory_bytes) < double(profile.gpus[size_t(g)].memory_bytes) * 0.95)
      warnings.push_back(fmt::format("GPU {} ({}) has {:.1f} GiB but {:.1f} GiB in the profile", g, rank_text(r),
                                     gib(r.memory_bytes), gib(profile.gpus[size_t(g)].memory_bytes)));
  }
  return warnings;
}

}  // namespace peerplan::profiler
