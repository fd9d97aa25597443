#pragma once
// Prices the ops of an op graph on one machine: compute from measured tables or a roofline,
// collectives from measured NCCL curves or a graph estimate, sends from measured transfer curves
// or nominal routes. Each price carries its CostSource. Lookups are memoised per op shape, so a
// CostModel is NOT thread-safe: use one per thread.
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/compile/op_graph.hpp"
#include "planner/cost/cost_options.hpp"
#include "planner/cost/cost_source.hpp"
#include "planner/cost/fitted_compute.hpp"
#include "planner/cost/transfer_cost.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

struct OpCost {
  double seconds = 0;      // compute/collective: duration once started; send: alone on an idle route
  double launch_s = 0;     // launch / synchronisation gap before the op on its stream
  CostSource source = CostSource::Nominal;
  // Send: the route's edges, fixed latency and streaming-rate cap (for max-min sharing).
  std::vector<int> edges;
  double alpha_s = 0, rate_Bps = 0;
  // Collectives: bytes each directed edge carries (edge, bytes), for link utilisation.
  std::vector<std::pair<int, double>> edge_bytes;
  // Collectives priced by a rule rather than a curve of this group (cross_host_collective.hpp):
  // what it was inferred from; null otherwise. provenance() lists them.
  nlohmann::json inferred;
  // AllReduce: the kernel it was priced as (choose_allreduce), for provenance and traces.
  ArImpl allreduce_impl = ArImpl::Nccl;
};

class CostModel {
 public:
  explicit CostModel(const Topology& topo, CostOptions opt = {});
  const Topology& topology() const { return topo_; }
  const CostOptions& options() const { return opt_; }

  // `graph_launch`: the iteration runs as a CUDA graph (decode), so kernels pay the graph node
  // gap rather than an eager launch -- except compute ops priced from a measured table
  // (source measured or interpolated), whose back-to-back timings already include it. Throws RuntimeError for a send with no usable route, and
  // InputError when a nominal figure the op needs is missing from the machine file.
  // The reference stays valid for the CostModel's lifetime (prices are memoised).
  const OpCost& price(const Op& op, bool graph_launch) const;

  // A point-to-point transfer alone on its route, by the one pricer (price_pair_transfer) with this
  // model's options: what a Send op costs, what machine.transfer_time shows a strategy. Not memoised.
  PairTransfer transfer(int src, int dst, TransferMode mode, double bytes) const;

  double launch_s(bool graph_launch) const;
  // Shortest time any compute kernel takes on `gpu`: the measured empty-kernel GPU time, else
  // CostOptions::min_kernel_s. Applied as max(priced time, floor) to every compute op.
  double min_kernel_s(int gpu) const;
  // What a fork to a second stream and the join back add to a CUDA graph of PDL kernels on `gpu`: the profile's
  // measurements.extra.launch.gpuN.fork_join_us (profiler/measure/launch_overhead.cpp, since session 35), else 0 (older
  // profiles priced the shared experts' branch without it). The simulator charges it at each join.
  double fork_join_s(int gpu) const;
  // How far two SM-filling GEMVs on two streams progress together against one alone on `gpu` (planner/cost/sm_slots.hpp):
  // kGemvPairProgress, fitted on recorded steps. The simulator's SM-slot capacity for a MoE layer's shared branch
  // beside its routed experts. The profile's extra.launch.gpuN.gemv_pair_progress (since session 36) measures the
  // same on two chains of small GEMVs; it is recorded, not used: 1.54 on an H100 (session 36 B), far from the layer's.
  double gemv_pair_progress(int gpu) const;
  // Whether the profile's executor launches decode kernels with programmatic dependent launch (the bf16 GEMV at
  // 1-2 tokens is taken only then; executor_launch.hpp).
  bool executor_pdl() const { return executor_pdl_; }
  double iteration_overhead_s() const { return opt_.iteration_overhead_s; }
  // The HBM rate memory-bound ops are priced at on `gpu`: the measured device copy, else the machine
  // file's figure x CostOptions::hbm_efficiency (*measured says which). Throws InputError when the
  // machine file has neither.
  double hbm_Bps(int gpu, bool* measured) const;
  // The same rate, 0 when the machine file has neither figure (the simulator's HBM capacity: a GPU
  // without one shares nothing it could price).
  double hbm_Bps_if_known(int gpu, bool* measured) const;
  // The fastest HBM stream an SM kernel of the profile reached on `gpu`: the largest weight bytes / median time of
  // its bf16 GEMM rows at one or two tokens (weight-streaming GEMVs; the LM head's is the largest), 0 without such
  // rows. The device copy above is a copy engine's rate, which SM reads exceed (H100: 3029 GB/s copied, 3192
  // streamed by the LM head's GEMV): the simulator's HBM capacity for two streams' kernels takes the larger.
  double sm_stream_Bps(int gpu) const;

  // The profile timed its compute tables at boost clock (`profile --duty` < 1) and measured the
  // power throttle: prices are boost-clock prices, prefill attention between grid points follows
  // the wave model, and serving_throttle() is what the serving simulation slows long prefill work
  // by. A back-to-back profile's tables carry the power cap already (session 13 S4) and keep the
  // rules they were validated with. docs/simulator.md, "Power".
  bool boost_tables() const { return boost_; }
  const PowerThrottle* serving_throttle() const;

  // What the prices rest on: machine origin, host, date, which tables exist, every assumption, and
  // the collectives priced so far that were inferred rather than measured ("inferred_collectives").
  nlohmann::json provenance() const;

 private:
  OpCost price_compute(const Op& op) const;
  // graph_launch: the op runs in a CUDA graph; a graph-timed curve then prices it with its gap.
  OpCost price_collective_op(const Op& op, bool graph_launch) const;
  OpCost price_send(const Op& op) const;
  double peak_flops(int gpu) const;
  // The fitted fallback of this machine's measurements; null when it has no GEMM/attention table
  // (a hypothetical machine keeps the roofline) or CostOptions::fitted_fallback is off.
  const FittedCompute* fitted() const;

  const Topology& topo_;
  CostOptions opt_;
  bool boost_ = false;
  // Memo key: the op's priced_fields (op_graph.hpp, so no field can be left out) and the launch
  // mode. Stored with a copy of the op; looked up with a pointer to the caller's (no copy per hit).
  struct MemoKey {
    Op op;
    bool graph_launch = false;
  };
  struct MemoProbe {
    const Op* op;
    bool graph_launch;
  };
  struct MemoHash {
    using is_transparent = void;
    size_t operator()(const MemoKey& k) const { return size_t(priced_hash(k.op) ^ uint64_t(k.graph_launch)); }
    size_t operator()(const MemoProbe& k) const { return size_t(priced_hash(*k.op) ^ uint64_t(k.graph_launch)); }
  };
  struct MemoEq {
    using is_transparent = void;
    static bool eq(const Op& a, bool ga, const Op& b, bool gb) { return ga == gb && same_priced_fields(a, b); }
    bool operator()(const MemoKey& a, const MemoKey& b) const { return eq(a.op, a.graph_launch, b.op, b.graph_launch); }
    bool operator()(const MemoProbe& a, const MemoKey& b) const { return eq(*a.op, a.graph_launch, b.op, b.graph_launch); }
    bool operator()(const MemoKey& a, const MemoProbe& b) const { return eq(a.op, a.graph_launch, *b.op, b.graph_launch); }
  };
  mutable std::unordered_map<MemoKey, OpCost, MemoHash, MemoEq> cache_;
  mutable std::unique_ptr<FittedCompute> fitted_;  // built on first use
  mutable bool fitted_built_ = false;
  mutable std::vector<double> sm_stream_;  // sm_stream_Bps by GPU, computed on first use (-1: not yet)
  double read_min_kernel_s(int gpu) const;  // the profile's figure (min_kernel_s reads the constructor's copy)
  std::vector<double> fork_join_;           // fork_join_s by GPU, read in the constructor
  std::vector<double> min_kernel_;          // min_kernel_s by GPU, read in the constructor
  bool executor_pdl_ = false;
};

}  // namespace peerplan
