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

Metrics compute_metrics(const std::vector<RequestTiming>& reqs, const Slo& slo) {
  Metrics m;
  m.slo = slo;
  m.requests = int64_t(reqs.size());
  m.per_request = reqs;
  std::vector<double> ttft, tpot, e2e;
  double t0 = std::numeric_limits<double>::infinity(), t1 = -std::numeric_limits<double>::infinity();
  for (const RequestTiming& r : reqs) {
    t0 = std::min(t0, r.arrival_s);
    m.prompt_tokens += r.prompt_tokens;
    if (!r.done()) continue;
    ++m.completed;
    m.output_tokens += r.output_tokens;
    t1 = std::max(t1, r.finish_s);
    double t_first = r.first_token_s - r.arrival_s;
    ttft.push_back(t_first);
    e2e.push_back(r.finish_s - r.arrival_s);
    double t_per = 0;
    if (r.output_tokens > 1) {
      t_per = (r.finish_s - r.first_token_s) / double(r.output_tokens - 1);
      tpot.push_back(t_per);
    }
    if (t_first <= slo.ttft_s && t_per <= slo.tpot_s) ++m.slo_met;
  }
  m.ttft = latency_stats(ttft);
  m.tpot = latency_stats(tpot);
  m.e2e = latency_stats(std::move(e2e));
  m.duration_s = m.completed ? std::max(0.0, t1 - t0) : 0.0;
  if (m.duration_s > 0) {
    m.output_tokens_per_s = double(m.output_tokens) / m.duration_s;
    int64_t done_prompt = 0;
    for (const RequestTiming& r : reqs)
      if (r.done()) done_prompt += r.prompt_tokens;
    m.total_tokens_per_s = double(m.output_tokens + done_prompt) / m.duration_s;
    m.requests_per_s = double(m.completed) / m.duration_s;
    m.goodput_rps = double(m.slo_met) / m.duration_s;
  }
  m.slo_attainment = m.requests ? double(m.slo_met) / double(m.requests) : 0.0;
  m.e2e_p99_met = m.completed == m.requests && m.requests > 0 && m.e2e.p99 <= slo.e2e_p99_s;
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
  if (include_requests) {
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
