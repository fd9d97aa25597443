#pragma once
// Plan search: run every strategy, simulate every candidate that fits (with P2P on and off),
// rank by an objective, and decide whether splitting is worth it at all.
//
// Objective `gpus` (the default): the fewest GPUs that meet the SLOs at the requested rate. A plan
// meets them when every request finished and at least `slo_threshold` of them met TTFT and TPOT;
// those plans rank first, fewest GPUs first, ties by goodput then E2E p99; the rest follow by goodput.
// The best-ranked plan is recommended when it meets the SLOs.
//
// Other objectives (goodput, p99, throughput), and `gpus` when no plan meets the SLOs: the
// best-ranked plan is recommended only if it beats the best plan on FEWER GPUs by at least
// `min_gain` in latency (TPOT p50 or E2E p99) or capacity (goodput or tokens/s); otherwise the
// smaller plan is recommended and the output says why.
//
// Capacity: the highest arrival rate a plan sustains within the SLOs (find_capacity), for the
// recommended plan, or for every ranked plan with `capacity_all`.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/compile/compiler.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/search/formats.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

enum class Objective { Gpus, Goodput, P99, Throughput };
const char* to_string(Objective o);
std::optional<Objective> objective_from_string(const std::string& s);  // "gpus", "goodput", "p99", "throughput"

// Whether a run meets the SLOs: every request finished and slo_attainment >= threshold.
bool meets_slos(const Metrics& m, double threshold);

// A plan's capacity: the highest arrival rate at which it still meets the SLOs.
struct Capacity {
  bool searched = false;
  double rate_rps = 0;             // highest rate found to meet the SLOs (0: none down to min_rate_rps)
  double output_tokens_per_s = 0;  // at that rate
  double miss_rps = 0;             // lowest rate found to miss them (0: none up to the probe budget)
  double tolerance = 0;            // miss_rps / rate_rps - 1 is at most this when both are found
  int probes = 0;                  // simulations run (the requested rate's own run is not counted)
  std::string note;                // when the bracket is open on one side: why
};

struct CapacityOptions {
  double slo_threshold = 0.99;
  double tolerance = 0.05;  // stop bisecting when miss/meet <= 1 + tolerance
  int max_probes = 14;      // bracketing + bisection together
  // A probe first simulates the first this-many requests (planner/search/screen.hpp); when that
  // proves the probe misses the SLOs, the full run is skipped (same outcome). 0: never; applied
  // only when the workload has at least 4 times as many requests.
  int64_t screen_requests = 0;
};

struct SearchOptions {
  Objective objective = Objective::Gpus;
  std::optional<double> rate_rps;          // overrides the workload's arrival rate
  int64_t num_requests = 0;                // 0: the workload's own count
  std::vector<std::string> strategy_files; // empty: the shipped plugins
  std::map<std::string, std::string> sets; // strategy parameters (--set key=value)
  bool compare_p2p = true;                 // also simulate each multi-GPU plan with P2P off
  // Also simulate each plan with a TP group and P2P on under these all-reduce settings (issue 17,
  // allreduce_variants in planner/plan/allreduce_rule.hpp); empty: each plan's own only.
  std::vector<ArSetting> allreduce;
  bool prune = true;                       // skip plans the cheap bounds rule out (planner/search/prune.hpp)
  int threads = 2;                         // candidates simulated in parallel
  double min_gain = 0.05;                  // a bigger plan must beat a smaller one by this much
  CapacityOptions capacity;                // slo_threshold also decides "meets the SLOs" for `gpus`
  // Objective `gpus` (planner/search/screen.hpp): candidates are taken in rounds by ascending GPU
  // count; each is first simulated over this many requests and fully only when that does not
  // prove it misses the SLOs; after the first round in which a plan meets them, plans on more
  // GPUs are not simulated (none can be recommended). No plan meets them: every screened-out plan
  // is simulated fully after all. 0: off; applied only when the workload has >= 4x as many
  // requests. The recommendation is the one the full search makes (tests/search/screen_test.cpp).
  int64_t screen_requests = 250;
  bool capacity_recommended = true;        // find the recommended plan's capacity
  bool capacity_all = false;               // ... and every ranked plan's (in parallel over `threads`)
  SimulateOptions sim;
};

struct CandidateResult {
  Plan plan;                  // as simulated (the P2P variant applied)
  std::string strategy_file;
  size_t format = 0;          // index into SearchResult::formats: its weight and KV-cache formats
  bool p2p = true;            // this variant's P2P setting
  bool multi_gpu = false;
  MemoryReport memory;
  bool simulated = false;
  std::string why_not;        // didn't fit / failed to simulate / pruned: the reason
  std::string pruned_by;      // "tpot" or "rate": a cheap bound said it cannot meet the SLOs (prune.hpp);
                              // "screen": a screening run proved it misses them; "gpus": plans on
                              // fewer GPUs meet them (screen_requests)
  Metrics metrics;
  double score = 0;           // by the objective; higher is better
  bool meets_slos = false;    // at the requested rate (meets_slos())
  Capacity capacity;          // searched for the recommended plan, or all with capacity_all
  double comm_fraction = 0;   // communication share of its GPUs' busy time
  size_t distinct_shapes = 0;
  std::string bottleneck;     // for communication-bound plans: the dominating boundary/link, in words
  std::string fix;            // a proposed remedy
};

// The best-ranked plan at one GPU count: what each additional GPU buys.
struct GpuStep {
  int gpus = 0;
  int rank = 0;  // index into ranked
};

struct SearchResult {
  Objective objective = Objective::Gpus;
  double slo_threshold = 0.99;
  Workload workload;          // as used (rate override applied)
  std::vector<CandidateResult> ranked;    // simulated, best first
  std::vector<CandidateResult> rejected;  // did not fit or failed
  int recommended = -1;       // index into ranked, -1 when nothing fits
  int best_overall = -1;
  std::vector<GpuStep> gpu_steps;  // ascending GPU count, the best-ranked plan at each
  int pruned = 0;             // candidates not simulated because a cheap bound ruled them out
  std::string pruned_summary; // how many, by which bound ("" when none)
  std::string verdict;        // one paragraph, for people
  std::vector<std::string> advice;
  nlohmann::json provenance;
  nlohmann::json precision;   // the model's number formats (precision_json): weights, KV cache
  std::string precision_line; // (of the first format when there are several)
  // The formats searched (--dtypes x --kv-dtypes; one: the model's own or --weights / --kv-dtype).
  // Each candidate names its own; `cfg` / `fig` are what it was sized and priced with.
  std::vector<SearchFormat> formats;
  bool multi_format() const { return formats.size() > 1; }
  double wall_s = 0;
};

SearchResult search_plans(const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo, const Workload& w,
                          const SearchOptions& opt);
// One search over several number formats (formats.hpp): every strategy runs once per format, and
// the candidates of all formats are pruned, screened and ranked together. Under `gpus` each format
// is screened up to its own fewest GPUs that meet the SLOs, so the verdict can say what a format
// buys ("fp8 weights, bf16 KV: the SLOs on 2 GPUs instead of 4"). One format: search_plans above,
// bit for bit.
SearchResult search_plans(std::vector<SearchFormat> formats, const Topology& topo, const Workload& w,
                          const SearchOptions& opt);

// The variants of one candidate: P2P on (peer boundaries where usable) and P2P off (host-staged
// boundaries, NCCL without P2P). Single-GPU plans and machines without usable P2P give one.
std::vector<Plan> p2p_variants(const Plan& p, const Topology& topo, bool compare);

// Score under an objective (higher is better) and the ordering used for the ranking. For `gpus`
// the score is goodput (the tie-break among plans on as many GPUs that meet the SLOs).
double objective_score(const Metrics& m, Objective o);

// The workload with its arrivals rescaled to `rate_rps`: the same seeded requests (prompts,
// outputs, and the arrivals' random draws) with every gap multiplied by old rate / new rate.
// Poisson: the rate replaced (its gaps are draws / rate). Trace: timestamps compressed about the first.
Workload at_rate(const Workload& w, double rate_rps);

// Capacity of one plan by bracketing and bisection over the rate: start from the requested rate
// (`at_requested`: the plan's run there), double while it meets the SLOs (halve while it misses),
// then bisect geometrically until miss/meet <= 1 + tolerance. Each probe is a full simulation.
// `sim` as for the plan's run (memory and memory_context set).
Capacity find_capacity(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo,
                       const Workload& w, const Metrics& at_requested, const SimulateOptions& sim,
                       const CapacityOptions& opt);

// What dominates a communication-bound plan and what to try instead ("" when not comm-bound).
void explain_bottleneck(CandidateResult& c, const Topology& topo);

}  // namespace peerplan
