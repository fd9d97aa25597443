#pragma once
// The buffers of a peer-memory all-reduce group (issue 17), allocated and registered once, as
// engines do: each rank's input buffer, scratch and signal block in its own GPU's memory, and the
// table of every rank's pointers as each rank sees them. In one process (one rank per GPU here,
// peer access enabled between all of them) or, under MPI, through CUDA IPC (profiler/mpi).
#include <cstdint>
#include <memory>
#include <vector>

#include "profiler/gpu/raii.hpp"
#include "profiler/kernels/peer_allreduce.hpp"

namespace peerplan::gpu {

// Peer access from every device of `devs` to every other (already enabled is fine).
void enable_peer_access_all(const std::vector<int>& devs);

// One rank's own allocations: data, scratch, out (bytes each) and its zeroed signal block.
struct PeerArLocal {
  DeviceBuffer data, scratch, out, signal;
  PeerArLocal(int device, int64_t bytes);
};

// All ranks in this process: `devs[r]` is rank r's GPU (distinct GPUs with peer access, or the
// same GPU for the emulated self-test).
class PeerArGroup {
 public:
  PeerArGroup(const std::vector<int>& devs, int64_t bytes);
  int size() const { return int(devs_.size()); }
  int device(int r) const { return devs_[size_t(r)]; }
  PeerArLocal& local(int r) { return *locals_[size_t(r)]; }
  // The pointer table (the same for every rank here: one address space with peer access).
  const kernels::PeerArRanks& ranks() const { return ranks_; }
  // Writes rank r's start values (profiler/common/peer_allreduce_plan.hpp) into its data buffer.
  void fill_inputs(int64_t bytes);
  // Mismatching elements of rank r's output against the expected sum over `bytes`.
  int64_t mismatches(int r, int64_t bytes) const;

 private:
  std::vector<int> devs_;
  std::vector<std::unique_ptr<PeerArLocal>> locals_;
  kernels::PeerArRanks ranks_;
};

}  // namespace peerplan::gpu
