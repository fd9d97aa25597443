#pragma once
// The executor's device state and its op interpreter: one compute stream per GPU, driven from one
// host thread (stages and TP ranks are ordered by events, so a pipeline's micro-batches overlap
// on different GPUs exactly as their dependencies allow). Decode-only iterations replay a CUDA
// graph per (stage, padded batch); prefill and mixed iterations launch eagerly, as vLLM does.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "planner/compile/op_graph.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/strategy/plan.hpp"
#include "planner/topology/machine.hpp"
#include "profiler/exec/executor.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/raii.hpp"

namespace peerplan::exec {

// One sequence's part of an iteration, as the kernels need it.
struct SeqRun {
  int slot = 0;         // KV cache slot
  int new_tokens = 0;   // prefill chunk length, or 1 for decode
  int context = 0;      // tokens attended after this iteration's tokens are added
  bool prefill = false;
};

struct GpuState;

class Engine {
 public:
  Engine(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
         const ExecOptions& opt, int64_t kv_slots, int64_t max_ctx, int64_t max_tokens, int in_flight);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Enqueues one iteration (sequences: prefills first, then decodes) on slot `slot` of the
  // in-flight ring. Returns at once; done(slot) / wait(slot) tell when it finished.
  void launch(const std::vector<SeqRun>& seqs, int slot);
  bool done(int slot);
  void wait(int slot);

  // Runs the iteration eagerly with events around every op; returns per-op seconds (index = op id)
  // of the graph it compiled (also returned).
  std::vector<double> time_ops(const std::vector<SeqRun>& seqs, OpGraph* graph_out);

  OpGraph compile(const BatchShape& shape) const;
  static BatchShape shape_of(const std::vector<SeqRun>& seqs);
  int64_t padded_batch(int64_t b) const;
  int sm_count() const { return sm_count_; }
  int graphs_captured() const { return graphs_captured_; }
  std::string graph_failure() const { return graph_failure_; }
  const std::vector<int>& gpus() const { return gpus_; }

 private:
  struct StageGraph;
  GpuState& gpu(int id);
  void upload_meta(const std::vector<SeqRun>& seqs, int slot);
  void run_op(const Op& op, int slot, std::vector<cudaEvent_t>* send_done);
  void run_stage_eager(const OpGraph& g, int stage, int slot);
  void run_sends(const OpGraph& g, int stage, int slot);
  bool run_stage_graph(const OpGraph& g, int stage, int64_t padded, int slot);
  void stage_fence(int stage, int slot);  // stage's streams wait for the previous stage's sends
  void ncclgroup_collective(const Op& op);

  const Plan& plan_;
  const ModelConfig& cfg_;
  const ModelFigures& fig_;
  const Machine& machine_;
  ExecOptions opt_;
  int64_t kv_slots_, max_ctx_, max_tokens_;
  int in_flight_;
  int sm_count_ = 132;
  std::vector<int> gpus_;
  std::map<int, std::unique_ptr<GpuState>> state_;
  std::map<std::vector<int>, std::unique_ptr<gpu::NcclComms>> comms_;
  std::map<std::pair<int, int64_t>, std::unique_ptr<StageGraph>> graphs_;
  std::map<int64_t, OpGraph> decode_graphs_;  // op graph per padded decode batch
  int graphs_captured_ = 0;
  std::string graph_failure_;
  // Current iteration (for the op interpreter).
  int64_t n_prefill_tokens_ = 0, n_decode_ = 0, n_prefill_seqs_ = 0, max_q_len_ = 0;
  std::vector<std::vector<cudaEvent_t>> boundary_events_;  // [stage][slot*gpus + i]
};

}  // namespace peerplan::exec
