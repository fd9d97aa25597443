#pragma once
// Predict, execute and compare one plan on this host's GPUs (or on an MPI launch's): the body of
// `peerplan validate`, shared with `peerplan plan --validate K`, and of `validate --bench-steps`.
// The GPU work goes through a GpuBackend; everything here is CPU: loading, the memory and host
// checks, the prediction, the predicted op-class times, the comparison and the reports.
#include <string>
#include <vector>

#include "planner/model/model_config.hpp"
#include "planner/model/workload.hpp"
#include "planner/plan/plan.hpp"
#include "planner/validate/compare.hpp"
#include "planner/validate/gpu_backend.hpp"

namespace peerplan {

struct HostValidationOptions {
  bool cuda_graphs = true;       // decode iterations as CUDA graphs
  bool warm_gemm_plans = true;   // every GEMM shape's cuBLASLt algorithm looked up at start-up
  bool allow_other_host = false; // run even if the profile was measured on another host
  std::string out;               // directory for the reports ("": print only)
  // `--mpi`: the launch's ranks, already joined (RankGroup::join_gpus); every rank calls
  // validate_on_host. Rank 0 predicts, schedules, compares and reports; the others execute their
  // GPU's ops and return an empty Comparison. The preflight checks the ranks' GPUs, which may
  // span hosts, instead of this host's. nullptr: one process drives every GPU of the plan.
  RankGroup* ranks = nullptr;
  Precision precision;           // --weights / --kv-dtype applied to the model on both sides
  // Shapes of the plan the profile has no measured point of are timed on this host's GPU before
  // the prediction (planner/validate/missing_shapes.hpp) and written to out/machine-extended.json;
  // update_machine: into the --machine file too. Off (--no-measure-missing): predict without them.
  // Not under --mpi, nor with a profile of another host (allow_other_host): noted instead.
  bool measure_missing = true;
  bool update_machine = false;
};

// Predicts `plan` under `w` with the simulator, serves the same requests on the GPUs, prints the
// comparison and writes it under o.out. A plan with p2p == false runs as `--p2p off` does (no
// peer access, NCCL_P2P_DISABLE=1, host-staged stage boundaries). The workload's max_num_seqs is
// lowered to what the executor's KV cache holds (both sides). Refusals (InputError, exit 2) come
// before any GPU work: a profile of another host, a plan needing GPUs or memory the host lacks.
Comparison validate_on_host(GpuBackend& gpu, const Plan& plan, const std::string& plan_origin,
                            const std::string& model, const std::string& machine, Workload w,
                            const HostValidationOptions& o);

struct StepBenchOptions {
  std::vector<int64_t> batches{1, 8, 64};  // decode batch sizes
  int64_t context = 1024;                  // decode context (tokens)
  int64_t prefill = 2048;                  // prefill tokens (0: none)
  bool cuda_graphs = true;
  bool allow_other_host = false;
  std::string out;                         // directory for steps.json ("": print only)
  routing::RoutingSpec moe_routing;        // MoE: --moe-routing (uniform by default)
  Precision precision;                     // --weights / --kv-dtype
};

// `validate --bench-steps`: decode and prefill step times of `plan` (after the same preflight as
// a validation), printed as a table and written to o.out/steps.json.
void bench_steps_on_host(GpuBackend& gpu, const Plan& plan, const std::string& plan_origin, const std::string& model,
                         const std::string& machine, const StepBenchOptions& o);

// `validate --reprice STEPS`: a recorded steps.json's measured times beside this machine file's prices of the
// same steps (no GPU: re-price a bench on another profile, or after a pricing change). `out` ("": print only)
// gets a steps.json with the new prices.
void reprice_steps(const std::string& steps_file, const Plan& plan, const std::string& plan_origin,
                   const std::string& model, const std::string& machine, const Precision& precision,
                   const std::string& out);

// validation.json, validation.md, predicted.metrics.json, measured.metrics.json in `dir`, and
// the plot when python3 with matplotlib is there (else a note on stderr).
void write_validation_outputs(const std::string& dir, const Comparison& c, const Metrics& pred, const Metrics& meas);

}  // namespace peerplan
