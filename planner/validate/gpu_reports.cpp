#include "planner/validate/gpu_reports.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "planner/sim/power_state.hpp"

namespace peerplan {

nlohmann::json iteration_report(const ServeResult& res, PlanPricer& pricer, std::string* table) {
  nlohmann::json its = nlohmann::json::array();
  struct Sum {
    int64_t n = 0;
    double gpu = 0, pred = 0, enqueue = 0, lag = 0, wake = 0;
  };
  std::map<std::string, Sum> by;
  std::map<int, double> prev_done;  // per copy: each copy's scheduler waits on its own iterations only
  // A paced profile's prices are at boost clock: each copy's iterations, at their measured GPU start,
  // go through the serving simulation's power state, so a long prefill is compared with its
  // throttled price (docs/simulator.md, "Power"), not with a boost price it cannot run at.
  const PowerThrottle* throttle = pricer.cost().serving_throttle();
  std::map<int, PowerState> power;
  const std::vector<GroupedThrottle> grouped =
      throttle ? grouped_throttles_for(*throttle, pricer.config()) : std::vector<GroupedThrottle>{};
  for (const IterationRecord& r : res.iterations) {
    const IterationCost& c = pricer.price(r.shape);
    const double boost = c.total_s();
    double pred = boost, factor = 1;
    if (throttle) {  // one pipeline stage per replica here: its mix is the stages' sum
      ClassSeconds mix;
      for (const ClassSeconds& x : c.stage_class_s) mix += x;
      PowerState& ps = power.try_emplace(r.replica, *throttle, grouped).first->second;
      factor = ps.factor(mix, r.shape.tokens());
      pred = ps.run(r.gpu_start_s, pred, draws_power_cap(r.shape), factor);
    }
    its.push_back({{"index", r.index},
                   {"replica", r.replica},
                   {"prefill_seqs", r.shape.prefill_seqs},
                   {"prefill_tokens", r.shape.prefill_tokens},
                   {"prefill_context", r.shape.prefill_context},
                   {"decode_seqs", r.shape.decode_seqs},
                   {"decode_context", r.shape.decode_context},
                   {"graph", r.graph},
                   {"new_tokens_count", r.new_tokens_count},
                   {"host_begin_us", r.host_begin_s * 1e6},
                   {"host_enqueued_us", r.host_enqueued_s * 1e6},
                   {"gpu_start_us", r.gpu_start_s * 1e6},
                   {"gpu_end_us", r.gpu_end_s * 1e6},
                   {"host_done_us", r.host_done_s * 1e6},
                   {"predicted_us", pred * 1e6},
                   {"compile_us", r.compile_s * 1e6},
                   {"slowest_enqueues", r.slowest_enqueues}});
    if (throttle) {  // a paced profile: the boost price and the factor the power state would apply past the onset
      its.back()["boost_predicted_us"] = boost * 1e6;
      its.back()["throttle_factor"] = factor;
    }
    const std::string kind = r.shape.prefill_seqs == 0 ? (r.graph ? "decode (graph)" : "decode (eager)")
                             : r.new_tokens_count    ? "prefill/mixed, new size"
                                                     : "prefill/mixed, size seen";
    Sum& s = by[kind];
    ++s.n;
    s.gpu += r.gpu_end_s - r.gpu_start_s;
    s.pred += pred;
    s.enqueue += r.host_enqueued_s - r.host_begin_s;
    s.lag += std::max(0.0, r.host_begin_s - prev_done[r.replica]);
    s.wake += r.host_done_s - r.gpu_end_s;
    prev_done[r.replica] = r.host_done_s;
  }
  std::string t = "\n  iterations: GPU span (CUDA events) vs the simulator's price of the same shape; host times per iteration\n";
  t += fmt::format("  {:<26} {:>5} {:>10} {:>10} {:>8} {:>11} {:>11} {:>11}\n", "kind", "n", "GPU mean", "predicted",
                   "GPU/pred", "enqueue", "sched gap", "wake-up");
  for (auto& [k, s] : by)
    t += fmt::format("  {:<26} {:>5} {:>7.3f} ms {:>7.3f} ms {:>8.3f} {:>8.3f} ms {:>8.3f} ms {:>8.3f} ms\n", k, s.n,
                     s.gpu / double(s.n) * 1e3, s.pred / double(s.n) * 1e3, s.pred > 0 ? s.gpu / s.pred : 0.0,
                     s.enqueue / double(s.n) * 1e3, s.lag / double(s.n) * 1e3, s.wake / double(s.n) * 1e3);
  // TTFT = queue wait (arrival -> its first iteration formed) + the rest (its prefill iterations).
  nlohmann::json reqs = nlohmann::json::array();
  std::vector<double> wait, rest;
  std::map<int64_t, const RequestTiming*> timing;
  for (const RequestTiming& rt : res.measured.per_request) timing[rt.id] = &rt;
  for (const auto& [id, sched] : res.first_scheduled) {
    auto f = timing.find(id);
    if (f == timing.end() || sched < 0 || f->second->first_token_s < 0) continue;
    const RequestTiming& rt = *f->second;
    reqs.push_back({{"id", id}, {"arrival_us", rt.arrival_s * 1e6}, {"scheduled_us", sched * 1e6},
                    {"first_token_us", rt.first_token_s * 1e6}, {"prompt_tokens", rt.prompt_tokens}});
    wait.push_back(sched - rt.arrival_s);
    rest.push_back(rt.first_token_s - sched);
  }
  if (!wait.empty()) {
    LatencyStats ws = latency_stats(wait), rs = latency_stats(rest);
    t += fmt::format("  measured TTFT = queue wait (mean {:.2f} ms, p50 {:.2f} ms) + first iteration formed -> first "
                     "token (mean {:.2f} ms, p50 {:.2f} ms)\n",
                     ws.mean * 1e3, ws.p50 * 1e3, rs.mean * 1e3, rs.p50 * 1e3);
  }
  if (table) *table = t;
  return {{"format", "peerplan.iterations"}, {"version", 1}, {"iterations", its}, {"requests", reqs}};
}

std::string bench_table(const std::vector<StepBench>& rows, const std::string& title) {
  std::string s = title + "\n";
  s += fmt::format("  {:<8} {:>6} {:>8} {:>7} {:>11} {:>11} {:>11} {:>12} {:>10} {:>11} {:>9}\n", "step", "batch", "context",
                   "graph", "median", "min", "max", "tokens/s", "HBM MB", "priced", "GPU/price");
  for (const StepBench& r : rows)
    s += fmt::format("  {:<8} {:>6} {:>8} {:>7} {:>8.3f} ms {:>8.3f} ms {:>8.3f} ms {:>12.0f} {:>10.1f} {:>8.3f} ms {:>9.3f}\n",
                     r.what, r.batch, r.context, r.graph ? "yes" : "no", r.step_s * 1e3, r.min_s * 1e3, r.max_s * 1e3,
                     double(r.tokens) / r.step_s, r.hbm_bytes / 1e6, r.priced_s * 1e3,
                     r.priced_s > 0 ? r.step_s / r.priced_s : 0.0);
  return s;
}

nlohmann::json bench_json(const std::vector<StepBench>& rows, const std::string& plan, const std::string& model,
                          const nlohmann::json& host_context) {
  nlohmann::json j = nlohmann::json::array();
  for (const StepBench& r : rows)
    j.push_back({{"step", r.what}, {"batch", r.batch}, {"context", r.context}, {"graph", r.graph},
                 {"median_us", r.step_s * 1e6}, {"min_us", r.min_s * 1e6}, {"max_us", r.max_s * 1e6},
                 {"tokens", r.tokens}, {"hbm_bytes", r.hbm_bytes}, {"priced_us", r.priced_s * 1e6}});
  return nlohmann::json{{"plan", plan}, {"model", model}, {"context", host_context}, {"steps", j}};
}

std::vector<StepBench> bench_rows_from_json(const std::string& path, std::string* plan, std::string* model) {
  const json doc = load_json_file(path, file_kind::kMetrics);
  const JsonIn root(doc, path);
  if (plan) *plan = root.str_or("plan", "");
  if (model) *model = root.str_or("model", "");
  const JsonIn steps = root.array("steps");
  std::vector<StepBench> rows;
  for (size_t i = 0; i < steps.size(); ++i) {
    const JsonIn s = steps[i];
    StepBench r;
    r.what = s.str("step");
    if (r.what != "decode" && r.what != "prefill")
      throw InputError(path, s.field("step"), "\"decode\" or \"prefill\" (got \"" + r.what + "\")");
    r.batch = s.positive_int("batch");
    r.context = s.positive_int("context");
    r.tokens = s.has("tokens") ? s.positive_int("tokens") : (r.what == "prefill" ? r.context : r.batch);
    r.graph = s.boolean("graph");
    r.step_s = s.positive("median_us") * 1e-6;
    r.min_s = s.nonnegative("min_us") * 1e-6;
    r.max_s = s.nonnegative("max_us") * 1e-6;
    r.hbm_bytes = s.nonnegative("hbm_bytes");
    rows.push_back(r);
  }
  return rows;
}

std::string self_test_table(const std::vector<SelfTestResult>& rows, int device, bool* all_pass) {
  bool ok = true;
  std::string s =
      fmt::format("kernel self-test on GPU {} (fp64 CPU reference, fresh random inputs, outputs poisoned)\n", device);
  s += fmt::format("  {:<22} {:<48} {:>10} {:>9}  {}\n", "kernel", "shape", "rel.error", "tolerance", "");
  for (const SelfTestResult& r : rows) {
    ok = ok && r.pass();
    s += fmt::format("  {:<22} {:<48} {:>10.2e} {:>9.0e}  {}{}\n", r.kernel, r.shape, r.rel_error, r.tolerance,
                     r.pass() ? "ok" : "FAIL", r.all_written ? "" : " (unwritten outputs)");
  }
  if (all_pass) *all_pass = ok;
  return s;
}

}  // namespace peerplan
