#pragma once
// RankBus over MPI (profiler/mpi/comm.hpp): rank 0 broadcasts each engine call to the other ranks;
// NCCL unique ids travel from a group's first member to the others by MPI send/recv. MPI is the
// launcher and the bootstrap only: activations, collectives and completion go over NCCL.
// CPU-only (no CUDA): built into peerplan_mpi and tested under mpirun in tests/mpi.
#include "profiler/common/exec_message.hpp"
#include "profiler/common/rank_layout.hpp"

namespace peerplan::exec {

// This rank's description without its GPU part (device = local rank, device_count and uuid are
// the caller's to fill in from CUDA).
profiler::RankInfo describe_mpi_rank();

class MpiBus : public RankBus {
 public:
  // Collective: gathers every rank's description and checks one rank per GPU (make_rank_layout
  // throws RuntimeError on every rank alike when two ranks share a GPU or a host has too few).
  // share_gpus (PEERPLAN_MPI_SHARE_GPU=1, smoke tests on a one-GPU machine): ranks may share a GPU.
  explicit MpiBus(const profiler::RankInfo& mine, bool share_gpus = false);
  int rank() const override { return rank_; }
  int ranks() const override { return layout_.size(); }
  int device() const override { return device_; }
  const profiler::RankLayout& layout() const { return layout_; }
  void share_id(void* id, size_t bytes, const std::vector<int>& group) override;
  void post(const ExecMessage& m) override;
  ExecMessage receive() override;
  int64_t min_over_ranks(int64_t v) override;
  std::vector<double> sum_on_root(const std::vector<double>& mine) override;
  void barrier() override;

 private:
  int rank_ = 0, device_ = 0;
  profiler::RankLayout layout_;
};

}  // namespace peerplan::exec
