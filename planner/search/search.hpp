#pragma once
// Plan search: run every strategy, simulate every candidate that fits (with P2P on and off),
// rank by an objective, and decide whether splitting is worth it at all.
//
// Recommendation rule: the best-ranked plan is recommended only if it beats the best plan on
// FEWER GPUs by at least `min_gain` in latency (TPOT p50 or E2E p99) or capacity (goodput or
// tokens/s); otherwise the smaller plan is recommended and the output says why.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/compile/compiler.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

enum class Objective { Goodput, P99, Throughput };
const char* to_string(Objective o);
std::optional<Objective> objective_from_string(const std::string& s);  // "goodput", "p99", "throughput"

struct SearchOptions {
  Objective objective = Objective::Goodput;
  std::optional<double> rate_rps;          // overrides the workload's arrival rate
  int64_t num_requests = 0;                // 0: the workload's own count
  std::vector<std::string> strategy_files; // empty: the shipped plugins
  std::map<std::string, std::string> sets; // strategy parameters (--set key=value)
  bool compare_p2p = true;                 // also simulate each multi-GPU plan with P2P off
  int threads = 2;                         // candidates simulated in parallel
  double min_gain = 0.05;                  // a bigger plan must beat a smaller one by this much
  SimulateOptions sim;
};

struct CandidateResult {
  Plan plan;                  // as simulated (the P2P variant applied)
  std::string strategy_file;
  bool p2p = true;            // this variant's P2P setting
  bool multi_gpu = false;
  MemoryReport memory;
  bool simulated = false;
  std::string why_not;        // didn't fit / failed to simulate: the reason
  Metrics metrics;
  double score = 0;           // by the objective; higher is better
  double comm_fraction = 0;   // communication share of its GPUs' busy time
  size_t distinct_shapes = 0;
  std::string bottleneck;     // for communication-bound plans: the dominating boundary/link, in words
  std::string fix;            // a proposed remedy
};

struct SearchResult {
  Objective objective = Objective::Goodput;
  Workload workload;          // as used (rate override applied)
  std::vector<CandidateResult> ranked;    // simulated, best first
  std::vector<CandidateResult> rejected;  // did not fit or failed
  int recommended = -1;       // index into ranked, -1 when nothing fits
  int best_overall = -1;
  std::string verdict;        // one paragraph, for people
  std::vector<std::string> advice;
  nlohmann::json provenance;
  nlohmann::json precision;   // the model's number formats (precision_json): weights, KV cache
  std::string precision_line;
  double wall_s = 0;
};

SearchResult search_plans(const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo, const Workload& w,
                          const SearchOptions& opt);

// The variants of one candidate: P2P on (peer boundaries where usable) and P2P off (host-staged
// boundaries, NCCL without P2P). Single-GPU plans and machines without usable P2P give one.
std::vector<Plan> p2p_variants(const Plan& p, const Topology& topo, bool compare);

// Score under an objective (higher is better) and the ordering used for the ranking.
double objective_score(const Metrics& m, Objective o);

// What dominates a communication-bound plan and what to try instead ("" when not comm-bound).
void explain_bottleneck(CandidateResult& c, const Topology& topo);

}  // namespace peerplan
