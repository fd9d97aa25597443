#include "profiler/common/rank_layout.hpp"

#include <cstdlib>
#include <map>
#include <set>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"

namespace peerplan::profiler {

nlohmann::json rank_info_to_json(const RankInfo& r) {
  return {{"rank", r.rank}, {"host", r.host}, {"local_rank", r.local_rank}, {"local_size", r.local_size},
          {"device", r.device}, {"device_count", r.device_count}, {"uuid", r.uuid}, {"memory_bytes", r.memory_bytes}};
}

RankInfo rank_info_from_json(const std::string& text, const std::string& origin) {
  json doc = parse_json_text(text, origin);
  JsonIn j(doc, origin);
  RankInfo r;
  r.rank = int(j.nonnegative_int("rank"));
  r.host = j.str("host");
  r.local_rank = int(j.nonnegative_int("local_rank"));
  r.local_size = int(j.positive_int("local_size"));
  r.device = int(j.nonnegative_int("device"));
  r.device_count = int(j.nonnegative_int("device_count"));
  r.uuid = j.str_or("uuid", "");
  r.memory_bytes = j.nonnegative_int_or("memory_bytes", 0);  // absent in profiles made before it
  return r;
}

std::vector<int> RankLayout::ranks_on(int host) const {
  std::vector<int> v;
  for (int r = 0; r < size(); ++r)
    if (host_of[size_t(r)] == host) v.push_back(r);
  return v;
}

RankLayout make_rank_layout(std::vector<RankInfo> ranks, bool split_hosts, bool share_gpus) {
  if (ranks.empty()) throw RuntimeError("MPI layout: no ranks");
  RankLayout L;
  L.shared_gpus = share_gpus;
  L.ranks.resize(ranks.size());
  std::vector<bool> seen(ranks.size(), false);
  for (auto& r : ranks) {
    if (r.rank < 0 || size_t(r.rank) >= ranks.size() || seen[size_t(r.rank)])
      throw RuntimeError("MPI layout: rank " + std::to_string(r.rank) + " is duplicated or out of range 0.." +
                         std::to_string(ranks.size() - 1));
    seen[size_t(r.rank)] = true;
    L.ranks[size_t(r.rank)] = r;
  }
  std::map<std::string, int> host_index;
  std::set<std::pair<std::string, int>> devices;
  std::map<std::string, int> uuid_owner;
  for (const auto& r : L.ranks) {
    std::string host = split_hosts ? r.host + "#" + std::to_string(r.rank) : r.host;
    auto [it, fresh] = host_index.emplace(host, int(L.hosts.size()));
    if (fresh) L.hosts.push_back(host);
    L.host_of.push_back(it->second);
    if (r.device_count <= 0)
      throw RuntimeError("MPI layout: rank " + std::to_string(r.rank) + " on " + r.host +
                         " sees no GPU (check CUDA_VISIBLE_DEVICES and the driver on that host)");
    if (r.device >= r.device_count)
      throw RuntimeError("MPI layout: rank " + std::to_string(r.rank) + " on " + r.host + " would use GPU " +
                         std::to_string(r.device) + " but its host has " + std::to_string(r.device_count) +
                         ": start at most one rank per GPU per host (e.g. mpirun -np <GPUs> on one host, or "
                         "--map-by ppr:<GPUs per host>:node)");
    if (share_gpus) continue;
    if (!devices.insert({r.host, r.device}).second)
      throw RuntimeError("MPI layout: two ranks on " + r.host + " use GPU " + std::to_string(r.device) +
                         ": peerplan needs one rank per GPU");
    if (!r.uuid.empty()) {
      auto [u, first] = uuid_owner.emplace(r.uuid, r.rank);
      if (!first)
        throw RuntimeError("MPI layout: ranks " + std::to_string(u->second) + " and " + std::to_string(r.rank) +
                           " see the same GPU " + r.uuid + " (CUDA_VISIBLE_DEVICES set per rank?): one rank per GPU");
    }
  }
  return L;
}

PairPlan plan_pairs(const RankLayout& L, bool all_pairs) {
  PairPlan p;
  std::map<std::pair<int, int>, std::pair<int, int>> rep;  // (host a, host b) -> measured pair
  for (int i = 0; i < L.size(); ++i)
    for (int j = 0; j < L.size(); ++j) {
      if (i == j) continue;
      if (L.same_host(i, j)) { p.intra.push_back({i, j}); continue; }
      std::pair<int, int> hosts{L.host_of[size_t(i)], L.host_of[size_t(j)]};
      if (all_pairs) { p.inter.push_back({i, j}); continue; }
      std::pair<int, int> leaders{L.leader_of(hosts.first), L.leader_of(hosts.second)};
      rep.emplace(hosts, leaders);
      if (std::pair<int, int>{i, j} == leaders) p.inter.push_back({i, j});
      else p.inferred.push_back({{i, j}, leaders});
    }
  return p;
}

}  // namespace peerplan::profiler
