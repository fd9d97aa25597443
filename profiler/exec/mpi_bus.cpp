#include "profiler/exec/mpi_bus.hpp"

#include <algorithm>
#include <cstring>

#include "planner/core/error.hpp"
#include "profiler/mpi/comm.hpp"

namespace peerplan::exec {

namespace {
constexpr int kIdTag = 7101;  // NCCL unique ids (point to point; iteration messages are broadcasts)
}

profiler::RankInfo describe_mpi_rank() {
  profiler::RankInfo r;
  r.rank = mpi::world_rank();
  r.host = mpi::processor_name();
  r.local_rank = mpi::local_rank();
  r.local_size = mpi::local_size();
  r.device = r.local_rank;
  return r;
}

MpiBus::MpiBus(const profiler::RankInfo& mine, bool share_gpus) : rank_(mine.rank), device_(mine.device) {
  const auto all = mpi::allgather_strings(profiler::rank_info_to_json(mine).dump());
  std::vector<profiler::RankInfo> infos;
  for (size_t r = 0; r < all.size(); ++r)
    infos.push_back(profiler::rank_info_from_json(all[r], "rank " + std::to_string(r) + "'s description"));
  layout_ = profiler::make_rank_layout(std::move(infos), false, share_gpus);
}

void MpiBus::share_id(void* id, size_t bytes, const std::vector<int>& group) {
  if (group.empty() || std::find(group.begin(), group.end(), rank_) == group.end())
    throw RuntimeError("executor: rank " + std::to_string(rank_) + " asked for the NCCL id of a group it is not in");
  if (group.front() == rank_) {
    for (size_t i = 1; i < group.size(); ++i) mpi::send_bytes(id, bytes, group[i], kIdTag);
  } else {
    mpi::recv_bytes(id, bytes, group.front(), kIdTag);
  }
}

void MpiBus::post(const ExecMessage& m) {
  if (rank_ != 0) throw RuntimeError("executor: only rank 0 posts iterations");
  std::vector<int64_t> v = encode_message(m);
  int64_t n = int64_t(v.size());
  mpi::bcast_bytes(&n, sizeof n, 0);
  mpi::bcast_bytes(v.data(), v.size() * sizeof(int64_t), 0);
}

ExecMessage MpiBus::receive() {
  if (rank_ == 0) throw RuntimeError("executor: rank 0 posts iterations, it receives none");
  int64_t n = 0;
  mpi::bcast_bytes(&n, sizeof n, 0);
  if (n < 0 || n > (int64_t(1) << 24)) throw RuntimeError("executor message from rank 0: bad length " + std::to_string(n));
  std::vector<int64_t> v(size_t(n), 0);
  mpi::bcast_bytes(v.data(), v.size() * sizeof(int64_t), 0);
  return decode_message(v);
}

int64_t MpiBus::min_over_ranks(int64_t v) { return -int64_t(mpi::allreduce_max(-double(v))); }

std::vector<double> MpiBus::sum_on_root(const std::vector<double>& mine) {
  std::string bytes(mine.size() * sizeof(double), '\0');
  if (!mine.empty()) std::memcpy(bytes.data(), mine.data(), bytes.size());
  const auto parts = mpi::gather_strings(bytes, 0);
  if (rank_ != 0) return {};
  std::vector<double> sum(mine.size(), 0.0);
  for (size_t r = 0; r < parts.size(); ++r) {
    if (parts[r].size() != bytes.size())
      throw RuntimeError("executor: rank " + std::to_string(r) + " timed " + std::to_string(parts[r].size() / sizeof(double)) +
                         " ops, rank 0 " + std::to_string(mine.size()));
    for (size_t i = 0; i < sum.size(); ++i) {
      double x = 0;
      std::memcpy(&x, parts[r].data() + i * sizeof(double), sizeof x);
      sum[i] += x;
    }
  }
  return sum;
}

void MpiBus::barrier() { mpi::barrier(); }

}  // namespace peerplan::exec
