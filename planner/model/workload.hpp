#pragma once
// A serving workload: how requests arrive, how long prompts and outputs are, batching limits, SLOs.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "planner/model/routing_model.hpp"

namespace peerplan {

struct LengthDist {
  enum class Kind { Fixed, Uniform, Lognormal, Empirical } kind = Kind::Fixed;
  double value = 0;           // fixed
  double min = 0, max = 0;    // uniform [min, max]; also clamps lognormal
  double mu = 0, sigma = 0;   // lognormal of the natural log
  std::vector<int64_t> samples;  // empirical
  bool replay = false;        // empirical from the arrival trace: request i takes row i's value
  int64_t sample(std::mt19937_64& rng) const;  // always >= 1
  double mean() const;
};

struct Request {
  int64_t id = 0;
  double arrival_s = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t session = -1;   // the conversation it belongs to (a replicated plan's session_affinity router); -1: its own
};

struct Workload {
  std::string source_file;
  std::string name;
  // Arrivals: Poisson at rate_rps, or timestamps from a trace file.
  enum class Arrival { Poisson, Trace } arrival = Arrival::Poisson;
  double rate_rps = 1.0;
  std::vector<double> trace_arrivals_s;        // when Trace
  std::vector<int64_t> trace_prompt_tokens;    // optional, from the trace
  std::vector<int64_t> trace_output_tokens;    // optional, from the trace
  LengthDist prompt, output;
  int64_t num_requests = 1000;
  // Conversations the requests belong to (a replicated plan's session_affinity router keeps each on
  // one copy): request i draws its session uniformly from 0..sessions-1 on its own seeded stream,
  // so no other draw changes. 0: every request is its own session.
  int64_t sessions = 0;
  uint64_t seed = 1;
  // Batching limits (vLLM-style).
  int64_t max_num_seqs = 256;
  int64_t max_batched_tokens = 8192;
  bool chunked_prefill = false;
  // SLOs (seconds). A request meets the SLO if TTFT <= ttft and TPOT <= tpot; p99 e2e is a target.
  double slo_ttft_s = 1.0;
  double slo_tpot_s = 0.1;
  double slo_e2e_p99_s = 60.0;

  // The model's context (max_position_embeddings), bound by bind_model_context: a request whose
  // prompt is longer cannot be served. 0: not bound.
  int64_t model_context = 0;
  std::string model_name;
  bool drop_over_context = false;  // drop such requests (as serving engines refuse them) instead of refusing the workload
  // MoE routing (issue 14): the workload's "moe_routing" object, or --moe-routing; uniform by default.
  routing::RoutingSpec moe_routing;
  // For the user, once (each command prints them as "peerplan: note: ..."): rows of a trace that
  // were skipped, the slice of a trace replayed.
  std::vector<std::string> notes;

  // Every request at once: RequestSource(*this).all() (planner/model/workload_requests.hpp), for
  // small runs and tests; simulations stream them from a RequestSource instead. Deterministic for
  // a given seed. Throws InputError when a prompt is over model_context (unless
  // drop_over_context, which removes those requests and numbers the rest 0..n-1).
  std::vector<Request> generate() const;
  int64_t max_context() const;  // upper bound on prompt + output tokens
};

Workload load_workload(const std::string& path);

// The command-line overrides of a workload (`--rate`, `--requests`), one rule for every command
// (plan, simulate, validate, plan --validate):
//  - rate_rps > 0: Poisson arrivals at that rate, replacing the workload's arrival process; a
//    trace's timestamps are then dropped (its recorded lengths are kept, request i still gets row
//    i's). 0: the workload's own arrivals. Outside [1e-6, 1e9] requests/s (NaN, inf, negative):
//    InputError naming --rate.
//  - num_requests > 0: serve that many requests. 0: the workload's count. Outside [1, 10000000],
//    or more than a trace holds (no silent looping, as in a workload file): InputError naming
//    --requests.
//  - trace_window [start, end) (seconds from the trace's first request; end may be +inf): replay
//    only the requests that arrive in it, the first of them at 0; the count becomes theirs
//    (--requests may lower it). trace_speedup X > 0: arrivals X times closer together (X < 1:
//    further apart), the same requests at X times the load. Both need trace arrivals (InputError
//    naming --trace-window / --trace-speedup otherwise, or for an empty window, or with --rate).
//    Applied before the rate and count.
struct WorkloadOverrides {
  WorkloadOverrides(double rate = 0, int64_t requests = 0) : rate_rps(rate), num_requests(requests) {}
  double rate_rps = 0;
  int64_t num_requests = 0;
  std::optional<std::pair<double, double>> trace_window;
  double trace_speedup = 0;  // 0: as recorded
};
// "START:END" in seconds ("START:" to the end, ":END" from the start) -> [start, end); InputError
// naming --trace-window for anything else (end <= start, negative, not numbers).
std::pair<double, double> parse_trace_window(const std::string& text);
void apply_overrides(Workload& w, const WorkloadOverrides& o);

// Binds `context` (the model's max_position_embeddings; 0: unknown, nothing bound) to `w`: from
// then on generate() refuses a prompt longer than it (InputError naming the workload and the
// model, with the count), or drops those requests when `drop` (--drop-over-context).
void bind_model_context(Workload& w, int64_t context, const std::string& model, bool drop);
// How many requests generate() drops (0 when nothing is bound); throws as generate() does.
int64_t requests_dropped_over_context(const Workload& w);
// "dropped 3 requests whose prompt is longer than ..." for the user, "" when none was dropped.
std::string over_context_note(const Workload& w);
Workload parse_workload(const std::string& json_text, const std::string& origin);

// A workload argument: a JSON path or a shipped name ("chat" -> models/workloads/chat.json).
// Throws InputError listing the shipped names when none matches.
std::string resolve_workload_path(const std::string& name_or_path);
std::vector<std::string> shipped_workload_names();

}  // namespace peerplan
