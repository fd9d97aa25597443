// The op interpreter's iteration loop: each op of compile_iteration's graph becomes the kernel,
// collective or copy an inference engine would run for it (engine_ops.cpp, engine_comm.cpp), on
// buffers sized once for the worst-case iterations (engine_alloc.cpp); decode-only stages replay
// CUDA graphs (engine_graph.cpp).
#include "profiler/exec/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "planner/compile/compiler.hpp"
#include "planner/compile/graph_batch.hpp"
#include "planner/core/error.hpp"
#include "profiler/common/env_switch.hpp"
#include "profiler/common/pdl_switch.hpp"
#include "profiler/common/shared_stream.hpp"
#include "profiler/exec/engine_state.hpp"
#include "profiler/exec/executor.hpp"
#include "profiler/common/quant_shapes.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/attention.hpp"

namespace peerplan::exec {

namespace kn = peerplan::kernels;

GpuState& Engine::gpu(int id) { return *state_.at(id); }

void check_model_executable(const ModelConfig& cfg) {
  // head_dim, query heads per kv head, cuDNN; MLA: the latent and head widths its kernels take
  kn::check_attention_executable(cfg, kn::prefill_attention_path());
  if (!cfg.gated_mlp)
    throw InputError(cfg.source_file, "architectures", "a gated (SwiGLU) MLP: the executor's activation is SiLU(gate) * up");
}

Engine::Engine(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
               const ExecOptions& opt, int64_t kv_slots, int64_t max_ctx, int64_t max_tokens, int in_flight)
    : plan_(plan), cfg_(cfg), fig_(fig), machine_(machine), fused_norm_(fused_add_norm(machine)),
      shared_stream_(shared_stream_from_env(std::getenv("PEERPLAN_SHARED_STREAM"))),
      fused_act_(fused_act_from_env(std::getenv("PEERPLAN_FUSED_ACT"))),
      skip_ops_(skip_ops_from_env(std::getenv("PEERPLAN_SKIP_OPS"))), opt_(opt),
      kv_slots_(kv_slots), max_ctx_(max_ctx), max_tokens_(max_tokens), in_flight_(std::max(1, in_flight)) {
  check_model_executable(cfg);
  if (!skip_ops_.empty())
    fmt::print(stderr, "executor: PEERPLAN_SKIP_OPS={} launches no op whose name contains one of those pieces: "
                       "these timings are not the plan's (an A/B experiment), and its prices do not apply\n",
               std::getenv("PEERPLAN_SKIP_OPS"));
  // Never NVLink multicast (it can take a shared host's GPUs out of service); P2P off is set
  // before any communicator exists, as NCCL reads it at init.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  if (!opt.p2p) setenv("NCCL_P2P_DISABLE", "1", 1);
  gpus_ = plan.all_gpus();
  bus_ = opt.bus;
  for (int id : gpus_)
    if (!bus_ || id == bus_->rank()) local_.insert(id);
  CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, bus_ ? bus_->device() : gpus_.front()));

  make_gpu_states();
  enable_peer_access();
  // Worst-case shapes size the scratch buffers and name the communicators: a full prefill and a
  // full (padded) decode batch.
  std::vector<OpGraph> worst = {compile(BatchShape{1, max_tokens, max_tokens, 0, 0}),
                                compile(BatchShape{0, 0, 0, padded_batch(kv_slots), max_ctx})};
  // MLA: a chunk at the longest context decompresses all of it (the kv_b GEMM over max_ctx rows).
  if (cfg.mla && max_ctx > max_tokens) worst.push_back(compile(BatchShape{1, max_tokens, max_ctx, 0, 0}));
  // Quantized shards the kernels cannot take (DeepSeek-V2-Lite's layer-0 MLP in int4: k = 10944; Qwen1.5-MoE's
  // int4 experts at TP 2: k = 704), refused here, before any weight is made, rather than at the first op.
  for (const OpGraph& g : worst)
    if (const std::string why = kn::unrunnable_quant_op(g); !why.empty())
      throw InputError(cfg.source_file, cfg.quant.source.rfind("--weights", 0) == 0 ? cfg.quant.source : "quantization_config",
                       "weight formats whose kernels take the plan's shard shapes: " + why +
                           ". Validate the model with --weights bf16 (or fp8), or with a plan whose shards fit");
  const std::map<int, ScratchNeed> need = scratch_needs(worst);
  for (auto& [id, gp] : state_) allocate(*gp, need.count(id) ? need.at(id) : ScratchNeed{});
  for (auto& [id, gp] : state_) gp->stream.synchronize();
  if (bus_) create_rank_comms(worst);
  create_peer_allreduce(worst);  // after the communicators: under MPI both exchange over the bus in order
}

Engine::~Engine() {
  for (auto& [id, gp] : state_) {
    gpu::ScopedDevice d(gp->dev);
    cudaStreamSynchronize(gp->stream);
  }
  graphs_.clear();
  for (auto& [key, c] : rank_comms_) ncclCommDestroy(c);
}

bool Engine::mine(const Op& op) const {
  if (!bus_) return true;
  return std::any_of(op.gpus.begin(), op.gpus.end(), [&](int id) { return local(id); });
}

std::vector<int> Engine::local_of(const std::vector<int>& ids) const {
  std::vector<int> v;
  for (int id : ids)
    if (local(id)) v.push_back(id);
  return v;
}

int64_t Engine::padded_batch(int64_t b) const {
  return cuda_graph_batch(b);  // vLLM's capture sizes; the pricer prices the same padded batch
}

BatchShape Engine::shape_of(const std::vector<SeqRun>& seqs) {
  BatchShapeSum s;  // the scheduler's definition (planner/compile/op_graph.hpp)
  for (const SeqRun& q : seqs) {
    if (q.prefill) s.add_prefill(q.new_tokens, q.context);
    else s.add_decode(q.context);
  }
  return s.shape();
}

OpGraph Engine::compile(const BatchShape& shape) const {
  CompileOptions o;
  o.shared_stream = shared_stream_;
  o.fused_act = fused_act_;
  o.pdl = kn::pdl::enabled() ? 1 : 0;  // the GEMVs this executor runs (the profile's may differ: validate warns)
  return compile_iteration(plan_, cfg_, fig_, machine_, shape, o);
}

std::string Engine::top_enqueues(int n) const {
  std::vector<std::pair<double, const Op*>> v = enqueue_s_;
  const size_t k = std::min(v.size(), size_t(std::max(n, 0)));
  std::partial_sort(v.begin(), v.begin() + long(k), v.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::string s;
  for (size_t i = 0; i < k; ++i)
    s += fmt::format("{}{} {}x{}x{}: {:.0f} us", i ? "; " : "", v[i].second->name, v[i].second->m, v[i].second->n,
                     v[i].second->k, v[i].first * 1e6);
  return s;
}

void Engine::launch(const std::vector<SeqRun>& seqs_in, int slot) {
  for (auto& [id, gp] : state_) {
    gpu::ScopedDevice d(gp->dev);
    gp->start[size_t(slot)].record(gp->stream);
  }
  enqueue_s_.clear();
  last_compile_s_ = 0;
  last_slowest_.clear();
  if (bus_)
    for (auto& [id, gp] : state_) gp->done[size_t(slot)].synchronize();  // the slot's buffers are free (already so: rank 0 reuses a slot only after it finished everywhere)
  std::vector<SeqRun> seqs = seqs_in;
  bool decode_only = !seqs.empty() && std::none_of(seqs.begin(), seqs.end(), [](const SeqRun& s) { return s.prefill; });
  int64_t padded = int64_t(seqs.size());
  // Decode batches above kGraphTimedMaxRows run eagerly, as the pricer prices them (graph_batch.hpp).
  const bool use_graph = opt_.cuda_graphs && decode_only && decode_runs_as_graph(int64_t(seqs.size()));
  if (use_graph) {
    padded = padded_batch(int64_t(seqs.size()));
    while (int64_t(seqs.size()) < padded) seqs.push_back(SeqRun{int(kv_slots_), 1, 1, false});
  }
  upload_meta(seqs, slot);
  // A decode-only op graph depends on the padded batch alone (contexts are read from device
  // memory), so it is compiled once per size: compiling per step cost 0.4-0.7 ms of host time on
  // the critical path of every decode step (8B, 1-2 GPUs), time the simulator does not model.
  OpGraph fresh;
  const OpGraph* gp = nullptr;
  if (use_graph) {
    auto it = decode_graphs_.find(padded);
    if (it == decode_graphs_.end()) it = decode_graphs_.emplace(padded, compile(shape_of(seqs))).first;
    gp = &it->second;
  } else {
    const auto tc = std::chrono::steady_clock::now();
    fresh = compile(shape_of(seqs));
    last_compile_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - tc).count();
    gp = &fresh;
  }
  const OpGraph& g = *gp;
  for (int s = 0; s < g.num_stages; ++s) {
    if (bus_ && local_of(plan_.stages[size_t(s)].gpus).empty()) {  // MPI: another rank's stage
      run_sends(g, s, slot);  // the receiving end of its boundary, if it is this rank
      continue;
    }
    bool ran = false;
    if (use_graph && opt_.cuda_graphs) ran = run_stage_graph(g, s, padded, slot);
    if (!ran) run_stage_eager(g, s, slot);
    run_sends(g, s, slot);
  }
  if (bus_) signal_done();
  for (auto& [id, gp] : state_) {
    gpu::ScopedDevice d(gp->dev);
    // MPI, rank 0: "done" is when the last stage's message arrived (the finish stream).
    gp->done[size_t(slot)].record(bus_ && id == 0 ? gp->finish.get() : gp->stream.get());
  }
  last_slowest_ = use_graph ? std::string() : top_enqueues(3);  // while the ops it points to live
  enqueue_s_.clear();
}

bool Engine::done(int slot) {
  for (auto& [id, gp] : state_) {
    cudaError_t e = cudaEventQuery(gp->done[size_t(slot)]);
    if (e == cudaErrorNotReady) return false;
    CUDA_CHECK(e);
  }
  return true;
}

void Engine::wait(int slot) {
  for (auto& [id, gp] : state_) gp->done[size_t(slot)].synchronize();
}

void Engine::mark_epoch() {
  for (auto& [id, gp] : state_) {
    gpu::ScopedDevice d(gp->dev);
    gp->stream.synchronize();
    gp->epoch.record(gp->stream);
  }
  for (auto& [id, gp] : state_) gp->epoch.synchronize();
}

std::pair<double, double> Engine::gpu_span(int slot) {
  double s = 1e300, e = -1e300;
  for (auto& [id, gp] : state_) {
    s = std::min(s, gp->start[size_t(slot)].seconds_since(gp->epoch));
    e = std::max(e, gp->done[size_t(slot)].seconds_since(gp->epoch));
  }
  return {s, e};
}

std::vector<double> Engine::time_ops(const std::vector<SeqRun>& seqs, OpGraph* graph_out) {
  for (auto& [id, gp] : state_) gp->stream.synchronize();
  upload_meta(seqs, 0);
  OpGraph g = compile(shape_of(seqs));
  // Warm-up pass (allocations, plans), then the timed pass.
  for (int s = 0; s < g.num_stages; ++s) {
    run_stage_eager(g, s, 0);
    run_sends(g, s, 0);
  }
  for (auto& [id, gp] : state_) gp->stream.synchronize();
  // Each op is timed on its first GPU. Under MPI a rank times the ops whose first GPU it owns
  // (the others are 0 here; the caller sums over ranks) and only joins the rest it takes part in.
  std::vector<std::pair<gpu::Event, gpu::Event>> ev;
  std::vector<size_t> timed;
  ev.reserve(g.ops.size());
  for (const Op& op : g.ops) {
    if (!mine(op)) continue;
    if (!local(op.gpus[0])) {
      run_op(op, 0, nullptr);
      continue;
    }
    GpuState& first = gpu(op.gpus[0]);
    timed.push_back(size_t(op.id));
    ev.emplace_back(gpu::Event(first.dev), gpu::Event(first.dev));
    {
      gpu::ScopedDevice d(first.dev);
      ev.back().first.record(first.stream);
    }
    run_op(op, 0, nullptr);
    for (size_t i = 1; i < op.gpus.size(); ++i)
      if (local(op.gpus[i])) stream_wait(first, gpu(op.gpus[i]));
    gpu::ScopedDevice d(first.dev);
    ev.back().second.record(first.stream);
  }
  for (auto& [id, gp] : state_) gp->stream.synchronize();
  std::vector<double> t(g.ops.size(), 0.0);
  for (size_t i = 0; i < ev.size(); ++i) t[timed[i]] = ev[i].second.seconds_since(ev[i].first);
  if (graph_out) *graph_out = std::move(g);
  return t;
}

void stream_wait(GpuState& waiter, GpuState& signaller) {
  cudaEvent_t e;
  {
    gpu::ScopedDevice d(signaller.dev);
    e = signaller.next_event();
    CUDA_CHECK(cudaEventRecord(e, signaller.stream));
  }
  gpu::ScopedDevice d(waiter.dev);
  CUDA_CHECK(cudaStreamWaitEvent(waiter.stream, e, 0));
}

}  // namespace peerplan::exec
