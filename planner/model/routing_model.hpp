#pragma once
// The host side of MoE routing (issue 14): how a routing is chosen (RoutingSpec), the CDF the
// executor's routing kernel is given, and what one iteration's routing sends to each expert --
// counted with the very function the GPU runs (routing.hpp's route_token), cached, so the
// compiler, the cost model and the reports see the tokens per expert the executor will see.
//
// Token indices are the token's position among the iteration's tokens of the whole EP group
// (0..T-1): the same T tokens at the same layer always route the same way.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace peerplan {
class JsonIn;
}

namespace peerplan::routing {

enum class Skew {
  Uniform,     // each token picks k distinct experts uniformly
  Zipf,        // expert popularity ~ 1 / rank^s, ranks scattered over the expert ids by the seed
  Popularity,  // per-expert weights as given (expert id order)
};

inline constexpr uint64_t kDefaultSeed = 1;

struct RoutingSpec {
  Skew skew = Skew::Uniform;
  double zipf_s = 0;               // Zipf: the exponent (> 0)
  std::vector<double> popularity;  // Popularity: one non-negative weight per expert, not all zero
  uint64_t seed = kDefaultSeed;
  std::string origin = "default";  // where it was chosen: "default", "--moe-routing", a workload file
  std::string popularity_file;     // Popularity: the file it came from ("" when inline)

  // "uniform", "zipf:1.2", "popularity:pop.json" (what --moe-routing takes back).
  std::string label() const;
  bool operator==(const RoutingSpec& o) const {
    return skew == o.skew && zipf_s == o.zipf_s && popularity == o.popularity && seed == o.seed;
  }
};

// The CDF route_token is given for `experts` experts: empty for uniform (route_token's nullptr),
// else cdf[e] = P(expert <= e) in float with cdf[experts-1] == 1 exactly. This is the very array
// the executor copies to the GPU. Throws InputError (naming the spec's origin) when a popularity
// list does not have one entry per expert.
std::vector<float> routing_cdf(const RoutingSpec& spec, int64_t experts);

// Tokens each of the `experts` experts receives when tokens 0..tokens-1 are routed top-`k` at
// `layer`: exactly what route_token gives, summed. Cached per thread (checkpoints every 64
// tokens per layer, so a new token count costs at most 64 x k draws). The reference stays valid
// until the next call on this thread.
const std::vector<int32_t>& expert_counts(const RoutingSpec& spec, int64_t experts, int64_t k, int64_t tokens,
                                          int layer);

// What one GPU's experts [first, first + count) receive.
struct GroupLoad {
  int64_t rows = 0;      // routed rows summed over them
  int64_t touched = 0;   // of them with at least one row
  int64_t max_rows = 0;  // rows of the busiest one
};
GroupLoad group_load(const std::vector<int32_t>& counts, int64_t first, int64_t count);

// E (1 - (1 - k/E)^B): experts a batch of B tokens touches on average under uniform routing.
double expected_touched_uniform(int64_t experts, int64_t k, int64_t batch);

// The routing assumption a prediction states: at decode batch `batch`, averaged over `layers`
// (the model's MoE layers), the experts touched per layer and the busiest expert's share of the
// routed rows, from the same counts the compiler uses.
struct RoutingSummary {
  std::string label;
  uint64_t seed = kDefaultSeed;
  int64_t experts = 0, k = 0, batch = 0;
  double touched = 0;           // mean experts touched per MoE layer at `batch`
  double touched_uniform = 0;   // E (1 - (1 - k/E)^B), for comparison
  double busiest_share = 0;     // mean over layers of (busiest expert's rows) / (batch x k)
};
RoutingSummary summarize(const RoutingSpec& spec, int64_t experts, int64_t k, int64_t batch,
                         const std::vector<int>& layers);
nlohmann::json summary_json(const RoutingSummary& s);
// One line for the text reports, from summary_json's object: "zipf:1.2 (seed 1): 14.2 of 60
// experts touched per layer and decode step at batch 8 (uniform: 25.4), busiest expert 21.3% of routed rows".
std::string summary_text(const nlohmann::json& summary);

// The workload's `moe_routing` object:
//   {"skew": "uniform"}
//   {"skew": "zipf", "exponent": 1.2}
//   {"skew": "popularity", "weights": [w0, w1, ...]}   or   {"skew": "popularity", "file": "pop.json"}
// each with an optional "seed" (a non-negative integer, default 1). A relative "file" is read
// next to `base_file` (the workload). Throws InputError naming the file and the field.
RoutingSpec parse_routing_json(const JsonIn& j, const std::string& base_file);
// --moe-routing: "uniform", "zipf:S" (S in (0, 10]) or "popularity:FILE.json", optionally
// followed by ",seed=N". Throws InputError naming --moe-routing (or the popularity file).
RoutingSpec parse_routing_arg(const std::string& arg);
// A popularity file: a JSON array of non-negative weights, or {"popularity": [...]}.
std::vector<double> load_popularity_file(const std::string& path);
nlohmann::json routing_to_json(const RoutingSpec& spec);

// The spec against a model with `experts` routed experts (0: dense, nothing to check): a
// popularity list must have one weight per expert. Throws InputError naming where it came from.
void check_routing_for_model(const RoutingSpec& spec, int64_t experts, const std::string& model);

}  // namespace peerplan::routing
