// The op interpreter: each op of compile_iteration's graph becomes the kernel, collective or copy
// an inference engine would run for it. Activations live in per-GPU scratch buffers (X: GEMM
// inputs, Y: GEMM outputs, Z: other outputs, hidden, qkv) filled with random values once; values
// are meaningless by design (synthetic weights), but every kernel reads and writes exactly the
// bytes, shapes and KV-cache positions of the real iteration, which is what its time depends on.
#include "profiler/exec/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "planner/compile/compiler.hpp"
#include "planner/plan/sharding.hpp"
#include "planner/core/error.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/kernels/attention.hpp"
#include "profiler/kernels/elementwise.hpp"

namespace peerplan::exec {

namespace kn = peerplan::kernels;
using bf16 = __nv_bfloat16;

namespace {
constexpr int64_t kStageChunk = int64_t(4) << 20;  // host-staged copies: 4 MiB chunks, two streams
bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}
}  // namespace

struct GpuState {
  int id = 0;
  int dev = 0;  // CUDA ordinal: = id in one process; the rank's local rank under MPI
  int stage = 0, rank = 0, dp = 1, tp = 1;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // attention shard
  gpu::Stream stream;
  gpu::Stream copy[2];
  std::unique_ptr<gpu::GemmRunner> gemm;
  std::map<std::string, gpu::DeviceBuffer> weights;
  gpu::DeviceBuffer X, Y, Z, hidden, qkv, normw, attn_ws;
  int64_t cap_x = 0, cap_y = 0, cap_z = 0;
  std::map<int, std::pair<gpu::DeviceBuffer, gpu::DeviceBuffer>> kv;  // layer -> K, V
  gpu::DeviceBuffer meta;                       // int32 metadata (see Layout)
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
  int64_t last_gemm_n = 0;
  // Metadata layout (int32 offsets).
  int64_t o_pos = 0, o_slot = 0, o_ids = 0, o_qstart = 0, o_pflen = 0, o_pfslot = 0, o_dclen = 0, o_dcslot = 0,
          meta_ints = 0;
  cudaEvent_t next_event() {
    cudaEvent_t e = pool[pool_next % pool.size()].get();
    ++pool_next;
    return e;
  }
  int* m(int64_t off) const { return meta.as<int>() + off; }
};

struct Engine::StageGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~StageGraph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

GpuState& Engine::gpu(int id) { return *state_.at(id); }

Engine::Engine(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
               const ExecOptions& opt, int64_t kv_slots, int64_t max_ctx, int64_t max_tokens, int in_flight)
    : plan_(plan), cfg_(cfg), fig_(fig), machine_(machine), opt_(opt), kv_slots_(kv_slots), max_ctx_(max_ctx),
      max_tokens_(max_tokens), in_flight_(std::max(1, in_flight)) {
  if (cfg.mla) throw InputError(cfg.source_file, "kv_lora_rank", "a model without MLA: the executor has no MLA kernels yet");
  if (!kn::attention_head_dim_supported(int(cfg.head_dim)))
    throw InputError(cfg.source_file, "head_dim", "64 or 128 (the executor's attention kernels)");
  // Never NVLink multicast (it can take a shared host's GPUs out of service); P2P off is set
  // before any communicator exists, as NCCL reads it at init.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  if (!opt.p2p) setenv("NCCL_P2P_DISABLE", "1", 1);
  gpus_ = plan.all_gpus();
  bus_ = opt.bus;
  for (int id : gpus_)
    if (!bus_ || id == bus_->rank()) local_.insert(id);
  CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, bus_ ? bus_->device() : gpus_.front()));

  for (size_t si = 0; si < plan.stages.size(); ++si) {
    const PlanStage& st = plan.stages[si];
    const StageLayout lay = stage_layout(plan, si);
    for (size_t r = 0; r < st.gpus.size(); ++r) {
      if (!local(st.gpus[r])) continue;  // MPI: another rank's GPU
      auto g = std::make_unique<GpuState>();
      g->id = st.gpus[r];
      g->dev = bus_ ? bus_->device() : g->id;
      g->stage = int(si);
      g->rank = int(r);
      g->dp = lay.dp;
      g->tp = lay.tp;
      const AttnShard a = attn_shard(cfg, fig.layers[size_t(st.layer_begin)], lay.tp);
      g->heads = a.heads;
      g->kv_heads = a.kv_heads;
      g->head_dim = a.qk_dim;
      state_[g->id] = std::move(g);
    }
  }
  // Peer access both ways between GPUs of the plan, or explicitly none with --p2p off.
  if (opt.p2p && !bus_) {  // MPI: NCCL sets up peer paths between the ranks' processes itself
    for (int a : gpus_)
      for (int b : gpus_) {
        if (a == b) continue;
        int can = 0;
        CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
        if (!can) continue;
        gpu::ScopedDevice d(a);
        cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
        else CUDA_CHECK(e);
      }
  }

  // Worst-case shapes size the scratch buffers: a full prefill and a full (padded) decode batch.
  BatchShape pf{1, max_tokens, max_tokens, 0, 0};
  BatchShape dc{0, 0, 0, padded_batch(kv_slots), max_ctx};
  std::map<int, int64_t> need_x, need_y, need_z;
  for (const BatchShape& s : {pf, dc}) {
    OpGraph g = compile(s);
    for (const Op& op : g.ops) {
      for (int id : op.gpus) {
        auto& x = need_x[id];
        auto& y = need_y[id];
        auto& z = need_z[id];
        if (op.kind == OpKind::Gemm) {
          x = std::max(x, op.m * op.k * op.batch_count);
          y = std::max(y, op.m * op.n * op.batch_count);
        } else if (is_collective(op.kind)) {
          y = std::max(y, op.bytes / 2 + 8);
          z = std::max(z, op.bytes / 2 + 8);
        } else if (op.kind == OpKind::Attention) {
          z = std::max(z, (op.attn_batch * op.attn_q_len + 8) * op.attn_heads * op.attn_head_dim);
        } else if (op.kind == OpKind::Elementwise) {
          z = std::max(z, int64_t(op.mem_bytes / 2) + 8);
        }
      }
    }
  }
  const int64_t H = cfg.hidden;
  const int64_t tok_cap = std::max(max_tokens, padded_batch(kv_slots)) + 8;
  const int64_t seq_cap = std::max<int64_t>(padded_batch(kv_slots), max_tokens) + 8;
  for (auto& [id, gp] : state_) {
    GpuState& g = *gp;
    const int dev = g.dev;  // CUDA ordinal (= id in one process; the local rank under MPI)
    gpu::ScopedDevice d(dev);
    g.stream = gpu::Stream(dev);
    g.copy[0] = gpu::Stream(dev);
    g.copy[1] = gpu::Stream(dev);
    g.gemm = std::make_unique<gpu::GemmRunner>(dev);
    g.cap_x = need_x[id] + 8;
    g.cap_y = need_y[id] + 8;
    g.cap_z = std::max(need_z[id], need_y[id]) + 8;
    g.X = gpu::DeviceBuffer(dev, size_t(g.cap_x) * 2);
    g.Y = gpu::DeviceBuffer(dev, size_t(g.cap_y) * 2);
    g.Z = gpu::DeviceBuffer(dev, size_t(g.cap_z) * 2);
    g.hidden = gpu::DeviceBuffer(dev, size_t(tok_cap * H) * 2);
    const int64_t qkv_w = (g.heads + 2 * g.kv_heads) * g.head_dim;
    g.qkv = gpu::DeviceBuffer(dev, size_t(tok_cap * qkv_w) * 2);
    g.normw = gpu::DeviceBuffer(dev, size_t(H) * 2);
    kn::fill_random(g.X.as<bf16>(), g.cap_x, opt.seed * 31 + id, 1.0f, g.stream);
    kn::fill_random(g.Y.as<bf16>(), g.cap_y, opt.seed * 37 + id, 1.0f, g.stream);
    kn::fill_random(g.Z.as<bf16>(), g.cap_z, opt.seed * 41 + id, 1.0f, g.stream);
    kn::fill_random(g.hidden.as<bf16>(), tok_cap * H, opt.seed * 43 + id, 1.0f, g.stream);
    kn::fill_random(g.qkv.as<bf16>(), tok_cap * qkv_w, opt.seed * 47 + id, 1.0f, g.stream);
    kn::fill_value(g.normw.as<bf16>(), H, 1.0f, g.stream);
    // Split-K workspace: the chunk length depends on the batch, so size for the worst batch.
    size_t ws = 256;
    for (int64_t b = 1; b <= std::max(padded_batch(kv_slots), max_tokens); ++b)
      ws = std::max(ws, kn::decode_attention_workspace_bytes(int(b), int(g.heads), int(g.head_dim), int(max_ctx),
                                                             int(g.kv_heads), sm_count_));
    g.attn_ws = gpu::DeviceBuffer(dev, ws);
    // KV cache of this GPU's layers: kv_slots + 1 slots (the last one absorbs padded sequences).
    const PlanStage& st = plan.stages[size_t(g.stage)];
    const size_t kv_bytes = size_t((kv_slots + 1) * g.kv_heads * max_ctx * g.head_dim) * 2;
    for (int64_t l = st.layer_begin; l < st.layer_end; ++l) {
      gpu::DeviceBuffer k(dev, kv_bytes), v(dev, kv_bytes);
      kn::fill_random(k.as<bf16>(), int64_t(kv_bytes / 2), opt.seed * 53 + uint64_t(l), 1.0f, g.stream);
      kn::fill_random(v.as<bf16>(), int64_t(kv_bytes / 2), opt.seed * 59 + uint64_t(l), 1.0f, g.stream);
      g.kv[int(l)] = {std::move(k), std::move(v)};
    }
    // Metadata.
    int64_t off = 0;
    auto take = [&](int64_t n) { int64_t o = off; off += (n + 31) / 32 * 32; return o; };
    g.o_pos = take(tok_cap);
    g.o_slot = take(tok_cap);
    g.o_ids = take(tok_cap);
    g.o_qstart = take(seq_cap + 1);
    g.o_pflen = take(seq_cap);
    g.o_pfslot = take(seq_cap);
    g.o_dclen = take(seq_cap);
    g.o_dcslot = take(seq_cap);
    g.meta_ints = off;
    g.meta = gpu::DeviceBuffer(dev, size_t(off) * 4);
    CUDA_CHECK(cudaMemsetAsync(g.meta.get(), 0, size_t(off) * 4, g.stream));
    for (int s = 0; s < in_flight_; ++s) {
      g.meta_host.emplace_back(size_t(off) * 4);
      g.recv.emplace_back(dev, size_t(tok_cap * H) * 2);
      g.start.emplace_back(dev);
      g.done.emplace_back(dev);
    }
    g.staging = gpu::PinnedHostBuffer(size_t(tok_cap * H) * 2);
    g.epoch = gpu::Event(dev);
    if (bus_) {
      g.finish = gpu::Stream(dev);
      g.token = gpu::DeviceBuffer(dev, 256);
      CUDA_CHECK(cudaMemsetAsync(g.token.get(), 0, 256, g.stream));
    }
    for (int i = 0; i < 256; ++i) g.pool.emplace_back(dev, cudaEventDisableTiming);
  }
  for (auto& [id, gp] : state_) gp->stream.synchronize();

  if (bus_) {
    // Every communicator the plan's iterations use, created here in one sorted order on every
    // rank (ncclCommInitRank blocks until the group's members join; one global order cannot
    // deadlock): the collectives' groups and stage-boundary pairs of the worst-case iterations,
    // then the completion pairs (rank 0 with each other GPU of the last stage). A group an
    // iteration needs later and is missing here is created on first use, in op order.
    std::set<std::vector<int>> groups;
    for (const BatchShape& s : {pf, dc}) {
      OpGraph g = compile(s);
      for (const Op& op : g.ops) {
        if (!is_collective(op.kind) && op.kind != OpKind::Send) continue;
        std::vector<int> key = op.gpus;
        std::sort(key.begin(), key.end());
        groups.insert(key);
      }
    }
    for (const auto& key : groups)
      if (std::binary_search(key.begin(), key.end(), bus_->rank())) rank_comm(key, 0);
    for (int x : plan.stages.back().gpus)
      if (x != 0 && (bus_->rank() == 0 || bus_->rank() == x)) rank_comm({0, x}, 1);
  }
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

ncclComm_t Engine::rank_comm(const std::vector<int>& group, int kind) {
  auto key = std::make_pair(kind, group);
  auto it = rank_comms_.find(key);
  if (it != rank_comms_.end()) return it->second;
  const int me = bus_->rank();
  const auto pos = std::find(group.begin(), group.end(), me);
  if (pos == group.end())
    throw RuntimeError(fmt::format("executor: rank {} asked for a communicator of a group it is not in", me));
  // The unique id from the group's first member, sent over MPI; then every member joins.
  ncclUniqueId uid{};
  if (group.front() == me) NCCL_CHECK(ncclGetUniqueId(&uid));
  bus_->share_id(&uid, sizeof uid, group);
  gpu::ScopedDevice d(bus_->device());
  ncclComm_t c = nullptr;
  NCCL_CHECK(ncclCommInitRank(&c, int(group.size()), uid, int(pos - group.begin())));
  return rank_comms_.emplace(key, c).first->second;
}

void Engine::signal_done() {
  const std::vector<int>& last = plan_.stages.back().gpus;
  const int me = bus_->rank();
  if (me != 0) {
    if (!local(me) || std::find(last.begin(), last.end(), me) == last.end()) return;
    GpuState& g = gpu(me);
    ncclComm_t c = rank_comm({0, me}, 1);
    gpu::ScopedDevice d(g.dev);
    NCCL_CHECK(ncclSend(g.token.get(), 1, ncclInt8, 0, c, g.stream));
    return;
  }
  // Rank 0: its "finish" stream waits for its own work of the iteration, then for a byte from
  // every other GPU of the last stage, as an engine's driver waits for the sampled tokens.
  GpuState& g = gpu(0);
  std::vector<std::pair<int, ncclComm_t>> from;
  for (int x : last)
    if (x != 0) from.emplace_back(x, rank_comm({0, x}, 1));
  gpu::ScopedDevice d(g.dev);
  cudaEvent_t e = g.next_event();
  CUDA_CHECK(cudaEventRecord(e, g.stream));
  CUDA_CHECK(cudaStreamWaitEvent(g.finish, e, 0));
  if (from.empty()) return;
  NCCL_CHECK(ncclGroupStart());
  for (auto& [x, c] : from) NCCL_CHECK(ncclRecv(g.token.as<char>() + (x % 256), 1, ncclInt8, 1, c, g.finish));
  NCCL_CHECK(ncclGroupEnd());
}

int64_t Engine::padded_batch(int64_t b) const {
  // vLLM's capture sizes: 1, 2, 4, then multiples of 8.
  if (b <= 1) return 1;
  if (b <= 2) return 2;
  if (b <= 4) return 4;
  return (b + 7) / 8 * 8;
}

BatchShape Engine::shape_of(const std::vector<SeqRun>& seqs) {
  BatchShape s;
  int64_t pf_ctx = 0, dc_ctx = 0;
  for (const SeqRun& q : seqs) {
    if (q.prefill) {
      ++s.prefill_seqs;
      s.prefill_tokens += q.new_tokens;
      pf_ctx += q.context;
    } else {
      ++s.decode_seqs;
      dc_ctx += q.context;
    }
  }
  if (s.prefill_seqs) s.prefill_context = (pf_ctx + s.prefill_seqs - 1) / s.prefill_seqs;
  if (s.decode_seqs) s.decode_context = std::max<int64_t>(1, (dc_ctx + s.decode_seqs - 1) / s.decode_seqs);
  return s;
}

int64_t Engine::warm_gemm_plans(int64_t max_tokens, int64_t max_seqs) {
  // The GEMM dimensions depend on the total token count (and, for the LM head, on the number of
  // sequences), so one-sequence prefills of every length and decodes of every batch cover them.
  // Then one GEMM per distinct kernel configuration, at its smallest M: cuBLASLt's first call of a
  // kernel costs ~2.5 ms of host time (measured: 2.4-3.5 ms for 8B shapes on H200), which
  // otherwise lands inside the first serving iterations that need it (as TTFT).
  std::set<std::tuple<int, int64_t, int64_t, int64_t>> seen;
  std::map<std::tuple<int, int64_t, int64_t, uint64_t>, int64_t> kernels;  // (gpu, n, k, algo) -> smallest M
  auto add = [&](const BatchShape& sh) {
    for (const Op& op : compile(sh).ops) {
      if (op.kind != OpKind::Gemm || !local(op.gpus[0]) || !seen.emplace(op.gpus[0], op.m, op.n, op.k).second) continue;
      const uint64_t algo = gpu(op.gpus[0]).gemm->prepare(op.m, op.n, op.k);
      auto [it, fresh] = kernels.emplace(std::make_tuple(op.gpus[0], op.n, op.k, algo), op.m);
      if (!fresh) it->second = std::min(it->second, op.m);
    }
  };
  for (int64_t t = 1; t <= max_tokens; ++t) add(BatchShape{1, t, t, 0, 0});
  for (int64_t b = 1; b <= padded_batch(max_seqs); ++b) add(BatchShape{0, 0, 0, b, 2});
  for (const auto& [key, m] : kernels) {
    const auto& [id, n, k, algo] = key;
    GpuState& g = gpu(id);
    if (m * k > g.cap_x || m * n > g.cap_y) continue;  // cannot happen: X/Y hold the largest iteration
    // The weights: borrowed from Z when n x k fits there, else allocated for the call (start-up only).
    gpu::DeviceBuffer w;
    const bf16* wp = nullptr;
    if (n * k <= g.cap_z) wp = g.Z.as<bf16>();
    else {
      w = gpu::DeviceBuffer(g.dev, size_t(n * k) * 2);
      wp = w.as<bf16>();
    }
    g.gemm->run(g.X.as<bf16>(), wp, g.Y.as<bf16>(), m, n, k, g.stream);
    if (w.get()) g.stream.synchronize();
  }
  for (auto& [id, gp] : state_) gp->stream.synchronize();
  warm_kernels_ = int64_t(kernels.size());
  return int64_t(seen.size());
}

OpGraph Engine::compile(const BatchShape& shape) const { return compile_iteration(plan_, cfg_, fig_, machine_, shape); }

void Engine::upload_meta(const std::vector<SeqRun>& seqs, int slot) {
  for (auto& [id, gp] : state_) {
    GpuState& g = *gp;
    int* h = g.meta_host[size_t(slot)].as<int>();
    g.ntok = g.npf_seqs = g.ndc = g.npf_tok = g.max_q = 0;
    int64_t tok = 0;
    std::vector<const SeqRun*> mine;
    for (size_t i = 0; i < seqs.size(); ++i)
      if (g.dp <= 1 || int(i % size_t(g.dp)) == g.rank % g.dp) mine.push_back(&seqs[i]);
    h[g.o_qstart] = 0;
    for (const SeqRun* q : mine) {
      const int first = q->context - q->new_tokens;
      for (int t = 0; t < q->new_tokens; ++t) {
        h[g.o_pos + tok] = first + t;
        h[g.o_slot + tok] = q->slot;
        h[g.o_ids + tok] = int((tok * 2654435761ull + uint64_t(q->slot) * 97) % uint64_t(cfg_.vocab));
        ++tok;
      }
      if (q->prefill) {
        h[g.o_pflen + g.npf_seqs] = q->context;
        h[g.o_pfslot + g.npf_seqs] = q->slot;
        ++g.npf_seqs;
        h[g.o_qstart + g.npf_seqs] = int(tok);
        g.npf_tok += q->new_tokens;
        g.max_q = std::max<int64_t>(g.max_q, q->new_tokens);
      } else {
        h[g.o_dclen + g.ndc] = q->context;
        h[g.o_dcslot + g.ndc] = q->slot;
        ++g.ndc;
      }
    }
    g.ntok = tok;
    gpu::ScopedDevice d(g.dev);
    CUDA_CHECK(cudaMemcpyAsync(g.meta.get(), h, size_t(g.meta_ints) * 4, cudaMemcpyHostToDevice, g.stream));
  }
}

namespace {
// One member's part of a collective (one of n on communicator c), on its compute stream.
void enqueue_collective(const Op& op, GpuState& g, ncclComm_t c, int n) {
    void* y = g.Y.get();
    void* z = g.Z.get();
    const size_t elems = size_t(op.bytes / 2);
    switch (op.kind) {
      case OpKind::AllReduce: NCCL_CHECK(ncclAllReduce(y, y, elems, ncclBfloat16, ncclSum, c, g.stream)); break;
      case OpKind::AllGather:
        NCCL_CHECK(ncclAllGather(y, z, elems / size_t(n), ncclBfloat16, c, g.stream));
        break;
      case OpKind::ReduceScatter:
        NCCL_CHECK(ncclReduceScatter(y, z, elems / size_t(n), ncclBfloat16, ncclSum, c, g.stream));
        break;
      case OpKind::Broadcast: NCCL_CHECK(ncclBroadcast(y, y, elems, ncclBfloat16, 0, c, g.stream)); break;
      case OpKind::AllToAll: {
        // Uniform routing as the compiler assumes: each peer gets an equal share.
        const size_t per = elems / size_t(n);
        for (int p = 0; p < n; ++p) {
          NCCL_CHECK(ncclSend(g.Y.as<bf16>() + size_t(p) * per, per, ncclBfloat16, p, c, g.stream));
          NCCL_CHECK(ncclRecv(g.Z.as<bf16>() + size_t(p) * per, per, ncclBfloat16, p, c, g.stream));
        }
        break;
      }
      default: break;
    }
}
}  // namespace

void Engine::ncclgroup_collective(const Op& op) {
  std::vector<int> key = op.gpus;
  std::sort(key.begin(), key.end());
  if (bus_) {
    // One member per process: this rank's part, on the group's communicator from ncclCommInitRank.
    const int me = bus_->rank();
    const auto pos = std::find(key.begin(), key.end(), me);
    if (pos == key.end()) return;
    ncclComm_t c = rank_comm(key, 0);
    GpuState& g = gpu(me);
    gpu::ScopedDevice d(g.dev);
    NCCL_CHECK(ncclGroupStart());  // all-to-all: the sends and receives as one group
    enqueue_collective(op, g, c, int(key.size()));
    NCCL_CHECK(ncclGroupEnd());
    return;
  }
  auto it = comms_.find(key);
  if (it == comms_.end()) it = comms_.emplace(key, std::make_unique<gpu::NcclComms>(key)).first;
  gpu::NcclComms& comms = *it->second;
  const int n = comms.size();
  NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    GpuState& g = gpu(comms.devices()[size_t(r)]);
    gpu::ScopedDevice d(g.dev);
    enqueue_collective(op, g, comms[r], n);
  }
  NCCL_CHECK(ncclGroupEnd());
}

void Engine::run_op(const Op& op, int slot, std::vector<cudaEvent_t>* send_done) {
  if (is_collective(op.kind)) return ncclgroup_collective(op);
  if (op.kind == OpKind::Send && bus_) {
    // Between processes a stage boundary is an NCCL send/recv on the pair's communicator, as
    // multi-process engines (vLLM, SGLang, TensorRT-LLM pipeline parallelism) pass activations;
    // with --p2p off NCCL_P2P_DISABLE=1 makes NCCL stage it through shared host memory.
    const int src = op.gpus[0], dst = op.gpus[1], me = bus_->rank();
    if (me != src && me != dst) return;
    ncclComm_t c = rank_comm({std::min(src, dst), std::max(src, dst)}, 0);
    const int peer = (me == src ? dst : src) == std::min(src, dst) ? 0 : 1;
    GpuState& g = gpu(me);
    gpu::ScopedDevice d(g.dev);
    if (me == src) NCCL_CHECK(ncclSend(g.hidden.get(), size_t(op.bytes), ncclInt8, peer, c, g.stream));
    else NCCL_CHECK(ncclRecv(g.recv[size_t(slot)].get(), size_t(op.bytes), ncclInt8, peer, c, g.stream));
    return;
  }
  if (op.kind == OpKind::Send) {
    GpuState& src = gpu(op.gpus[0]);
    GpuState& dst = gpu(op.gpus[1]);
    const size_t bytes = size_t(op.bytes);
    void* to = dst.recv[size_t(slot)].get();
    if (op.mode != TransferMode::HostStaged) {
      gpu::ScopedDevice d(src.dev);
      CUDA_CHECK(cudaMemcpyPeerAsync(to, dst.id, src.hidden.get(), src.id, bytes, src.stream));
      cudaEvent_t e = src.next_event();
      CUDA_CHECK(cudaEventRecord(e, src.stream));
      if (send_done) send_done->push_back(e);
      gpu::ScopedDevice d2(dst.dev);
      CUDA_CHECK(cudaStreamWaitEvent(dst.stream, e, 0));
    } else {
      // Device -> pinned host -> device in chunks over two streams per side, so the PCIe
      // directions overlap (what an application does without P2P).
      cudaEvent_t ready;
      {
        gpu::ScopedDevice d(src.dev);
        ready = src.next_event();
        CUDA_CHECK(cudaEventRecord(ready, src.stream));
        CUDA_CHECK(cudaStreamWaitEvent(src.copy[0], ready, 0));
        CUDA_CHECK(cudaStreamWaitEvent(src.copy[1], ready, 0));
      }
      char* host = src.staging.as<char>();
      int c = 0;
      for (size_t off = 0; off < bytes; off += size_t(kStageChunk), ++c) {
        const size_t n = std::min(size_t(kStageChunk), bytes - off);
        cudaEvent_t down;
        {
          gpu::ScopedDevice d(src.dev);
          CUDA_CHECK(cudaMemcpyAsync(host + off, src.hidden.as<char>() + off, n, cudaMemcpyDeviceToHost, src.copy[c % 2]));
          down = src.next_event();
          CUDA_CHECK(cudaEventRecord(down, src.copy[c % 2]));
        }
        gpu::ScopedDevice d(dst.dev);
        CUDA_CHECK(cudaStreamWaitEvent(dst.copy[c % 2], down, 0));
        CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(to) + off, host + off, n, cudaMemcpyHostToDevice, dst.copy[c % 2]));
      }
      gpu::ScopedDevice d(dst.dev);
      for (int i = 0; i < 2; ++i) {
        cudaEvent_t e = dst.next_event();
        CUDA_CHECK(cudaEventRecord(e, dst.copy[i]));
        CUDA_CHECK(cudaStreamWaitEvent(dst.stream, e, 0));
      }
      // The source may overwrite `hidden` only after the staging copies read it.
      gpu::ScopedDevice d3(src.dev);
      for (int i = 0; i < 2; ++i) {
        cudaEvent_t e = src.next_event();
        CUDA_CHECK(cudaEventRecord(e, src.copy[i]));
        CUDA_CHECK(cudaStreamWaitEvent(src.stream, e, 0));
      }
    }
    return;
  }

  GpuState& g = gpu(op.gpus[0]);
  gpu::ScopedDevice d(g.dev);
  cudaStream_t s = g.stream;
  const int64_t H = cfg_.hidden;
  switch (op.kind) {
    case OpKind::Gemm: {
      const std::string key = op.name;
      auto it = g.weights.find(key);
      const int64_t welems = op.n * op.k * op.batch_count;
      if (it == g.weights.end() || int64_t(it->second.bytes()) < welems * 2) {
        gpu::DeviceBuffer w(g.dev, size_t(welems) * 2);
        kn::fill_random(w.as<bf16>(), welems, opt_.seed * 1000003 + std::hash<std::string>{}(key), 0.02f, s);
        it = g.weights.insert_or_assign(key, std::move(w)).first;
      }
      for (int64_t e = 0; e < op.batch_count; ++e)
        g.gemm->run(g.X.as<bf16>() + e * op.m * op.k, it->second.as<bf16>() + e * op.n * op.k,
                    g.Y.as<bf16>() + e * op.m * op.n, op.m, op.n, op.k, s);
      g.last_gemm_n = op.n;
      break;
    }
    case OpKind::Embedding: {
      const int64_t vocab_local = (cfg_.vocab + g.tp - 1) / g.tp;
      auto it = g.weights.find("embed");
      if (it == g.weights.end()) {
        gpu::DeviceBuffer w(g.dev, size_t(vocab_local * H) * 2);
        kn::fill_random(w.as<bf16>(), vocab_local * H, opt_.seed * 7919 + g.id, 0.02f, s);
        it = g.weights.emplace("embed", std::move(w)).first;
      }
      kn::embedding_gather(g.m(g.o_ids), it->second.as<bf16>(), g.hidden.as<bf16>(), g.ntok, vocab_local, H, s);
      break;
    }
    case OpKind::Attention: {
      auto& kv = g.kv.at(op.layer);
      const int64_t qkv_w = (g.heads + 2 * g.kv_heads) * g.head_dim;
      if (op.attn_prefill) {
        kn::PrefillAttention a;
        a.q = g.qkv.as<bf16>();
        a.q_row_stride = qkv_w;
        a.k_cache = kv.first.as<bf16>();
        a.v_cache = kv.second.as<bf16>();
        a.slots = g.m(g.o_pfslot);
        a.q_start = g.m(g.o_qstart);
        a.seq_lens = g.m(g.o_pflen);
        a.out = g.Z.as<bf16>();
        a.num_seqs = int(g.npf_seqs);
        a.max_q_len = int(g.max_q);
        a.heads = int(g.heads);
        a.kv_heads = int(g.kv_heads);
        a.head_dim = int(g.head_dim);
        a.max_ctx = int(max_ctx_);
        kn::prefill_attention(a, s);
      } else {
        kn::DecodeAttention a;
        a.q = g.qkv.as<bf16>() + g.npf_tok * qkv_w;
        a.q_row_stride = qkv_w;
        a.k_cache = kv.first.as<bf16>();
        a.v_cache = kv.second.as<bf16>();
        a.slots = g.m(g.o_dcslot);
        a.seq_lens = g.m(g.o_dclen);
        a.out = g.Z.as<bf16>() + g.npf_tok * g.heads * g.head_dim;
        a.workspace = g.attn_ws.as<float>();
        a.batch = int(g.ndc);
        a.heads = int(g.heads);
        a.kv_heads = int(g.kv_heads);
        a.head_dim = int(g.head_dim);
        a.max_ctx = int(max_ctx_);
        kn::decode_attention(a, sm_count_, s);
      }
      break;
    }
    case OpKind::Elementwise: {
      const std::string& n = op.name;
      if (ends_with(n, "_norm") || n == "final_norm") {
        kn::rmsnorm(g.hidden.as<bf16>(), g.normw.as<bf16>(), g.Z.as<bf16>(), g.ntok, H, 1e-5f, s);
      } else if (ends_with(n, "rotary")) {
        kn::RotaryCache r;
        r.qkv = g.qkv.as<bf16>();
        r.positions = g.m(g.o_pos);
        r.token_slot = g.m(g.o_slot);
        auto& kv = g.kv.at(op.layer);
        r.k_cache = kv.first.as<bf16>();
        r.v_cache = kv.second.as<bf16>();
        r.tokens = g.ntok;
        r.heads = int(g.heads);
        r.kv_heads = int(g.kv_heads);
        r.head_dim = int(g.head_dim);
        r.max_ctx = int(max_ctx_);
        kn::rotary_and_cache(r, s);
      } else if (ends_with(n, "_residual")) {
        kn::residual_add(g.hidden.as<bf16>(), g.Z.as<bf16>(), g.ntok * H, s);
      } else if (ends_with(n, "act")) {
        const int64_t elems = int64_t(op.mem_bytes / 6.0);  // 3 touches x 2 bytes
        const int64_t inter = std::max<int64_t>(8, g.last_gemm_n / 2);
        const int64_t rows = std::max<int64_t>(1, elems / inter);
        kn::silu_mul(g.Y.as<bf16>(), g.Z.as<bf16>(), rows, inter / 8 * 8, s);
      } else {
        // An elementwise op this executor has no kernel for: move the bytes the compiler says it
        // moves (half read, half written) so its time is still of the right size.
        const size_t b = std::min(size_t(op.mem_bytes / 2), size_t(g.cap_z) * 2);
        CUDA_CHECK(cudaMemcpyAsync(g.Z.get(), g.Y.get(), std::min(b, size_t(g.cap_y) * 2), cudaMemcpyDeviceToDevice, s));
      }
      break;
    }
    default: break;
  }
}

void Engine::stage_fence(int, int) {}

void Engine::run_stage_eager(const OpGraph& g, int stage, int slot) {
  for (int id : g.stage_ops[size_t(stage)]) {
    const Op& op = g.ops[size_t(id)];
    if (op.kind == OpKind::Send || !mine(op)) continue;
    const auto t0 = std::chrono::steady_clock::now();
    run_op(op, slot, nullptr);
    enqueue_s_.emplace_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), &op);
  }
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
  GpuState& lead = gpu(loc[0]);
  auto key = std::make_pair(stage, padded);
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    // Capture after one eager run of the same shape (allocations, cuBLAS plans, NCCL set-up).
    run_stage_eager(g, stage, slot);
    for (int id : loc) gpu(id).stream.synchronize();
    auto sg = std::make_unique<StageGraph>();
    gpu::ScopedDevice d(lead.dev);
    CUDA_CHECK(cudaStreamBeginCapture(lead.stream, cudaStreamCaptureModeRelaxed));
    try {
      for (size_t i = 1; i < loc.size(); ++i) {
        cudaEvent_t e = lead.next_event();
        CUDA_CHECK(cudaEventRecord(e, lead.stream));
        GpuState& o = gpu(loc[i]);
        gpu::ScopedDevice d2(o.dev);
        CUDA_CHECK(cudaStreamWaitEvent(o.stream, e, 0));
      }
      run_stage_eager(g, stage, slot);
      for (size_t i = 1; i < loc.size(); ++i) {
        GpuState& o = gpu(loc[i]);
        gpu::ScopedDevice d2(o.dev);
        cudaEvent_t e = o.next_event();
        CUDA_CHECK(cudaEventRecord(e, o.stream));
        gpu::ScopedDevice d3(lead.dev);
        CUDA_CHECK(cudaStreamWaitEvent(lead.stream, e, 0));
      }
      gpu::ScopedDevice d4(lead.dev);
      CUDA_CHECK(cudaStreamEndCapture(lead.stream, &sg->graph));
      CUDA_CHECK(cudaGraphInstantiate(&sg->exec, sg->graph, 0));
    } catch (const std::exception& e) {
      cudaGraph_t junk = nullptr;
      gpu::ScopedDevice d4(lead.dev);
      cudaStreamEndCapture(lead.stream, &junk);
      if (junk) cudaGraphDestroy(junk);
      cudaGetLastError();
      graph_failure_ = e.what();
      opt_.cuda_graphs = false;
      return false;
    }
    ++graphs_captured_;
    it = graphs_.emplace(key, std::move(sg)).first;
  }
  // The graph runs on the lead's stream: order the other GPUs' streams around it.
  for (size_t i = 1; i < loc.size(); ++i) {
    GpuState& o = gpu(loc[i]);
    gpu::ScopedDevice d(o.dev);
    cudaEvent_t e = o.next_event();
    CUDA_CHECK(cudaEventRecord(e, o.stream));
    gpu::ScopedDevice d2(lead.dev);
    CUDA_CHECK(cudaStreamWaitEvent(lead.stream, e, 0));
  }
  {
    gpu::ScopedDevice d(lead.dev);
    CUDA_CHECK(cudaGraphLaunch(it->second->exec, lead.stream));
  }
  for (size_t i = 1; i < loc.size(); ++i) {
    GpuState& o = gpu(loc[i]);
    gpu::ScopedDevice d(lead.dev);
    cudaEvent_t e = lead.next_event();
    CUDA_CHECK(cudaEventRecord(e, lead.stream));
    gpu::ScopedDevice d2(o.dev);
    CUDA_CHECK(cudaStreamWaitEvent(o.stream, e, 0));
  }
  return true;
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
  const bool use_graph = opt_.cuda_graphs && decode_only;
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
    for (size_t i = 1; i < op.gpus.size(); ++i) {
      if (!local(op.gpus[i])) continue;
      GpuState& o = gpu(op.gpus[i]);
      gpu::ScopedDevice d(o.dev);
      cudaEvent_t e = o.next_event();
      CUDA_CHECK(cudaEventRecord(e, o.stream));
      gpu::ScopedDevice d2(first.dev);
      CUDA_CHECK(cudaStreamWaitEvent(first.stream, e, 0));
    }
    gpu::ScopedDevice d(first.dev);
    ev.back().second.record(first.stream);
  }
  for (auto& [id, gp] : state_) gp->stream.synchronize();
  std::vector<double> t(g.ops.size(), 0.0);
  for (size_t i = 0; i < ev.size(); ++i) t[timed[i]] = ev[i].second.seconds_since(ev[i].first);
  if (graph_out) *graph_out = std::move(g);
  return t;
}

}  // namespace peerplan::exec
