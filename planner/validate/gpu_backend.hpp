#pragma once
// What `validate` and `plan --validate` need from a GPU executor, declared by the planner so the
// planner never includes the profiler. The profiler implements it (profiler/exec/backend.cpp); the
// executable's entry point (profiler/app/main.cpp) is the only code that sees both halves and
// hands a backend to the commands, or none in a build without CUDA.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/compile/compiler.hpp"
#include "planner/core/error.hpp"
#include "planner/compile/op_graph.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/plan/plan.hpp"
#include "planner/sim/metrics.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/shape_set.hpp"
#include "planner/validate/compare.hpp"
#include "planner/validate/preflight.hpp"

namespace peerplan {

// How the executor runs a plan.
struct ExecSettings {
  bool p2p = true;              // false: no peer access, NCCL_P2P_DISABLE=1, host-staged stage boundaries
  bool cuda_graphs = true;      // decode iterations as CUDA graphs (per stage, per padded batch)
  bool warm_gemm_plans = true;  // every GEMM shape's cuBLASLt algorithm looked up at start-up
  int64_t kv_slots = 0;         // sequences the KV cache holds (0: the workload's max_num_seqs)
};

// One executed iteration. Times are seconds on the run's clock (the requests' arrival clock); the
// GPU times come from CUDA events aligned to it.
struct IterationRecord {
  int64_t index = 0;
  int replica = 0;                // the plan's copy that ran it (0 without replicas)
  BatchShape shape;
  bool graph = false;             // decode-only: a CUDA graph replay
  bool new_tokens_count = false;  // first iteration with this many tokens (GEMM shapes first seen)
  double host_begin_s = 0;        // the scheduler formed it
  double host_enqueued_s = 0;     // every kernel of it enqueued (launch returned)
  double gpu_start_s = 0;         // its first GPU reached it
  double gpu_end_s = 0;           // its last GPU finished it
  double host_done_s = 0;         // the host saw it finish and told the scheduler
  double compile_s = 0;           // host time compiling its op graph (0: cached)
  std::string slowest_enqueues;   // eager: the three ops whose enqueue took longest on the host
};

struct ServeResult {
  Metrics measured;
  std::vector<IterationRecord> iterations;                 // every iteration, in launch order
  std::vector<std::pair<int64_t, double>> first_scheduled; // request id, host time its first iteration formed
  std::vector<OpClassTime> op_classes;   // measured_s filled; predicted_s filled by the caller
  std::vector<BatchShape> class_shapes;  // the iteration shapes the op classes were timed on
  int64_t kv_slots = 0, max_ctx = 0;     // what the KV cache held (the scheduler was told so)
  nlohmann::json provenance = nlohmann::json::object();
};

// One row of `validate --bench-steps`.
struct StepBench {
  std::string what;           // "decode" or "prefill"
  int64_t batch = 0, context = 0, tokens = 0;
  double step_s = 0;          // median over the timed repetitions
  double min_s = 0, max_s = 0;
  int reps = 0;
  bool graph = false;         // replayed as a CUDA graph
  double hbm_bytes = 0;       // HBM bytes the step's compute ops move on its busiest GPU, as the compiler
                              // counts them (weights read, routed experts only; KV cache; activations)
  double priced_s = 0;        // the simulator's price of the same step from the machine file (0: not priced)
};

// One row of `validate --self-test`: a kernel against a CPU fp64 reference.
struct SelfTestResult {
  std::string kernel, shape;
  double rel_error = 0, tolerance = 0;
  bool all_written = false;
  bool pass() const { return all_written && rel_error <= tolerance; }
};

// The processes of one MPI launch (`mpirun -np N peerplan ... --mpi`), one per GPU: rank r owns
// global GPU r; rank 0 decides and reports, the others follow.
class RankGroup {
 public:
  virtual ~RankGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() = 0;                                    // idle-friendly
  virtual std::string broadcast(const std::string& root_s) = 0;  // rank 0's string on every rank
  // The plan against the launch (GPUs 0..size-1, GPU 0 used), before any GPU is touched.
  // Throws InputError naming `plan_origin` and the -np to use.
  virtual void check_plan(const std::vector<int>& plan_gpus, const std::string& plan_origin) = 0;
  // Collective: every rank describes its GPU (host, UUID, memory) and the ranks are checked to
  // hold one GPU each. From then on, until run_ranks returns, the backend drives this rank's GPU
  // only and its serve / kv_slots_that_fit are collective.
  virtual void join_gpus() = 0;
  // After join_gpus: the preflight against the ranks' GPUs, which may span hosts (instead of this
  // host's GPUs). Throws InputError as preflight() does; returns warnings.
  virtual std::vector<std::string> preflight(const Plan& plan, const std::string& plan_origin, const Machine& profile,
                                             const std::string& profile_file, const MemoryReport& mem,
                                             const PreflightOptions& opt) = 0;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  // Throws InputError (the model file, the field and its value) when the executor has no kernels
  // for this model's shapes; CPU only, called before any GPU work. Default: runs everything.
  virtual void check_executable(const ModelConfig& cfg) { (void)cfg; }

  // This host's GPUs (name, UUID, memory); none when no GPU or driver is usable.
  virtual HostInfo describe_host() = 0;
  // Versions and hardware for reports: driver, CUDA runtime, NCCL, cuBLAS, GPU names, date.
  virtual nlohmann::json host_context() = 0;

  // How many sequences of `max_ctx` tokens the executor's KV cache can hold on every GPU of the
  // plan: the planner's memory model (executor_kv_slots, kv_fit.hpp) on the free memory each GPU
  // has now. Collective under MPI (each rank measures its GPU; all get the minimum).
  virtual int64_t kv_slots_that_fit(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig,
                                    const Machine& machine, int64_t max_ctx, int64_t max_tokens) = 0;

  // Serves the workload's requests (Workload::generate, same seed as the simulator) on the GPUs,
  // under the simulator's scheduler, and measures. Under MPI every rank calls it: rank 0 schedules
  // and returns the measurement, the others follow it and return an empty result.
  virtual ServeResult serve(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                            const Workload& workload, const ExecSettings& settings) = 0;

  // Decode steps at each batch size (context `context`) and one prefill of `prefill_tokens`.
  virtual std::vector<StepBench> bench_steps(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig,
                                             const Machine& machine, const std::vector<int64_t>& batches,
                                             int64_t context, int64_t prefill_tokens, const ExecSettings& settings) = 0;

  // Times `shapes` on this host's GPU 0 through the profiler's own code (what `profile --add-model`
  // runs), with `sweep`'s token counts and samples; `profile` is this host's (the caller checked).
  // Returns only the new rows and notes (planner/validate/missing_shapes.hpp merges them). The
  // default refuses: a backend that cannot measure.
  virtual Measurements measure_shapes(const Machine& profile, const ShapeSet& shapes, const ShapeSweep& sweep) {
    (void)profile, (void)shapes, (void)sweep;
    throw RuntimeError("this GPU backend cannot time shapes (validate --no-measure-missing predicts without them)");
  }

  // Every executor kernel against a CPU fp64 reference on fresh random inputs, outputs poisoned.
  virtual std::vector<SelfTestResult> self_test(int device, uint64_t seed) = 0;

  // `--mpi`: runs `body` on this process's rank inside an MPI session. An error on one rank ends
  // every rank (exit 2 for an InputError, else 1), since the others may wait in a collective call;
  // with one rank it is rethrown. `command` names the command in that message. Throws InputError
  // when this build has no MPI.
  virtual void run_ranks(const std::string& command, const std::function<void(RankGroup&)>& body) = 0;
};

}  // namespace peerplan
