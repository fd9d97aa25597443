#pragma once
// The engine's per-GPU device state, shared by its files (engine.cpp: the iteration loop;
// engine_alloc.cpp: buffers; engine_ops.cpp: compute ops; engine_comm.cpp: collectives and
// stage boundaries; engine_graph.cpp: CUDA-graph capture and replay). Internal to profiler/exec.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "profiler/exec/engine.hpp"
#include "profiler/gpu/gemm.hpp"
#include "profiler/gpu/gemm_quant.hpp"
#include "profiler/gpu/raii.hpp"
#include "profiler/kernels/moe_route.hpp"
#include "profiler/kernels/peer_allreduce.hpp"

namespace peerplan::exec {

using bf16 = __nv_bfloat16;

// Activations live in per-GPU scratch buffers (X: GEMM inputs, Y: GEMM outputs, Z: other outputs,
// hidden, qkv) filled with random values once; values are meaningless by design (synthetic
// weights), but every kernel reads and writes exactly the bytes, shapes and KV-cache positions of
// the real iteration, which is what its time depends on.
struct GpuState {
  int id = 0;
  int dev = 0;  // CUDA ordinal: = id in one process; the rank's local rank under MPI
  int stage = 0, rank = 0, dp = 1, tp = 1;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // attention shard
  gpu::Stream stream;
  gpu::Stream copy[2];
  std::unique_ptr<gpu::GemmRunner> gemm;
  std::map<std::string, gpu::DeviceBuffer> weights;
  // Quantized weights (issue 15): op.wdtype != bf16, in the stored format with scales.
  std::unique_ptr<gpu::QuantGemmRunner> qgemm;
  std::map<std::string, gpu::QuantWeight> qweights;
  bool kv_fp8 = false;  // the KV cache holds e4m3 codes (kSyntheticKvScale per tensor)
  gpu::DeviceBuffer X, Y, Z, hidden, qkv, normw, attn_ws;
  gpu::DeviceBuffer qknormw;  // qk_norm models (Qwen3): q_norm then k_norm weights, head_dim each
  int64_t cap_x = 0, cap_y = 0, cap_z = 0;
  std::map<int, std::pair<gpu::DeviceBuffer, gpu::DeviceBuffer>> kv;  // layer -> K, V
  // MLA models (engine_mla.cpp): per layer one latent cache [slots][max_ctx][576] instead of K and
  // V; the decoding tokens' absorbed queries [tokens][heads][576]; the prefill's expanded K and V
  // ([mla_slots][heads][max_ctx][192] each) and their slot table; this iteration's prefill
  // sequences in groups of at most mla_slots (first sequence, count) with each group's kv_b rows.
  bool mla = false;
  std::map<int, gpu::DeviceBuffer> latent;
  gpu::DeviceBuffer mla_q, mla_k, mla_v, mla_ident;
  int mla_slots = 0;
  float mla_scale = 0;
  std::vector<std::pair<int64_t, int>> mla_groups;
  std::vector<int64_t> mla_group_rows;
  // MoE (engine_moe.cpp): the last MoeRoute's device routing, reused by the layer's grouped GEMMs
  // and combine; the popularity CDF when routing is skewed.
  gpu::DeviceBuffer moe_buf, moe_cdf;
  kernels::MoeRouting moe;
  int64_t moe_cap_tokens = 0, moe_tokens = 0;
  // The routed rows' activation where the last gate_up's epilogue wrote it (Op::act_epilogue), for the
  // layer's down GEMM to read; null: in Z (the activation op's output).
  __nv_bfloat16* moe_act = nullptr;
  // Shared experts on a second stream (PEERPLAN_SHARED_STREAM=1; profiler/common/shared_stream.hpp):
  // the auxiliary stream, its own cuBLASLt runner (one workspace per stream) and scratch, created on
  // first use; while a branch runs they are swapped in for stream, gemm, X, Y and Z (engine_graph.cpp).
  gpu::Stream aux;
  std::unique_ptr<gpu::GemmRunner> gemm_aux;
  gpu::DeviceBuffer Xs, Ys, Zs;
  int64_t cap_xs = 0, cap_ys = 0, cap_zs = 0;
  bool aux_open = false;  // forked and not yet joined
  gpu::DeviceBuffer meta;                       // int32 metadata (see the offsets below)
  std::vector<gpu::PinnedHostBuffer> meta_host;  // one per in-flight slot
  std::vector<gpu::DeviceBuffer> recv;           // stage-boundary receive buffer per slot
  gpu::PinnedHostBuffer staging;                 // host-staged sends out of this GPU
  std::vector<gpu::Event> start, done;           // per slot (timing events: per-iteration records)
  gpu::Event epoch;                              // GPU time 0 of the per-iteration records
  gpu::Stream finish;                            // MPI, rank 0: receives the last stage's "done"
  gpu::DeviceBuffer token;                       // MPI: the one-byte "done" messages
  std::vector<gpu::Event> pool;                  // sync events (fork/join, sends, chunks)
  size_t pool_next = 0;
  // This iteration on this GPU.
  int64_t ntok = 0, npf_seqs = 0, ndc = 0, npf_tok = 0, max_q = 0;
  // Metadata layout (int32 offsets).
  int64_t o_pos = 0, o_slot = 0, o_ids = 0, o_qstart = 0, o_pflen = 0, o_pfslot = 0, o_dclen = 0, o_dcslot = 0,
          o_pfctx = 0, meta_ints = 0;  // o_pfctx: MLA, each prefill group's prefix sums of contexts
  cudaEvent_t next_event() {
    cudaEvent_t e = pool[pool_next % pool.size()].get();
    ++pool_next;
    return e;
  }
  int* m(int64_t off) const { return meta.as<int>() + off; }
};

// Per-tensor scale of the synthetic FP8 KV cache: random codes up to 448 -> values up to 1.
inline constexpr float kSyntheticKvScale = 1.f / 448;

// A TP group's peer-memory all-reduce (issue 17): each member's Y is its registered input (peer
// access is on between the plan's GPUs), its scratch and signal block allocated once here.
// Under MPI each process holds its own member's buffers and maps the others' (CUDA IPC).
struct Engine::PeerArState {
  ArGroup group;                        // what choose_allreduce looks at
  kernels::PeerArRanks ranks;           // rank r = position in the sorted group
  std::vector<gpu::DeviceBuffer> scratch, signal;
  int64_t cap_bytes = 0;                // the smallest member's Y: larger all-reduces run NCCL
  std::vector<void*> mapped;            // MPI: peers' allocations opened here
  int device = 0;                       // MPI: this process's device (to close them on)
  PeerArState() = default;
  PeerArState(const PeerArState&) = delete;
  PeerArState& operator=(const PeerArState&) = delete;
  ~PeerArState() {
    if (mapped.empty()) return;
    int prev = 0;
    cudaGetDevice(&prev);
    cudaSetDevice(device);
    for (void* p : mapped) cudaIpcCloseMemHandle(p);  // teardown: nothing to report to
    cudaSetDevice(prev);
  }
};

struct Engine::StageGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~StageGraph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

// `waiter`'s stream waits for all work enqueued so far on `signaller`'s stream (an event from
// the signaller's pool, recorded on its device).
void stream_wait(GpuState& waiter, GpuState& signaller);

}  // namespace peerplan::exec
