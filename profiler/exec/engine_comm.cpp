// Collectives and stage boundaries: NCCL collectives over the plan's groups (one process: all
// members' communicators in one group call; MPI: this rank's member on a ncclCommInitRank
// communicator), stage-boundary sends (peer copy, host staging, or NCCL send/recv between ranks)
// and, under MPI, the completion message from the last stage to rank 0.
#include <algorithm>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/plan/allreduce_rule.hpp"
#include "planner/topology/topology.hpp"
#include "profiler/exec/engine_state.hpp"
#include "profiler/gpu/cuda_check.hpp"

namespace peerplan::exec {

namespace {

constexpr int64_t kStageChunk = int64_t(4) << 20;  // host-staged copies: 4 MiB chunks, two streams

// One member's part of a collective (one of n on communicator c), on its compute stream.
void enqueue_collective(const Op& op, GpuState& g, ncclComm_t c, int n) {
  void* y = g.Y.get();
  void* z = g.Z.get();
  const size_t elems = size_t(op.bytes / 2);
  switch (op.kind) {
    case OpKind::AllReduce: NCCL_CHECK(ncclAllReduce(y, y, elems, ncclBfloat16, ncclSum, c, g.stream)); break;
    case OpKind::AllGather: NCCL_CHECK(ncclAllGather(y, z, elems / size_t(n), ncclBfloat16, c, g.stream)); break;
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

// What a stage boundary sends, in order. Fused norms (machine.hpp fused_add_norm): the compiler's
// Send carries the residual stream and the last block's output, not yet added (vLLM's hidden_states
// and residual); else the hidden states alone.
struct SendPart {
  const char* src;
  size_t bytes;
};
std::vector<SendPart> send_parts(GpuState& g, size_t bytes, bool fused) {
  if (!fused) return {{g.hidden.as<char>(), bytes}};
  return {{g.hidden.as<char>(), bytes / 2}, {g.Z.as<char>(), bytes - bytes / 2}};
}

// Device -> pinned host -> device in chunks over two streams per side, so the PCIe directions
// overlap (what an application does without P2P). The parts land one after the other in `to`.
void staged_copy(GpuState& src, GpuState& dst, void* to, const std::vector<SendPart>& parts) {
  {
    gpu::ScopedDevice d(src.dev);
    cudaEvent_t ready = src.next_event();
    CUDA_CHECK(cudaEventRecord(ready, src.stream));
    CUDA_CHECK(cudaStreamWaitEvent(src.copy[0], ready, 0));
    CUDA_CHECK(cudaStreamWaitEvent(src.copy[1], ready, 0));
  }
  char* host = src.staging.as<char>();
  int c = 0;
  size_t base = 0;  // the part's offset in the staging buffer and in `to`
  for (const SendPart& p : parts) {
    for (size_t off = 0; off < p.bytes; off += size_t(kStageChunk), ++c) {
      const size_t n = std::min(size_t(kStageChunk), p.bytes - off);
      cudaEvent_t down;
      {
        gpu::ScopedDevice d(src.dev);
        CUDA_CHECK(cudaMemcpyAsync(host + base + off, p.src + off, n, cudaMemcpyDeviceToHost, src.copy[c % 2]));
        down = src.next_event();
        CUDA_CHECK(cudaEventRecord(down, src.copy[c % 2]));
      }
      gpu::ScopedDevice d(dst.dev);
      CUDA_CHECK(cudaStreamWaitEvent(dst.copy[c % 2], down, 0));
      CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(to) + base + off, host + base + off, n, cudaMemcpyHostToDevice,
                                 dst.copy[c % 2]));
    }
    base += p.bytes;
  }
  gpu::ScopedDevice d(dst.dev);
  for (int i = 0; i < 2; ++i) {
    cudaEvent_t e = dst.next_event();
    CUDA_CHECK(cudaEventRecord(e, dst.copy[i]));
    CUDA_CHECK(cudaStreamWaitEvent(dst.stream, e, 0));
  }
  // The source may overwrite its parts only after the staging copies read them.
  gpu::ScopedDevice d3(src.dev);
  for (int i = 0; i < 2; ++i) {
    cudaEvent_t e = src.next_event();
    CUDA_CHECK(cudaEventRecord(e, src.copy[i]));
    CUDA_CHECK(cudaStreamWaitEvent(src.stream, e, 0));
  }
}

}  // namespace

void Engine::create_peer_allreduce(const std::vector<OpGraph>& worst) {
  if (plan_.allreduce == ArSetting::Nccl || !plan_.p2p) return;
  // Ranks sharing one GPU (PEERPLAN_MPI_SHARE_GPU smoke runs) would spin against each other's
  // time slices: NCCL there.
  if (bus_ && std::getenv("PEERPLAN_MPI_SHARE_GPU") && std::string(std::getenv("PEERPLAN_MPI_SHARE_GPU")) == "1") return;
  std::unique_ptr<Topology> topo;  // built only when a plan asks for it
  // Every group in one sorted order on every rank: under MPI the handle exchange below is a
  // sequence of point-to-point messages that must meet in the same order.
  std::set<std::vector<int>> keys;
  for (const OpGraph& w : worst)
    for (const Op& op : w.ops)
      if (op.kind == OpKind::AllReduce && op.gpus.size() >= 2 && op.gpus.size() <= size_t(kernels::kPeerArMaxRanks)) {
        std::vector<int> key = op.gpus;
        std::sort(key.begin(), key.end());
        keys.insert(key);
      }
  for (const auto& key : keys) {
    if (bus_ && !std::binary_search(key.begin(), key.end(), bus_->rank())) continue;
    if (!topo) topo = std::make_unique<Topology>(machine_);
    auto st = std::make_unique<PeerArState>();
    st->group = allreduce_group(*topo, key, plan_.p2p);
    if (!st->group.p2p_all) {
      peer_ar_.emplace(key, nullptr);  // every rule runs NCCL here
      continue;
    }
    st->ranks.n = int(key.size());
    if (bus_) {
      // Sizes agree on every member: the smallest Y, exchanged first.
      int64_t cap = gpu(bus_->rank()).cap_y * 2;
      st->cap_bytes = cap;
      for (size_t r = 0; r < key.size(); ++r) {
        std::vector<int> from{key[r]};  // share_id sends from the list's first member to the rest
        for (int x : key) if (x != key[r]) from.push_back(x);
        int64_t theirs = cap;
        bus_->share_id(&theirs, sizeof theirs, from);
        st->cap_bytes = std::min(st->cap_bytes, theirs);
      }
    } else {
      st->cap_bytes = INT64_MAX;
      for (int id : key) st->cap_bytes = std::min(st->cap_bytes, gpu(id).cap_y * 2);
    }
    for (size_t r = 0; r < key.size(); ++r) {
      if (bus_ && key[r] != bus_->rank()) continue;
      GpuState& g = gpu(key[r]);
      gpu::ScopedDevice d(g.dev);
      st->scratch.emplace_back(g.dev, size_t(st->cap_bytes));
      st->signal.emplace_back(g.dev, sizeof(kernels::PeerArSignal));
      CUDA_CHECK(cudaMemset(st->signal.back().get(), 0, sizeof(kernels::PeerArSignal)));
      CUDA_CHECK(cudaDeviceSynchronize());
      st->ranks.data[r] = g.Y.as<bf16>();
      st->ranks.scratch[r] = st->scratch.back().as<bf16>();
      st->ranks.signal[r] = st->signal.back().as<kernels::PeerArSignal>();
    }
    if (bus_) {
      // Across processes: every member exports its Y, scratch and signal block (CUDA IPC) and maps
      // the others', once; the kernels then read peers' memory as in one process.
      const int me = bus_->rank();
      gpu::ScopedDevice d(bus_->device());
      for (size_t r = 0; r < key.size(); ++r) {
        cudaIpcMemHandle_t h[3];
        if (key[r] == me) {
          CUDA_CHECK(cudaIpcGetMemHandle(&h[0], gpu(me).Y.get()));
          CUDA_CHECK(cudaIpcGetMemHandle(&h[1], st->scratch.back().get()));
          CUDA_CHECK(cudaIpcGetMemHandle(&h[2], st->signal.back().get()));
        }
        std::vector<int> from{key[r]};
        for (int x : key) if (x != key[r]) from.push_back(x);
        bus_->share_id(h, sizeof h, from);
        if (key[r] == me) continue;
        void* p[3] = {};
        for (int k = 0; k < 3; ++k) {
          CUDA_CHECK(cudaIpcOpenMemHandle(&p[k], h[k], cudaIpcMemLazyEnablePeerAccess));
          st->mapped.push_back(p[k]);
        }
        st->ranks.data[r] = static_cast<const bf16*>(p[0]);
        st->ranks.scratch[r] = static_cast<bf16*>(p[1]);
        st->ranks.signal[r] = static_cast<kernels::PeerArSignal*>(p[2]);
      }
      st->device = bus_->device();
    }
    peer_ar_.emplace(key, std::move(st));
  }
}

bool Engine::peer_allreduce(const Op& op) {
  std::vector<int> key = op.gpus;
  std::sort(key.begin(), key.end());
  auto it = peer_ar_.find(key);
  if (it == peer_ar_.end() || !it->second) return false;
  PeerArState& s = *it->second;
  const ArChoice ch = choose_allreduce(op.allreduce, s.group, op.bytes);
  // The kernel's own limits (whole 16-byte vectors per share, the registered size): NCCL beyond.
  // Every member decides alike (same op, group and cap), so none waits at a barrier alone.
  if (ch.impl == ArImpl::Nccl || op.bytes > s.cap_bytes || op.bytes % (16 * int64_t(key.size())) != 0) return false;
  for (size_t r = 0; r < key.size(); ++r) {
    if (!local(key[r])) continue;  // MPI: the other members launch theirs
    GpuState& g = gpu(key[r]);
    gpu::ScopedDevice d(g.dev);
    kernels::peer_allreduce(ch.impl, s.ranks, int(r), g.Y.as<bf16>(), op.bytes, g.stream);
  }
  return true;
}

void Engine::ncclgroup_collective(const Op& op) {
  if (op.kind == OpKind::AllReduce && peer_allreduce(op)) return;
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

void Engine::send_between_ranks(const Op& op, int slot) {
  // Between processes a stage boundary is an NCCL send/recv on the pair's communicator, as
  // multi-process engines (vLLM, SGLang, TensorRT-LLM pipeline parallelism) pass activations;
  // with --p2p off NCCL_P2P_DISABLE=1 makes NCCL stage it through shared host memory.
  const int src = op.gpus[0], dst = op.gpus[1], me = bus_->rank();
  if (me != src && me != dst) return;
  ncclComm_t c = rank_comm({std::min(src, dst), std::max(src, dst)}, 0);
  const int peer = (me == src ? dst : src) == std::min(src, dst) ? 0 : 1;
  GpuState& g = gpu(me);
  gpu::ScopedDevice d(g.dev);
  // Part by part, as vLLM sends its intermediate tensors; the receiver posts the same sizes.
  char* to = g.recv[size_t(slot)].as<char>();
  NCCL_CHECK(ncclGroupStart());
  for (const SendPart& p : send_parts(g, size_t(op.bytes), fused_norm_)) {
    if (me == src) NCCL_CHECK(ncclSend(p.src, p.bytes, ncclInt8, peer, c, g.stream));
    else NCCL_CHECK(ncclRecv(to, p.bytes, ncclInt8, peer, c, g.stream));
    to += p.bytes;
  }
  NCCL_CHECK(ncclGroupEnd());
}

void Engine::send_in_process(const Op& op, int slot, std::vector<cudaEvent_t>* send_done) {
  GpuState& src = gpu(op.gpus[0]);
  GpuState& dst = gpu(op.gpus[1]);
  const size_t bytes = size_t(op.bytes);
  char* to = dst.recv[size_t(slot)].as<char>();
  const std::vector<SendPart> parts = send_parts(src, bytes, fused_norm_);
  if (op.mode == TransferMode::HostStaged) return staged_copy(src, dst, to, parts);
  gpu::ScopedDevice d(src.dev);
  for (const SendPart& p : parts) {
    CUDA_CHECK(cudaMemcpyPeerAsync(to, dst.id, p.src, src.id, p.bytes, src.stream));
    to += p.bytes;
  }
  cudaEvent_t e = src.next_event();
  CUDA_CHECK(cudaEventRecord(e, src.stream));
  if (send_done) send_done->push_back(e);
  gpu::ScopedDevice d2(dst.dev);
  CUDA_CHECK(cudaStreamWaitEvent(dst.stream, e, 0));
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

void Engine::create_rank_comms(const std::vector<OpGraph>& worst) {
  // Every communicator the plan's iterations use, created here in one sorted order on every rank
  // (ncclCommInitRank blocks until the group's members join; one global order cannot deadlock):
  // the collectives' groups and stage-boundary pairs of the worst-case iterations, then the
  // completion pairs (rank 0 with each other GPU of the last stage). A group an iteration needs
  // later and is missing here is created on first use, in op order.
  std::set<std::vector<int>> groups;
  for (const OpGraph& g : worst)
    for (const Op& op : g.ops) {
      if (!is_collective(op.kind) && op.kind != OpKind::Send) continue;
      std::vector<int> key = op.gpus;
      std::sort(key.begin(), key.end());
      groups.insert(key);
    }
  for (const auto& key : groups)
    if (std::binary_search(key.begin(), key.end(), bus_->rank())) rank_comm(key, 0);
  for (int x : plan_.stages.back().gpus)
    if (x != 0 && (bus_->rank() == 0 || bus_->rank() == x)) rank_comm({0, x}, 1);
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

}  // namespace peerplan::exec
