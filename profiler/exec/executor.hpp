#pragma once
// The plan executor: runs a plan on this host's GPUs with synthetic bf16 weights of the plan's
// exact shard shapes, the same kernels the profiler times (the shared cuBLASLt GEMM, peerplan's
// attention and elementwise kernels, NCCL collectives on the plan's groups, peer or host-staged
// copies at stage boundaries), driven by the same serving scheduler as the simulator, on real
// clocks. CUDA-free interface: the CLI includes this without CUDA headers.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/compile/op_graph.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/sim/metrics.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"
#include "planner/validate/compare.hpp"
#include "planner/validate/preflight.hpp"
#include "profiler/common/exec_message.hpp"

namespace peerplan::exec {

struct ExecOptions {
  bool p2p = true;            // false: no peer access, NCCL_P2P_DISABLE=1, host-staged boundaries
  bool cuda_graphs = true;    // decode iterations as CUDA graphs (per stage, per padded batch)
  int64_t kv_slots = 0;       // sequences the KV cache holds (0: the workload's max_num_seqs)
  int64_t max_ctx = 0;        // tokens per sequence slot (0: the workload's max context)
  uint64_t seed = 1;          // synthetic weights
  bool warm_gemm_plans = true; // look up every GEMM shape's cuBLASLt algorithm at start-up
  bool verbose = false;
  // MPI mode (`validate --mpi`): this process owns GPU bus->rank() only; rank 0 schedules and
  // posts every engine call to the others; nullptr: one process drives every GPU of the plan.
  RankBus* bus = nullptr;
};

// This host's GPUs (CUDA runtime + NVML-free: cudaGetDeviceProperties gives name, UUID, memory).
HostInfo discover_host();

// Versions and hardware for reports: driver, CUDA runtime, NCCL, cuBLAS, GPU names, date.
nlohmann::json host_context();

struct StepBench {
  std::string what;           // "decode" or "prefill"
  int64_t batch = 0, context = 0, tokens = 0;
  double step_s = 0;          // median over the timed repetitions
  double min_s = 0, max_s = 0;
  int reps = 0;
  bool graph = false;         // replayed as a CUDA graph
};

// Times decode steps at each batch size (context `context`) and one prefill of `prefill_tokens`.
std::vector<StepBench> bench_steps(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig,
                                   const Machine& machine, const std::vector<int64_t>& batches, int64_t context,
                                   int64_t prefill_tokens, const ExecOptions& opt);
std::string bench_table(const std::vector<StepBench>& rows, const std::string& title);

// One executed iteration. Times are seconds on the run's clock (the requests' arrival clock); the
// GPU times come from CUDA events aligned to it (Engine::mark_epoch).
struct IterationRecord {
  int64_t index = 0;
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

// Serves the workload's requests (Workload::generate, same seed as the simulator) and measures.
// Under MPI every rank calls it: rank 0 schedules and returns the measurement, the others follow
// rank 0's messages until it stops them and return an empty result.
ServeResult serve(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                  const Workload& workload, const ExecOptions& opt);

// How many sequences of `max_ctx` tokens the KV cache can hold on every GPU of the plan after
// weights and workspaces (the executor's layout: one contiguous region per sequence slot).
// Under MPI (bus != nullptr) each rank checks its own GPU and all get the minimum (collective).
int64_t kv_slots_that_fit(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, int64_t max_ctx,
                          int64_t max_tokens, RankBus* bus = nullptr);

// This process's view of CUDA for the MPI rank layout: makes `device` current and returns the
// number of GPUs it sees and the device's UUID.
void describe_gpu(int device, int* device_count, std::string* uuid);

struct SelfTestResult {
  std::string kernel, shape;
  double rel_error = 0, tolerance = 0;
  bool all_written = false;
  bool pass() const { return all_written && rel_error <= tolerance; }
};
// Every kernel against a CPU fp64 reference on fresh random inputs, outputs poisoned first.
std::vector<SelfTestResult> kernel_self_test(int device, uint64_t seed);

}  // namespace peerplan::exec
