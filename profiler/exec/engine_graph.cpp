// A stage's ops launched eagerly (prefill and mixed iterations, as vLLM), or captured once per
// (stage, padded decode batch) into a CUDA graph and replayed (decode-only iterations).
#include <chrono>
#include <utility>

#include "profiler/common/env_switch.hpp"
#include "profiler/common/shared_stream.hpp"
#include "profiler/exec/engine_state.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/elementwise.hpp"

namespace peerplan::exec {

namespace kn = peerplan::kernels;

void Engine::run_stage_eager(const OpGraph& g, int stage, int slot) {
  // Op by op in graph order; a MoE layer's shared experts on the auxiliary stream where the compiler
  // put them (Op::stream, profiler/common/shared_stream.hpp), forked and joined as stream_steps says.
  for (const StreamStep& s : stream_steps(g, g.stage_ops[size_t(stage)])) {
    const Op& op = g.ops[size_t(s.op)];
    if (op.kind == OpKind::Send || !mine(op)) continue;
    if (s.fork) fork_aux(gpu(op.gpus[0]));
    if (s.join)
      for (int id : op.gpus)
        if (local(id) && gpu(id).aux_open) join_aux(gpu(id));
    if (!skip_ops_.empty() && op_skipped(op.name, skip_ops_)) continue;  // the fork and join stay: only the op goes
    const auto t0 = std::chrono::steady_clock::now();
    s.aux ? run_on_aux(op, slot) : run_op(op, slot, nullptr);
    enqueue_s_.emplace_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), &op);
  }
  for (auto& [id, gs] : state_)  // a branch without an op waiting for it (the compiler makes none)
    if (gs->aux_open) join_aux(*gs);
}

void Engine::fork_aux(GpuState& g) {
  gpu::ScopedDevice d(g.dev);
  if (!g.aux.get()) {
    g.aux = gpu::Stream(g.dev);
    g.gemm_aux = std::make_unique<gpu::GemmRunner>(g.dev);
  }
  cudaEvent_t e = g.next_event();
  CUDA_CHECK(cudaEventRecord(e, g.stream));
  CUDA_CHECK(cudaStreamWaitEvent(g.aux, e, 0));
  g.aux_open = true;
}

void Engine::join_aux(GpuState& g) {
  gpu::ScopedDevice d(g.dev);
  cudaEvent_t e = g.next_event();
  CUDA_CHECK(cudaEventRecord(e, g.aux));
  CUDA_CHECK(cudaStreamWaitEvent(g.stream, e, 0));
  g.aux_open = false;
}

void Engine::run_on_aux(const Op& op, int slot) {
  GpuState& g = gpu(op.gpus[0]);
  // The branch's scratch, grown to this op (GEMM: m x k in, m x n out; the activation reads
  // [rows][2 cols] and writes [rows][cols]); the eager run before a capture allocates it.
  const int64_t need_x = op.kind == OpKind::Gemm ? op.m * op.k * op.batch_count : 0;
  const int64_t need_y = op.kind == OpKind::Gemm ? op.m * op.n * op.batch_count : 2 * op.ew_rows * op.ew_cols;
  // A gate_up with the activation in its epilogue writes [m][n / 2] into Z (engine_ops.cpp run_gemm), where the
  // activation op it replaced used to grow Z: without this the branch wrote past an empty Zs.
  const int64_t need_z = op.kind == OpKind::Gemm && op.act_epilogue ? op.m * (op.n / 2) : op.ew_rows * op.ew_cols;
  auto grow = [&](gpu::DeviceBuffer& b, int64_t& cap, int64_t need, uint64_t salt) {
    if (need + 8 <= cap) return;
    cap = need + 8;
    b = gpu::DeviceBuffer(g.dev, size_t(cap) * 2);
    kn::fill_random(b.as<bf16>(), cap, opt_.seed * salt + uint64_t(g.id), 1.0f, g.stream);
    g.stream.synchronize();  // filled before the auxiliary stream reads it
  };
  {
    gpu::ScopedDevice d(g.dev);
    grow(g.Xs, g.cap_xs, need_x, 61);
    grow(g.Ys, g.cap_ys, need_y, 67);
    grow(g.Zs, g.cap_zs, need_z, 71);
  }
  // The branch's stream, runner and scratch stand in for the main ones while the op is enqueued
  // (every op kernel reads them from GpuState); swapped back however it ends.
  struct Swap {
    GpuState& g;
    explicit Swap(GpuState& s) : g(s) { flip(); }
    ~Swap() { flip(); }
    void flip() {
      std::swap(g.stream, g.aux);
      std::swap(g.gemm, g.gemm_aux);
      std::swap(g.X, g.Xs);
      std::swap(g.Y, g.Ys);
      std::swap(g.Z, g.Zs);
      std::swap(g.cap_x, g.cap_xs);
      std::swap(g.cap_y, g.cap_ys);
      std::swap(g.cap_z, g.cap_zs);
    }
  } swap(g);
  run_op(op, slot, nullptr);
}

void Engine::run_sends(const OpGraph& g, int stage, int slot) {
  for (int id : g.stage_ops[size_t(stage)]) {
    const Op& op = g.ops[size_t(id)];
    if (op.kind == OpKind::Send && mine(op)) run_op(op, slot, nullptr);
  }
}

bool Engine::run_stage_graph(const OpGraph& g, int stage, int64_t padded, int slot) {
  // This process's GPUs of the stage (all of them in one process; one, or none, under MPI).
  const std::vector<int> loc = local_of(plan_.stages[size_t(stage)].gpus);
  if (loc.empty()) return true;
  auto key = std::make_pair(stage, padded);
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    std::unique_ptr<StageGraph> sg = capture_stage(g, stage, slot, loc);
    if (!sg) return false;
    ++graphs_captured_;
    it = graphs_.emplace(key, std::move(sg)).first;
  }
  replay_stage(*it->second, loc);
  return true;
}

std::unique_ptr<Engine::StageGraph> Engine::capture_stage(const OpGraph& g, int stage, int slot,
                                                          const std::vector<int>& loc) {
  // Capture after one eager run of the same shape (allocations, cuBLAS plans, NCCL set-up). The
  // capture runs on the lead's stream; the stage's other GPUs fork from it and join back.
  run_stage_eager(g, stage, slot);
  for (int id : loc) gpu(id).stream.synchronize();
  GpuState& lead = gpu(loc[0]);
  auto sg = std::make_unique<StageGraph>();
  gpu::ScopedDevice d(lead.dev);
  CUDA_CHECK(cudaStreamBeginCapture(lead.stream, cudaStreamCaptureModeRelaxed));
  try {
    for (size_t i = 1; i < loc.size(); ++i) stream_wait(gpu(loc[i]), lead);
    run_stage_eager(g, stage, slot);
    for (size_t i = 1; i < loc.size(); ++i) stream_wait(lead, gpu(loc[i]));
    gpu::ScopedDevice d4(lead.dev);
    CUDA_CHECK(cudaStreamEndCapture(lead.stream, &sg->graph));
    CUDA_CHECK(cudaGraphInstantiate(&sg->exec, sg->graph, 0));
  } catch (const std::exception& e) {
    // Not capturable: this and every later iteration run eagerly; graph_failure() says why.
    cudaGraph_t junk = nullptr;
    gpu::ScopedDevice d4(lead.dev);
    cudaStreamEndCapture(lead.stream, &junk);
    if (junk) cudaGraphDestroy(junk);
    cudaGetLastError();
    graph_failure_ = e.what();
    opt_.cuda_graphs = false;
    return nullptr;
  }
  return sg;
}

void Engine::replay_stage(const StageGraph& sg, const std::vector<int>& loc) {
  // The graph runs on the lead's stream: order the other GPUs' streams around it.
  GpuState& lead = gpu(loc[0]);
  for (size_t i = 1; i < loc.size(); ++i) stream_wait(lead, gpu(loc[i]));
  {
    gpu::ScopedDevice d(lead.dev);
    CUDA_CHECK(cudaGraphLaunch(sg.exec, lead.stream));
  }
  for (size_t i = 1; i < loc.size(); ++i) stream_wait(gpu(loc[i]), lead);
}

}  // namespace peerplan::exec
