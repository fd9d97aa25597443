#pragma once
// The executor's device state and its op interpreter: one compute stream per GPU, driven from one
// host thread (stages and TP ranks are ordered by events, so a pipeline's micro-batches overlap
// on different GPUs exactly as their dependencies allow). Decode-only iterations replay a CUDA
// graph per (stage, padded batch); prefill and mixed iterations launch eagerly, as vLLM does.
// Under MPI (ExecOptions::bus) the same engine runs in every rank and holds only that rank's GPU:
// each rank enqueues its own GPU's ops of every iteration, collectives and stage boundaries go
// over per-group NCCL communicators (ncclCommInitRank), and the last stage tells rank 0's GPU
// that an iteration is done with a one-byte NCCL message.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <set>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include "planner/compile/mla_memory.hpp"
#include "planner/compile/op_graph.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"
#include "profiler/common/exec_message.hpp"  // SeqRun, RankBus
#include "profiler/exec/executor.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/raii.hpp"

namespace peerplan::kernels {
struct MoeExpertGemmArgs;
}

namespace peerplan::exec {

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

  // Per-iteration GPU timeline on the host's clock: mark_epoch() records an event on every GPU and
  // waits for it (GPU time 0 = the host time of the call, to within a few microseconds); after
  // wait(slot), gpu_span(slot) gives when that slot's last iteration started on its first GPU and
  // finished on its last, in seconds since the epoch.
  void mark_epoch();
  std::pair<double, double> gpu_span(int slot);
  // The last eager launch's three ops whose enqueue took longest on the host ("name MxNxK: us").
  const std::string& slowest_enqueues() const { return last_slowest_; }
  double last_compile_s() const { return last_compile_s_; }  // the last launch's op-graph compile (0: cached)

  // Runs the iteration eagerly with events around every op; returns per-op seconds (index = op id)
  // of the graph it compiled (also returned).
  std::vector<double> time_ops(const std::vector<SeqRun>& seqs, OpGraph* graph_out);

  // Start-up warm-up, as a serving engine's: the cuBLASLt algorithm of every GEMM shape an
  // iteration of up to `max_tokens` tokens and `max_seqs` sequences can have is looked up, and
  // every distinct kernel among them run once, so neither the heuristic query (~0.2 ms per new
  // shape) nor a kernel's first call (~2.5 ms) lands on a serving iteration's critical path.
  // Returns the number of distinct shapes; warm_kernels() the kernels run.
  int64_t warm_gemm_plans(int64_t max_tokens, int64_t max_seqs);
  int64_t warm_kernels() const { return warm_kernels_; }
  // The prefill attention graphs (cuDNN) of every (sequence-count, query-length) bucket an iteration
  // of up to `max_tokens` tokens and `max_seqs` sequences can have, built before the clock starts:
  // building one costs 50-85 ms of host time (H200 2026-12-03), which engines pay at start-up too.
  // Returns the number of graphs (0 with the own kernel).
  int64_t warm_prefill_attention(int64_t max_tokens, int64_t max_seqs);

  OpGraph compile(const BatchShape& shape) const;
  static BatchShape shape_of(const std::vector<SeqRun>& seqs);
  int64_t padded_batch(int64_t b) const;
  int sm_count() const { return sm_count_; }
  int graphs_captured() const { return graphs_captured_; }
  std::string graph_failure() const { return graph_failure_; }
  const std::vector<int>& gpus() const { return gpus_; }
  bool local(int id) const { return local_.count(id) != 0; }  // this process drives GPU `id`

 private:
  struct StageGraph;
  // Scratch elements (bf16) each GPU's X, Y and Z buffers need for the worst-case iterations.
  struct ScratchNeed {
    int64_t x = 0, y = 0, z = 0;
    bool kv_fp8 = false;  // an Attention op of this GPU reads an FP8 KV cache (issue 15)
  };
  GpuState& gpu(int id);
  // Construction (engine_alloc.cpp, engine_comm.cpp).
  void make_gpu_states();
  void enable_peer_access();
  std::map<int, ScratchNeed> scratch_needs(const std::vector<OpGraph>& worst) const;
  void allocate(GpuState& g, const ScratchNeed& need);
  void allocate_kv_cache(GpuState& g);
  // MLA (engine_mla.cpp): the latent cache, the absorbed queries, the prefill's expanded K/V scratch.
  void allocate_latent_cache(GpuState& g);
  void allocate_mla(GpuState& g, int64_t tok_cap);
  MlaScratch mla_sizes(int64_t heads) const;  // the MLA buffers' sizes (planner/compile/mla_memory.hpp)
  void mla_prefill_groups(GpuState& g, int* meta_host);  // upload_meta's MLA part (engine_alloc.cpp)
  void allocate_metadata(GpuState& g, int64_t tok_cap, int64_t seq_cap);
  void create_rank_comms(const std::vector<OpGraph>& worst);
  // Peer-memory all-reduce groups (issue 17): one per TP group whose plan setting may pick a
  // one-shot / two-shot kernel, registered once (engine_comm.cpp); under MPI through CUDA IPC.
  void create_peer_allreduce(const std::vector<OpGraph>& worst);
  bool peer_allreduce(const Op& op);  // false: this all-reduce runs NCCL
  void upload_meta(const std::vector<SeqRun>& seqs, int slot);
  // Op dispatch (engine_ops.cpp): one function per op kind.
  void run_op(const Op& op, int slot, std::vector<cudaEvent_t>* send_done);
  void run_gemm(const Op& op, GpuState& g);
  void run_quant_gemm(const Op& op, GpuState& g);  // op.wdtype fp8 / int8 / int4 (engine_quant.cpp)
  void run_embedding(GpuState& g);
  void run_attention(const Op& op, GpuState& g);
  void run_elementwise(const Op& op, GpuState& g);
  void run_mla_rotary(const Op& op, GpuState& g);     // MLA: cache write + rope (engine_mla.cpp)
  void run_mla_attention(const Op& op, GpuState& g);  // MLA: expanded prefill, absorbed decode
  // Routed MoE (engine_moe.cpp).
  void ensure_moe_state(const Op& op, GpuState& g);
  // After creating weights on g's stream: with PEERPLAN_PDL the GEMVs load weights before
  // griddepcontrol.wait, so the fill must be complete first (kernels/pdl.cuh); a no-op otherwise.
  static void settle_new_weights(GpuState& g);
  void run_moe_route(const Op& op, GpuState& g);
  void run_grouped_gemm(const Op& op, GpuState& g);
  // gate_up with SiLU(gate) * up in its epilogue (Op::act_epilogue), d as run_grouped_gemm built it.
  void run_gate_up_with_act(const Op& op, GpuState& g, kernels::MoeExpertGemmArgs& d);
  // A grouped GEMM that gathers its rows' tokens (gate_up; down reads sorted rows), and where in Z
  // its gathered copy starts for T routed tokens: behind the tokens' rows, 256-byte aligned.
  static bool gathers_tokens(const Op& op);
  static int64_t gathered_first(int64_t tokens, int64_t k) { return (tokens * k + 127) / 128 * 128; }
  void run_moe_combine(const Op& op, GpuState& g);
  // Collectives and stage boundaries (engine_comm.cpp).
  void ncclgroup_collective(const Op& op);
  void send_between_ranks(const Op& op, int slot);
  void send_in_process(const Op& op, int slot, std::vector<cudaEvent_t>* send_done);
  // Stages: eager launch, CUDA-graph capture and replay (engine_graph.cpp).
  void run_stage_eager(const OpGraph& g, int stage, int slot);
  // Shared experts on the auxiliary stream (engine_graph.cpp): fork, join, and one op run there.
  void fork_aux(GpuState& g);
  void join_aux(GpuState& g);
  void run_on_aux(const Op& op, int slot);
  void run_sends(const OpGraph& g, int stage, int slot);
  bool run_stage_graph(const OpGraph& g, int stage, int64_t padded, int slot);
  std::unique_ptr<StageGraph> capture_stage(const OpGraph& g, int stage, int slot, const std::vector<int>& loc);
  void replay_stage(const StageGraph& sg, const std::vector<int>& loc);
  // MPI mode.
  bool mine(const Op& op) const;  // an op this rank takes part in (always true in one process)
  ncclComm_t rank_comm(const std::vector<int>& group, int kind);  // kind 0: plan group, 1: completion
  void signal_done();             // last stage -> rank 0: the iteration just enqueued is finished
  std::vector<int> local_of(const std::vector<int>& ids) const;

  const Plan& plan_;
  const ModelConfig& cfg_;
  const ModelFigures& fig_;
  const Machine& machine_;
  // The norms add the residual (machine.hpp fused_add_norm): the embedding writes Z and zeroes the
  // residual stream, and a stage boundary sends both.
  bool fused_norm_ = true;
  // PEERPLAN_SHARED_STREAM (-1 as the profile says, 0, 1): CompileOptions::shared_stream of every compile.
  int shared_stream_ = -1;
  // PEERPLAN_FUSED_ACT (-1 as the profile says, 0, 1): CompileOptions::fused_act of every compile.
  int fused_act_ = -1;
  // PEERPLAN_SKIP_OPS (A/B experiments only): ops whose names contain a piece are not launched.
  std::vector<std::string> skip_ops_;
  ExecOptions opt_;
  int64_t kv_slots_, max_ctx_, max_tokens_;
  int in_flight_;
  int sm_count_ = 132;
  std::vector<int> gpus_;
  RankBus* bus_ = nullptr;        // MPI mode: this rank's link to the others (nullptr: one process)
  std::set<int> local_;           // GPUs this process drives (all of the plan's in one process)
  std::map<std::pair<int, std::vector<int>>, ncclComm_t> rank_comms_;
  std::map<int, std::unique_ptr<GpuState>> state_;
  std::map<std::vector<int>, std::unique_ptr<gpu::NcclComms>> comms_;
  struct PeerArState;  // engine_state.hpp
  std::map<std::vector<int>, std::unique_ptr<PeerArState>> peer_ar_;  // by sorted TP group
  std::map<std::pair<int, int64_t>, std::unique_ptr<StageGraph>> graphs_;
  std::map<int64_t, OpGraph> decode_graphs_;  // op graph per padded decode batch
  int graphs_captured_ = 0;
  std::string graph_failure_;
  // Current iteration (for the op interpreter).
  int64_t n_prefill_tokens_ = 0, n_decode_ = 0, n_prefill_seqs_ = 0, max_q_len_ = 0;
  std::vector<std::vector<cudaEvent_t>> boundary_events_;  // [stage][slot*gpus + i]
  std::vector<std::pair<double, const Op*>> enqueue_s_;      // last eager launch: host seconds per op
  double last_compile_s_ = 0;
  int64_t warm_kernels_ = 0;
  std::string last_slowest_;
  std::string top_enqueues(int n) const;
};

}  // namespace peerplan::exec
