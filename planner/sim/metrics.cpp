#include "planner/sim/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "planner/topology/measurements.hpp"

namespace peerplan {

LatencyStats latency_stats(std::vector<double> s) {
  // One percentile definition for the whole project (numpy's linear interpolation): the profiler's.
  LatencyStats r;
  r.n = int64_t(s.size());
  if (s.empty()) return r;
  SampleStats st = compute_stats(std::move(s));
  r.mean = st.mean;
  r.p50 = st.median;
  r.p90 = st.p90;
  r.p99 = st.p99;
  r.max = st.max;
  return r;
}

namespace {
// Sketch buckets: [kLow * g^k, kLow * g^(k+1)) for g = 1.0004 up to kHigh; a bucket's midpoint is
// within sqrt(g) - 1 = 0.02 % of every value in it.
constexpr double kGrowth = 1.0004, kLow = 1e-9, kHigh = 1e7;
const double kLogGrowth = std::log(kGrowth);
const size_t kBuckets = size_t(std::ceil(std::log(kHigh / kLow) / kLogGrowth)) + 1;
}  // namespace

void LatencySketch::add(double v) {
  min_ = n_ == 0 ? v : std::min(min_, v);
  max_ = n_ == 0 ? v : std::max(max_, v);
  sum_ += v;
  ++n_;
  if (counts_.empty() && exact_.size() < exact_limit_) {
    exact_.push_back(v);
    return;
  }
  if (counts_.empty()) fold();
  if (v <= kLow) ++zeros_;
  else ++counts_[bucket(v)];
}

void LatencySketch::fold() {
  counts_.assign(kBuckets, 0);
  for (double v : exact_) {
    if (v <= kLow) ++zeros_;
    else ++counts_[bucket(v)];
  }
  std::vector<double>().swap(exact_);
}

size_t LatencySketch::bucket(double v) const {
  double k = std::floor(std::log(v / kLow) / kLogGrowth);
  return size_t(std::clamp(k, 0.0, double(kBuckets - 1)));
}

double LatencySketch::at_rank(int64_t rank) const {
  if (rank < zeros_) return min_;
  int64_t seen = zeros_;
  for (size_t k = 0; k < counts_.size(); ++k) {
    seen += int64_t(counts_[k]);
    if (rank < seen) return std::clamp(kLow * std::pow(kGrowth, double(k) + 0.5), min_, max_);
  }
  return max_;
}

LatencyStats LatencySketch::stats() const {
  if (counts_.empty()) return latency_stats(exact_);
  LatencyStats r;
  r.n = n_;
  auto pct = [&](double p) {  // as compute_stats: linear between the order statistics around p * (n - 1)
    double pos = p * double(n_ - 1);
    int64_t lo = int64_t(std::floor(pos)), hi = std::min(lo + 1, n_ - 1);
    double a = at_rank(lo), b = at_rank(hi);
    return a + (b - a) * (pos - double(lo));
  };
  r.mean = sum_ / double(n_);
  r.p50 = pct(0.50);
  r.p90 = pct(0.90);
  r.p99 = pct(0.99);
  r.max = max_;
  return r;
}

MetricsAccumulator::MetricsAccumulator(const Slo& slo, size_t exact_limit)
    : ttft_(exact_limit), tpot_(exact_limit), e2e_(exact_limit),
      t0_(std::numeric_limits<double>::infinity()), t1_(-std::numeric_limits<double>::infinity()) {
  m_.slo = slo;
}

void MetricsAccumulator::add(const RequestTiming& r) {
  ++m_.requests;
  t0_ = std::min(t0_, r.arrival_s);
  m_.prompt_tokens += r.prompt_tokens;
  if (!r.done()) return;
  ++m_.completed;
  m_.output_tokens += r.output_tokens;
  done_prompt_ += r.prompt_tokens;
  t1_ = std::max(t1_, r.finish_s);
  double t_first = r.first_token_s - r.arrival_s;
  ttft_.add(t_first);
  e2e_.add(r.finish_s - r.arrival_s);
  double t_per = 0;
  if (r.output_tokens > 1) {
    t_per = (r.finish_s - r.first_token_s) / double(r.output_tokens - 1);
    tpot_.add(t_per);
  }
  if (t_first <= m_.slo.ttft_s && t_per <= m_.slo.tpot_s) ++m_.slo_met;
}

Metrics MetricsAccumulator::finish() const {
  Metrics m = m_;
  m.ttft = ttft_.stats();
  m.tpot = tpot_.stats();
  m.e2e = e2e_.stats();
  m.duration_s = m.completed ? std::max(0.0, t1_ - t0_) : 0.0;
  if (m.duration_s > 0) {
    m.output_tokens_per_s = double(m.output_tokens) / m.duration_s;
    m.total_tokens_per_s = double(m.output_tokens + done_prompt_) / m.duration_s;
    m.requests_per_s = double(m.completed) / m.duration_s;
    m.goodput_rps = double(m.slo_met) / m.duration_s;
  }
  m.slo_attainment = m.requests ? double(m.slo_met) / double(m.requests) : 0.0;
  m.e2e_p99_met = m.completed == m.requests && m.requests > 0 && m.e2e.p99 <= m.slo.e2e_p99_s;
  return m;
}

Metrics compute_metrics(const std::vector<RequestTiming>& reqs, const Slo& slo) {
  MetricsAccumulator acc(slo, std::numeric_limits<size_t>::max());  // exact, whatever the count
  for (const RequestTiming& r : reqs) acc.add(r);
  Metrics m = acc.finish();
  m.per_request = reqs;
  return m;
}

namespace {

constexpr double kUs = 1e6;

nlohmann::json stats_json(const LatencyStats& s) {
  return {{"n", s.n},
          {"mean_us", s.mean * kUs},
          {"p50_us", s.p50 * kUs},
          {"p90_us", s.p90 * kUs},
          {"p99_us", s.p99 * kUs},
          {"max_us", s.max * kUs}};
}

LatencyStats stats_in(const JsonIn& j) {
  LatencyStats s;
  s.n = j.nonnegative_int("n");
  s.mean = j.nonnegative("mean_us") / kUs;
  s.p50 = j.nonnegative("p50_us") / kUs;
  s.p90 = j.nonnegative("p90_us") / kUs;
  s.p99 = j.nonnegative("p99_us") / kUs;
  s.max = j.nonnegative("max_us") / kUs;
  return s;
}

}  // namespace

nlohmann::json metrics_to_json(const Metrics& m, bool include_requests) {
  nlohmann::json j;
  j["format"] = "peerplan.metrics";
  j["version"] = m.version;
  j["kind"] = m.kind;
  j["plan"] = m.plan;
  j["model"] = m.model;
  j["machine"] = m.machine;
  j["workload"] = m.workload;
  j["requests"] = m.requests;
  j["completed"] = m.completed;
  j["prompt_tokens"] = m.prompt_tokens;
  j["output_tokens"] = m.output_tokens;
  j["iterations"] = m.iterations;
  j["duration_us"] = m.duration_s * kUs;
  j["ttft"] = stats_json(m.ttft);
  j["tpot"] = stats_json(m.tpot);
  j["e2e"] = stats_json(m.e2e);
  j["output_tokens_per_s"] = m.output_tokens_per_s;
  j["total_tokens_per_s"] = m.total_tokens_per_s;
  j["requests_per_s"] = m.requests_per_s;
  j["slo"] = {{"ttft_us", m.slo.ttft_s * kUs}, {"tpot_us", m.slo.tpot_s * kUs}, {"e2e_p99_us", m.slo.e2e_p99_s * kUs}};
  j["slo_met"] = m.slo_met;
  j["slo_attainment"] = m.slo_attainment;
  j["goodput_rps"] = m.goodput_rps;
  j["e2e_p99_met"] = m.e2e_p99_met;
  j["gpus"] = nlohmann::json::array();
  for (const GpuUsage& g : m.gpus)
    j["gpus"].push_back({{"gpu", g.gpu},
                         {"compute_us", g.compute_s * kUs},
                         {"communication_us", g.communication_s * kUs},
                         {"sync_us", g.sync_s * kUs},
                         {"idle_us", g.idle_s * kUs},
                         {"utilisation", g.utilisation}});
  j["links"] = nlohmann::json::array();
  for (const LinkUsage& l : m.links)
    j["links"].push_back({{"link", l.link},
                          {"bytes", l.bytes},
                          {"busy_us", l.busy_s * kUs},
                          {"utilisation", l.utilisation}});
  j["busiest_link"] = m.busiest_link;
  j["provenance"] = m.provenance;
  if (include_requests && m.per_request.size() == size_t(m.requests)) {
    // Columns rather than objects: 1 000s of requests stay compact and easy to load in pandas.
    nlohmann::json r = {{"id", nlohmann::json::array()},          {"arrival_us", nlohmann::json::array()},
                        {"first_token_us", nlohmann::json::array()}, {"finish_us", nlohmann::json::array()},
                        {"prompt_tokens", nlohmann::json::array()},  {"output_tokens", nlohmann::json::array()}};
    for (const RequestTiming& t : m.per_request) {
      r["id"].push_back(t.id);
      r["arrival_us"].push_back(t.arrival_s * kUs);
      r["first_token_us"].push_back(t.first_token_s < 0 ? -1.0 : t.first_token_s * kUs);
      r["finish_us"].push_back(t.finish_s < 0 ? -1.0 : t.finish_s * kUs);
      r["prompt_tokens"].push_back(t.prompt_tokens);
      r["output_tokens"].push_back(t.output_tokens);
    }
    j["per_request"] = r;
  }
  return j;
}

Metrics parse_metrics_json(const nlohmann::json& raw, const std::string& origin) {
  JsonIn j(raw, origin);
  if (!j.is_object()) j.fail("", "a metrics JSON object written by peerplan simulate or validate");
  if (j.str_or("format", "") != "peerplan.metrics")
    j.fail("format", "\"peerplan.metrics\" (this file was not written by peerplan simulate/validate)");
  Metrics m;
  m.version = int(j.positive_int("version"));
  if (m.version > kMetricsSchemaVersion)
    j.fail("version", "at most " + std::to_string(kMetricsSchemaVersion) + " (written by a newer peerplan)");
  m.kind = j.str("kind");
  m.plan = j.str_or("plan", "");
  m.model = j.str_or("model", "");
  m.machine = j.str_or("machine", "");
  m.workload = j.str_or("workload", "");
  m.requests = j.nonnegative_int("requests");
  m.completed = j.nonnegative_int("completed");
  m.prompt_tokens = j.nonnegative_int_or("prompt_tokens", 0);
  m.output_tokens = j.nonnegative_int_or("output_tokens", 0);
  m.iterations = j.nonnegative_int_or("iterations", 0);
  m.duration_s = j.nonnegative("duration_us") / kUs;
  m.ttft = stats_in(j.object("ttft"));
  m.tpot = stats_in(j.object("tpot"));
  m.e2e = stats_in(j.object("e2e"));
  m.output_tokens_per_s = j.nonnegative("output_tokens_per_s");
  m.total_tokens_per_s = j.nonnegative_or("total_tokens_per_s", 0);
  m.requests_per_s = j.nonnegative_or("requests_per_s", 0);
  if (auto s = j.opt("slo")) {
    m.slo.ttft_s = s->positive("ttft_us") / kUs;
    m.slo.tpot_s = s->positive("tpot_us") / kUs;
    m.slo.e2e_p99_s = s->positive("e2e_p99_us") / kUs;
  }
  m.slo_met = j.nonnegative_int_or("slo_met", 0);
  m.slo_attainment = j.nonnegative_or("slo_attainment", 0);
  m.goodput_rps = j.nonnegative("goodput_rps");
  m.e2e_p99_met = j.boolean_or("e2e_p99_met", false);
  if (auto g = j.opt("gpus")) {
    for (size_t i = 0; i < g->size(); ++i) {
      JsonIn e = (*g)[i];
      GpuUsage u;
      u.gpu = int(e.nonnegative_int("gpu"));
      u.compute_s = e.nonnegative("compute_us") / kUs;
      u.communication_s = e.nonnegative("communication_us") / kUs;
      u.sync_s = e.nonnegative("sync_us") / kUs;
      u.idle_s = e.nonnegative("idle_us") / kUs;
      u.utilisation = e.nonnegative("utilisation");
      m.gpus.push_back(u);
    }
  }
  if (auto l = j.opt("links")) {
    for (size_t i = 0; i < l->size(); ++i) {
      JsonIn e = (*l)[i];
      m.links.push_back({e.str("link"), e.nonnegative("bytes"), e.nonnegative("busy_us") / kUs,
                         e.nonnegative("utilisation")});
    }
  }
  m.busiest_link = j.str_or("busiest_link", "");
  if (j.has("provenance")) m.provenance = raw.at("provenance");
  if (auto r = j.opt("per_request")) {
    JsonIn ids = r->array("id"), arr = r->array("arrival_us"), ft = r->array("first_token_us"),
           fin = r->array("finish_us"), pt = r->array("prompt_tokens"), ot = r->array("output_tokens");
    size_t n = ids.size();
    for (const JsonIn* c : {&arr, &ft, &fin, &pt, &ot})
      if (c->size() != n) c->fail("", "as many entries as per_request/id (" + std::to_string(n) + ")");
    for (size_t i = 0; i < n; ++i) {
      RequestTiming t;
      t.id = ids[i].as_integer();
      t.arrival_s = arr[i].as_num() / kUs;
      double f = ft[i].as_num(), e = fin[i].as_num();
      t.first_token_s = f < 0 ? -1.0 : f / kUs;
      t.finish_s = e < 0 ? -1.0 : e / kUs;
      t.prompt_tokens = pt[i].as_integer();
      t.output_tokens = ot[i].as_integer();
      m.per_request.push_back(t);
    }
  }
  return m;
}

}  // namespace peerplan
