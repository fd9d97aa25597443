#pragma once
// The preflight of `validate --mpi`: rank r owns global GPU r, and the ranks may sit on several
// hosts, so the plan and the profile are checked against the ranks' GPUs (each rank's host, GPU
// UUID and memory, gathered over MPI by MpiBus) instead of the GPUs of the host rank 0 runs on
// (planner/validate/preflight.hpp, the single-process check). Pure: tested without MPI or GPUs.
#include <string>
#include <vector>

#include "planner/compile/compiler.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"
#include "planner/validate/preflight.hpp"
#include "profiler/common/rank_layout.hpp"

namespace peerplan::profiler {

// "GPU-4a999085-a1c3-..." and "4a999085a1c3..." name the same GPU: lower-case hex digits only.
std::string normalise_gpu_uuid(const std::string& uuid);
// For messages: nvidia-smi's spelling ("GPU-4a999085-a1c3-f67b-1cc2-0867c7411289") of a UUID
// given either way (CUDA's cudaDeviceProp::uuid is 32 bare hex digits); anything else unchanged.
std::string display_gpu_uuid(const std::string& uuid);

// Why the profile does not describe the ranks' GPUs ("" if it does). Profile GPU i must be rank
// i's GPU: same UUID when both are known (as the single-host check), else the host the profile
// recorded for GPU i (meta.mpi.ranks[i].host of an MPI profile, else the profile's host) must be
// rank i's host. A nominal machine never describes them. Profile GPUs without a rank are not
// checked (the plan cannot use them: check_plan_ranks).
std::string profile_ranks_mismatch(const Machine& profile, const std::vector<RankInfo>& ranks);

// Throws InputError (exit 2) naming the file and how to fix it: no ranks, a plan GPU without a
// rank (too few ranks: the mpirun -np to use), a profile that is not of these GPUs (unless
// opt.allow_other_host: then a warning), a plan that does not fit (mem.fits, from the profile's
// figures) or that needs more memory on GPU r than rank r's GPU has. Returns warnings: a foreign
// profile allowed by the option, a rank's GPU with under 95 % of the memory the profile records, and
// executor_mismatches against `host`'s executor (launch mode, shared-expert stream, int4 word order; its
// empty fields are unknown): every rank runs the same build under the launcher's environment, so the
// caller's executor is theirs.
std::vector<std::string> preflight_ranks(const Plan& plan, const std::string& plan_file, const Machine& profile,
                                         const std::string& profile_file, const std::vector<RankInfo>& ranks,
                                         const MemoryReport& mem, const PreflightOptions& opt = {},
                                         const HostInfo& host = {});

}  // namespace peerplan::profiler
