#pragma once
// Predict, execute and compare one plan on this host's GPUs: the body of `peerplan validate`,
// shared with `peerplan plan --validate K` (defined in cmd_validate.cpp).
#include <string>
#include <vector>

#include "planner/model/workload.hpp"
#include "planner/plan/plan.hpp"
#include "planner/validate/compare.hpp"
#include "profiler/common/rank_layout.hpp"

namespace peerplan::exec {
class RankBus;  // profiler/common/exec_message.hpp
}

namespace peerplan::cli {

struct HostValidationOptions {
  bool cuda_graphs = true;       // decode iterations as CUDA graphs
  bool warm_gemm_plans = true;   // every GEMM shape's cuBLASLt algorithm looked up at start-up
  bool allow_other_host = false; // run even if the profile was measured on another host
  std::string out;               // directory for the reports ("": print only)
  // `validate --mpi`: every rank calls validate_on_host; rank bus->rank() owns that GPU. Rank 0
  // predicts, schedules, compares and reports; the others execute their GPU's ops and return an
  // empty Comparison.
  exec::RankBus* bus = nullptr;
  // With `bus`: every rank's host, GPU UUID and memory (MpiBus's gather, in rank order). The
  // preflight checks the plan and the profile against these GPUs, which may span hosts
  // (profiler/common/rank_preflight.hpp), instead of the GPUs of the host this rank runs on.
  std::vector<profiler::RankInfo> ranks;
};

// `--mpi`, in a build with MPI and CUDA, inside an mpi::Session: this rank's description with its
// GPU's UUID and memory (for MpiBus and the preflight). *share: PEERPLAN_MPI_SHARE_GPU=1, the
// smoke mode where ranks share a GPU. Defined only in such builds; touches CUDA.
profiler::RankInfo describe_rank_gpu(bool* share);

// True when this peerplan was built with the CUDA executor.
bool have_executor();

// Throws InputError (exit 2) naming `option` when this peerplan has no CUDA executor.
void require_executor(const std::string& option);

// Predicts `plan` under `w` with the simulator, serves the same requests on this host's GPUs,
// prints the comparison and writes it under o.out. A plan with p2p == false runs as
// `--p2p off` does (no peer access, NCCL_P2P_DISABLE=1, host-staged stage boundaries).
// The workload's max_num_seqs is lowered to what the executor's KV cache holds (both sides).
Comparison validate_on_host(const Plan& plan, const std::string& plan_origin, const std::string& model,
                            const std::string& machine, Workload w, const HostValidationOptions& o);

}  // namespace peerplan::cli
