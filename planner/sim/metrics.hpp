#pragma once
// Serving metrics from per-request timestamps, and the versioned "metrics JSON" that both the
// simulator (predicted) and the executor (measured) write, so `peerplan validate` compares like
// with like. Timestamps are seconds on the driver's clock (simulated or wall); only differences
// matter.
//
// Definitions (as vLLM's benchmark_serving and DistServe use them):
//   TTFT  = first_token - arrival
//   TPOT  = (finish - first_token) / (output_tokens - 1)   (requests with one output token have none)
//   E2E   = finish - arrival
//   tokens/s (output) = sum(output_tokens) / duration, duration = last finish - first arrival
//   goodput = requests meeting BOTH TTFT <= slo_ttft and TPOT <= slo_tpot, per second of duration
// Percentiles interpolate linearly between order statistics (numpy's default).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace peerplan {

inline constexpr int kMetricsSchemaVersion = 1;

struct RequestTiming {
  int64_t id = 0;
  double arrival_s = 0;
  double first_token_s = -1;  // < 0: never produced (request did not finish)
  double finish_s = -1;       // < 0: did not finish
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  bool done() const { return finish_s >= 0 && first_token_s >= 0; }
};

struct Slo {
  double ttft_s = 1.0;
  double tpot_s = 0.1;
  double e2e_p99_s = 60.0;  // a target for the p99, reported as met or not
};

struct LatencyStats {
  int64_t n = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};
LatencyStats latency_stats(std::vector<double> samples);

// Latency statistics fed one sample at a time. Up to `exact_limit` samples are kept and the
// figures are latency_stats()'s, bit for bit; past it they fold into a log-bucket histogram
// (buckets 0.02 % wide, ~0.5 MB) and memory stops growing: mean and max stay exact (the mean as a
// running sum), percentiles are within 0.02 % of the exact ones (linear interpolation between the
// order statistics, each taken as its bucket's midpoint clamped to [min, max]).
class LatencySketch {
 public:
  explicit LatencySketch(size_t exact_limit) : exact_limit_(exact_limit) {}
  void add(double v);
  LatencyStats stats() const;
  int64_t count() const { return n_; }
  bool exact() const { return counts_.empty(); }

 private:
  void fold();
  size_t bucket(double v) const;
  double at_rank(int64_t rank) const;  // the rank-th smallest sample (0-based), from the buckets
  size_t exact_limit_;
  std::vector<double> exact_;
  std::vector<uint64_t> counts_;       // empty while exact
  int64_t n_ = 0, zeros_ = 0;          // zeros_: samples <= the lowest bucket's floor
  double sum_ = 0, min_ = 0, max_ = 0;
};

// Where one GPU's time went over the run. The four parts add up to the run's duration:
// compute (kernels), communication (transfers/collectives not hidden behind compute),
// sync (launch and synchronisation overhead), idle (waiting for work or for other GPUs).
struct GpuUsage {
  int gpu = 0;
  double compute_s = 0, communication_s = 0, sync_s = 0, idle_s = 0;
  double utilisation = 0;  // compute_s / duration
};

struct LinkUsage {
  std::string link;         // "gpu0->sw0"
  double bytes = 0;
  double busy_s = 0;        // time with at least one flow on it
  double utilisation = 0;   // bytes / (capacity * duration)
};

struct Metrics {
  int version = kMetricsSchemaVersion;
  std::string kind = "predicted";  // "predicted" (simulator) or "measured" (executor)
  std::string plan, model, machine, workload;
  int64_t requests = 0, completed = 0;
  int64_t prompt_tokens = 0, output_tokens = 0;
  int64_t iterations = 0;
  double duration_s = 0;
  LatencyStats ttft, tpot, e2e;
  double output_tokens_per_s = 0, total_tokens_per_s = 0, requests_per_s = 0;
  Slo slo;
  int64_t slo_met = 0;
  double slo_attainment = 0;  // slo_met / requests
  double goodput_rps = 0;
  bool e2e_p99_met = false;
  std::vector<GpuUsage> gpus;
  std::vector<LinkUsage> links;
  std::string busiest_link;     // highest utilisation, "" if no links were used
  nlohmann::json provenance = nlohmann::json::object();  // cost sources, profile host/date, P2P...
  std::vector<RequestTiming> per_request;  // kept so CDFs can be drawn and runs compared (may be empty
                                           // for long simulations: see kPerRequestLimit)
};

// Latency and throughput figures from the request timings (gpus, links and provenance are
// filled in by the driver). Requests that did not finish count against SLO attainment.
Metrics compute_metrics(const std::vector<RequestTiming>& requests, const Slo& slo);

// Streaming form of compute_metrics for long simulations: add each request once (when it finishes,
// or at the end if it never does), in any order. With samples <= exact_limit the result is
// compute_metrics()'s without per_request; past it the latencies are sketched (LatencySketch), so
// memory does not grow with the number of requests.
class MetricsAccumulator {
 public:
  MetricsAccumulator(const Slo& slo, size_t exact_limit);
  void add(const RequestTiming& r);
  Metrics finish() const;

 private:
  Metrics m_;
  LatencySketch ttft_, tpot_, e2e_;
  double t0_, t1_;
  int64_t done_prompt_ = 0;
};

// Runs of up to this many requests keep every request's timing and write the per_request section
// of the metrics JSON; longer ones keep only what the figures need unless asked
// (`simulate --per-request`). Also the exact-percentile limit of the streaming metrics.
inline constexpr size_t kPerRequestLimit = 100000;

// The metrics JSON ("peerplan.metrics", version kMetricsSchemaVersion). Times are written in
// microseconds with a _us suffix, as everywhere else in peerplan's JSON.
// The per_request section is written when include_requests and every request's timing is held
// (per_request.size() == requests).
nlohmann::json metrics_to_json(const Metrics& m, bool include_requests = true);
// Reads it back (for validate and reports). Throws InputError naming `origin` and the field.
Metrics parse_metrics_json(const nlohmann::json& j, const std::string& origin);

}  // namespace peerplan
