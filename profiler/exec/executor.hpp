#pragma once
// The plan executor: runs a plan on this host's GPUs with synthetic bf16 weights of the plan's
// exact shard shapes, the same kernels the profiler times (the shared cuBLASLt GEMM, peerplan's
// attention and elementwise kernels, NCCL collectives on the plan's groups, peer or host-staged
// copies at stage boundaries), driven by the same serving scheduler as the simulator, on real
// clocks. Its results are the types the planner declares for its GPU backend
// (planner/validate/gpu_backend.hpp: ServeResult, IterationRecord, StepBench, SelfTestResult);
// backend.cpp implements that interface on these functions. CUDA-free header.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/compile/op_graph.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"
#include "planner/validate/gpu_backend.hpp"
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

// Times decode steps at each batch size (context `context`) and one prefill of `prefill_tokens`.
std::vector<StepBench> bench_steps(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig,
                                   const Machine& machine, const std::vector<int64_t>& batches, int64_t context,
                                   int64_t prefill_tokens, const ExecOptions& opt);

// Serves the workload's requests (Workload::generate, same seed as the simulator) and measures.
// Under MPI every rank calls it: rank 0 schedules and returns the measurement, the others follow
// rank 0's messages until it stops them and return an empty result.
ServeResult serve(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                  const Workload& workload, const ExecOptions& opt);

// How many sequences of `max_ctx` tokens the KV cache can hold on every GPU of the plan: the
// planner's memory model (planner/validate/kv_fit.hpp) on each GPU's free memory now. Under MPI
// (bus != nullptr) each rank measures its own GPU and all get the minimum (collective). 0 when
// not even one fits.
int64_t kv_slots_that_fit(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                          int64_t max_ctx, int64_t max_tokens, RankBus* bus = nullptr);

// Throws InputError (the model file, the field and its value) when the executor has no kernels
// for the model (head_dim, query heads per kv head, an MLA shape its MLA kernels do not take, a
// non-gated MLP): called before any GPU work by validate and plan --validate
// (GpuBackend::check_executable) and by the Engine.
void check_model_executable(const ModelConfig& cfg);

// Every kernel against a CPU fp64 reference on fresh random inputs, outputs poisoned first.
std::vector<SelfTestResult> kernel_self_test(int device, uint64_t seed);

}  // namespace peerplan::exec
