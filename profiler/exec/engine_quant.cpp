// Quantized-weight GEMMs of the engine (issue 15): an op whose wdtype is fp8, int8 or int4 runs
// gpu::QuantGemmRunner (the call the profiler times) on synthetic weights allocated in the stored
// format, with their scales, the first time the op runs. FP8 weights use per-tensor scales (static
// activation scale), as torch._scaled_mm's default and FP8 checkpoints with a static activation
// scheme; the profiler times the same.
#include <functional>

#include "planner/core/error.hpp"
#include "profiler/exec/engine_state.hpp"

namespace peerplan::exec {

void Engine::run_quant_gemm(const Op& op, GpuState& g) {
  if (op.batch_count != 1)
    throw RuntimeError("executor: quantized weights (" + std::string(dtype_name(op.wdtype)) + ") on op " + op.name +
                       " with batch_count " + std::to_string(op.batch_count) +
                       " do not run (one matrix per Gemm op; routed experts run as GroupedGemm)");
  auto it = g.qweights.find(op.name);
  if (it == g.qweights.end() || it->second.dtype != op.wdtype || it->second.n != op.n || it->second.k != op.k) {
    gpu::QuantWeight w = gpu::make_random_quant_weight(g.dev, op.wdtype, gpu::Fp8Scaling::PerTensor, op.n, op.k,
                                                       opt_.seed * 1000003 + std::hash<std::string>{}(op.name), g.stream);
    it = g.qweights.insert_or_assign(op.name, std::move(w)).first;
    settle_new_weights(g);
  }
  if (op.act_epilogue)  // SiLU(gate) * up into Z, as the activation op would write it (act_fusion.hpp)
    return g.qgemm->run_gate_up_act(g.X.as<bf16>(), it->second, g.Y.as<bf16>(), g.Z.as<bf16>(), op.m, g.stream);
  g.qgemm->run(g.X.as<bf16>(), it->second, g.Y.as<bf16>(), op.m, g.stream);
}

}  // namespace peerplan::exec
