#pragma once
// Prices one serving iteration: BatchShape -> per-stage times (and where each GPU's time went),
// by compiling the plan's op graph and running it on the task engine.
//
// Speed (the search simulates every candidate over 1 000s of iterations):
//  - Memoised on a quantised BatchShape: each non-zero count but prefill tokens is rounded to the
//    nearest of `per_octave` log-spaced points per octave, exact below 2*per_octave (default 16 per
//    octave: <= 2.2 % relative change on decode sequences; dimensions that only shape attention use
//    a quarter to a half of that grid, see quantize_shape). Prefill tokens stay exact: a request's
//    TTFT rests on one or two prefill iterations, where rounding errors do not cancel (they do over a
//    run's throughput). tests/sim checks the bounds against exact pricing; --shape-points 0 prices
//    every dimension exactly.
//  - Identical layers: decoder layers run one after the other, so each stage needs only one
//    layer of each kind (same figures and matrices: e.g. dense and MoE layers of DeepSeek). The
//    pricer compiles a reduced model holding one representative per kind and stage, simulates
//    it segment by segment (a segment = one layer's ops, or the ops outside layers), and counts
//    each layer segment as many times as the stage has layers of that kind. (Consequence: no
//    overlap ACROSS layer boundaries is modelled; inside a layer it is.)
// A stage's time assumes its inputs are ready at 0: the serving simulation chains stages.
#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "planner/compile/compiler.hpp"
#include "planner/compile/op_graph.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/sim/engine.hpp"
#include "planner/sim/power_state.hpp"
#include "planner/plan/plan.hpp"

namespace peerplan {

struct IterationCost {
  std::vector<double> stage_s;                 // each stage's time for this batch
  std::vector<ClassSeconds> stage_class_s;     // each stage's compute by class (its power throttle's mix)
  std::vector<std::vector<int>> stage_gpus;    // GPUs of each stage (for the time split)
  std::vector<TimeSplit> gpu;                  // per GPU, summed over stages (idle excluded)
  std::vector<double> edge_bytes, edge_busy_s; // per directed edge
  std::array<int64_t, kCostSourceCount> ops_by_source{};
  std::array<double, kCostSourceCount> seconds_by_source{};
  // The GPUs and edges with a non-zero entry above (PlanPricer fills them): a run adds only those
  // per iteration, not all GPUs and edges of a 64-GPU cluster. Adding the zeros skipped would not
  // change a sum, so the totals are bit-identical. `indexed` false: add every entry (hand-made costs).
  bool indexed = false;
  std::vector<int> used_gpus, used_edges;
  // The last PlanPricer that looked this price up in a shared memo: each pricer counts the shapes
  // its own run used, so a run's distinct_shapes does not depend on what shared the memo before.
  uint64_t seen_by = 0;
  void index_used();
  double total_s() const;
};

// The interface the serving simulation drives; tests inject closed-form pricers.
class IterationPricer {
 public:
  virtual ~IterationPricer() = default;
  virtual int num_stages() const = 0;
  virtual const IterationCost& price(const BatchShape& shape) = 0;
};

// Iteration prices by quantised shape. A pricer keeps its own; simulations of the same plan under
// the same costs (a capacity search's probes) can share one through SimulateOptions::price_memos.
struct PriceKeyHash {
  size_t operator()(const std::array<int64_t, 8>& k) const {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int64_t v : k) {  // splitmix64 per word
      uint64_t z = (h ^ uint64_t(v)) + 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      h = z ^ (z >> 31);
    }
    return size_t(h);
  }
};
using PriceMemo = std::unordered_map<std::array<int64_t, 8>, IterationCost, PriceKeyHash>;

int64_t quantize_count(int64_t v, int per_octave);
BatchShape quantize_shape(const BatchShape& s, int per_octave);
// A (quantised) shape as the price memo's key: every field that changes a price.
std::array<int64_t, 8> price_key(const BatchShape& q);

struct PricerOptions {
  int per_octave = 16;        // <= 0: no quantisation (exact, slow)
  bool reuse_layers = true;
};

// The simulator's streams, per GPU: its compute stream, its copy engine, its auxiliary compute stream.
inline constexpr int kStreamsPerGpu = 3;
inline int compute_stream(int gpu) { return kStreamsPerGpu * gpu; }
inline int copy_stream(int gpu) { return kStreamsPerGpu * gpu + 1; }
inline int aux_stream(int gpu) { return kStreamsPerGpu * gpu + 2; }

// The HBM rate two streams' kernels on `gpu` share: the larger of the measured device copy and the fastest stream
// an SM kernel of the profile reached (CostModel::sm_stream_Bps), 0 where the machine gives neither.
double stream_hbm_capacity_Bps(const CostModel& cost, int gpu);
// The task engine's link capacities: the topology's edges, then one HBM pseudo-edge per GPU
// (stream_hbm_capacity_Bps) at topology.edge_count() + gpu, then one SM-slot pseudo-edge per GPU
// (CostModel::gemv_pair_progress; planner/cost/sm_slots.hpp) at topology.edge_count() + gpu_count() + gpu.
std::vector<double> sim_capacity(const CostModel& cost);

// Builds the task list of an op graph (or of a slice of its ops): compute ops on their GPU's
// compute stream (op.stream 1: its auxiliary one), collectives on every group member's compute
// stream, sends as flows on the source's copy engine. Dependencies outside `ops` are treated as
// already met. Where the slice puts ops of a GPU on both compute streams, that GPU's compute ops
// become flows of their HBM bytes over its HBM pseudo-edge (sim_capacity), each capped at the rate
// its price implies (bytes / seconds): alone one takes its price, two at once share the GPU's HBM
// (a weight-streaming GEMV runs near its cap; two of them cannot both), and kernels that fill the SMs
// (sm_slots.hpp: the executor's GEMVs at 1-2 tokens) also share the GPU's SM-slot edge. `costs` (optional)
// receives each task's price (owned by `cost`).
std::vector<SimTask> tasks_for_ops(const OpGraph& g, const std::vector<int>& ops, const CostModel& cost,
                                   bool graph_launch, std::vector<const OpCost*>* costs = nullptr);

class PlanPricer : public IterationPricer {
 public:
  // `shared`: a memo kept across simulations of this plan with these costs (null: the pricer's own).
  PlanPricer(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const CostModel& cost,
             PricerOptions opt = {}, PriceMemo* shared = nullptr);
  int num_stages() const override { return int(plan_.stages.size()); }
  const IterationCost& price(const BatchShape& shape) override;
  IterationCost price_exact(const BatchShape& shape) const;  // no memo, no quantisation
  size_t distinct_shapes() const { return distinct_; }  // shapes this pricer's runs used
  const CostModel& cost() const { return cost_; }
  const ModelConfig& config() const { return cfg_; }

 private:
  const Plan& plan_;
  const ModelConfig& cfg_;
  const ModelFigures& fig_;
  const CostModel& cost_;
  PricerOptions opt_;
  // The reduced model (reuse_layers): one layer per kind and stage, and how many each stands for.
  Plan rplan_;
  ModelConfig rcfg_;
  ModelFigures rfig_;
  std::vector<double> layer_weight_;  // by reduced layer index
  std::vector<std::vector<int>> routing_layers_;  // by reduced layer index: the model layers it stands for
  PriceMemo memo_;
  PriceMemo* shared_ = nullptr;
  // The plan's compile-once parts and the last op graph's storage (compiler.hpp): price_exact
  // compiles into it, so a pricer is used by one thread at a time.
  mutable CompileCache compile_;
  // price_exact's scratch, reused shape after shape: edge capacities (sim_capacity), the segment's tasks.
  mutable std::vector<double> capacity_;
  struct Scratch {
    std::vector<SimTask> tasks;
    std::vector<int> local;
    std::vector<char> two_streams;
    std::vector<const OpCost*> costs;
  };
  mutable Scratch scratch_;
  uint64_t id_ = 0;        // unique per pricer (IterationCost::seen_by)
  size_t distinct_ = 0;
  PriceMemo& memo() { return shared_ ? *shared_ : memo_; }
  const PriceMemo& memo() const { return shared_ ? *shared_ : memo_; }
};

}  // namespace peerplan
