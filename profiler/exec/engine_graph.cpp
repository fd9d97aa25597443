// A stage's ops launched eagerly (prefill and mixed iterations, as vLLM), or captured once per
// (stage, padded decode batch) into a CUDA graph and replayed (decode-only iterations).
#include <chrono>

#include "profiler/exec/engine_state.hpp"
#include "profiler/gpu/cuda_check.hpp"

namespace peerplan::exec {

void Engine::run_stage_eager(const OpGraph& g, int stage, int slot) {
  for (int id : g.stage_ops[size_t(stage)]) {
    const Op& op = g.ops[size_t(id)];
    if (op.kind == OpKind::Send || !mine(op)) continue;
    const auto t0 = std::chrono::steady_clock::now();
    run_op(op, slot, nullptr);
    enqueue_s_.emplace_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), &op);
  }
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
