#pragma once
// The executor under MPI (`mpirun -np N peerplan validate --mpi`), CPU side: what rank 0 (the
// scheduler) tells the other ranks before each engine call, how that travels (a flat int64
// message), and the bus the engine talks through. No CUDA, no MPI here: the MPI implementation
// of RankBus is profiler/exec/mpi_bus.cpp, and everything in this header is tested without GPUs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace peerplan::exec {

// One sequence's part of an iteration, as the kernels need it.
struct SeqRun {
  int slot = 0;         // KV cache slot
  int new_tokens = 0;   // prefill chunk length, or 1 for decode
  int context = 0;      // tokens attended after this iteration's tokens are added
  bool prefill = false;
  bool operator==(const SeqRun&) const = default;
};

// What every rank does next, in the order rank 0 does it (all ranks then enqueue their own GPU's
// ops of the same iteration, so NCCL calls pair up in the same order on every communicator).
enum class ExecCommand : int64_t {
  Launch = 1,    // Engine::launch(seqs, slot)
  TimeOps = 2,   // Engine::time_ops(seqs), then the per-op times are summed on rank 0
  WarmGemm = 3,  // Engine::warm_gemm_plans(a = max tokens, b = max sequences)
  Stop = 4,      // serving is over: leave the follower loop
};

struct ExecMessage {
  ExecCommand cmd = ExecCommand::Stop;
  int64_t slot = 0;
  int64_t a = 0, b = 0;
  std::vector<SeqRun> seqs;
  bool operator==(const ExecMessage&) const = default;
};

// Flat form: [magic, cmd, slot, a, b, n, then n x (slot, new_tokens, context, prefill)].
std::vector<int64_t> encode_message(const ExecMessage& m);
// Throws RuntimeError naming what is wrong (a truncated or foreign buffer, an unknown command, a
// sequence with impossible numbers): a follower never runs an iteration it misread.
ExecMessage decode_message(const int64_t* data, size_t n);
inline ExecMessage decode_message(const std::vector<int64_t>& v) { return decode_message(v.data(), v.size()); }

// The plan against the launch: rank r owns global GPU r, so a plan may use GPUs 0..ranks-1 only,
// and must use GPU 0 (rank 0 runs the scheduler and learns on its GPU when an iteration is done).
// Throws InputError naming `plan_origin` and saying how to launch.
void check_plan_ranks(const std::vector<int>& plan_gpus, int ranks, const std::string& plan_origin);

// How the engine reaches the other ranks. One instance per process, for the whole run.
class RankBus {
 public:
  virtual ~RankBus() = default;
  virtual int rank() const = 0;     // = this process's global GPU id
  virtual int ranks() const = 0;
  virtual int device() const = 0;   // this rank's CUDA ordinal (its local rank on its host)
  // The NCCL unique id of `group` (global GPU ids, sorted): made by the group's first member,
  // sent to the others. Only the group's members call it, in the same order on each.
  virtual void share_id(void* id, size_t bytes, const std::vector<int>& group) = 0;
  virtual void post(const ExecMessage& m) = 0;  // rank 0: every other rank receives m
  virtual ExecMessage receive() = 0;            // ranks > 0: the next message from rank 0
  virtual int64_t min_over_ranks(int64_t v) = 0;  // collective
  // Element-wise sum of every rank's vector (same length everywhere) on rank 0; collective.
  virtual std::vector<double> sum_on_root(const std::vector<double>& mine) = 0;
  virtual void barrier() = 0;
};

}  // namespace peerplan::exec
