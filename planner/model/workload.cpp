// Workload JSON -> Workload (format in docs/model.md). Validation names the file and the field.
#include "planner/model/workload.hpp"

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "planner/model/workload_requests.hpp"
#include "planner/model/workload_trace.hpp"

namespace peerplan {

namespace {

const char* kDistHelp =
    "expected one of: {\"dist\": \"fixed\", \"value\": N}, {\"dist\": \"uniform\", \"min\": A, \"max\": B}, "
    "{\"dist\": \"lognormal\", \"mean\": M, \"sigma\": S} (or \"mu\" instead of \"mean\"), "
    "{\"dist\": \"empirical\"} (lengths from the arrival trace, or \"samples\": [...], or \"trace\": FILE)";

// A misspelt key ("slos", "rate") would silently fall back to a default: reject it instead.
void check_keys(const JsonIn& in, std::initializer_list<const char*> allowed) {
  for (const auto& [key, value] : in.raw().items()) {
    bool ok = false;
    std::string list;
    for (const char* a : allowed) {
      ok = ok || key == a;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    if (!ok) in.fail(key, "unknown field; expected one of: " + list);
  }
}

// Bounds that keep every figure finite and every sum in range; far beyond real serving.
constexpr int64_t kMaxTokens = 100'000'000;       // per prompt or output
constexpr int64_t kMaxRequests = 10'000'000;      // per run
constexpr double kMinRate = 1e-6, kMaxRate = 1e9;  // requests per second

int64_t tokens(const JsonIn& j, const std::string& key) {
  int64_t v = j.positive_int(key);
  if (v > kMaxTokens)
    j.fail(key, "at most " + std::to_string(kMaxTokens) + " tokens per request is accepted; found " + std::to_string(v));
  return v;
}

std::string resolve_relative(const std::string& file, const std::string& origin);

// Loads a trace named by a workload; an error names both files (the workload's field and the
// trace's own line/column).
Trace load_trace_for(const JsonIn& in, const std::string& key) {
  std::string path = resolve_relative(in.str(key), in.file());
  try {
    return load_trace(path);
  } catch (const InputError& e) {
    in.fail(key, std::string("the trace it names is not usable: ") + e.what());
  }
}

std::string resolve_relative(const std::string& file, const std::string& origin) {
  namespace fs = std::filesystem;
  fs::path p(file);
  if (p.is_absolute()) return file;
  return (fs::path(origin).parent_path() / p).lexically_normal().string();
}

// `column` is the arrival trace's column for this length (empty if no trace or no such column).
LengthDist parse_length(const JsonIn& in, const std::string& key, const Trace* trace,
                        const std::vector<int64_t>* column, std::vector<std::string>& notes) {
  LengthDist d;
  if (!in.has(key)) {
    // A trace that carries the lengths needs no distribution: replay them.
    if (column && !column->empty()) {
      d.kind = LengthDist::Kind::Empirical;
      d.samples = *column;
      d.replay = true;
      return d;
    }
    in.fail(key, std::string("required field is missing; ") + kDistHelp);
  }
  JsonIn j = in.object(key);
  check_keys(j, {"dist", "value", "min", "max", "mean", "mu", "sigma", "samples", "trace"});
  std::string dist = j.str("dist");
  if (dist == "fixed") {
    d.kind = LengthDist::Kind::Fixed;
    d.value = double(tokens(j, "value"));
    d.min = d.max = d.value;
  } else if (dist == "uniform") {
    d.kind = LengthDist::Kind::Uniform;
    d.min = double(tokens(j, "min"));
    d.max = double(tokens(j, "max"));
    if (d.min > d.max)
      j.fail("min", "must not exceed max (" + std::to_string(int64_t(d.max)) + "); found " + std::to_string(int64_t(d.min)));
  } else if (dist == "lognormal") {
    d.kind = LengthDist::Kind::Lognormal;
    d.sigma = j.positive("sigma");
    if (d.sigma > 10) j.fail("sigma", "expected a log-space spread in (0, 10] (real length spreads are ~0.3-1.5); found " + std::to_string(d.sigma));
    if (j.has("mean") == j.has("mu"))
      j.fail("mean", "give exactly one of mean (the distribution's mean, in tokens) or mu (mean of the natural log)");
    // mean = exp(mu + sigma^2 / 2) for a lognormal, so mu follows from the mean users think in.
    if (j.has("mean")) {
      double mean = j.positive("mean");
      if (mean < 1 || mean > double(kMaxTokens))
        j.fail("mean", "expected a mean length in [1, " + std::to_string(kMaxTokens) + "] tokens; found " + std::to_string(mean));
      d.mu = std::log(mean) - 0.5 * d.sigma * d.sigma;
    } else {
      d.mu = j.num("mu");
      if (d.mu < -50 || d.mu > std::log(double(kMaxTokens)))
        j.fail("mu", "expected the mean of ln(tokens) in [-50, " + std::to_string(std::log(double(kMaxTokens))) +
                         "]; found " + std::to_string(d.mu));
    }
    d.min = double(j.has("min") ? tokens(j, "min") : 1);
    // Default cap: mu + 4 sigma (the 99.997th percentile), so max_context() stays finite.
    d.max = j.has("max") ? double(tokens(j, "max"))
                         : std::min(double(kMaxTokens), std::max(1.0, std::ceil(std::exp(d.mu + 4 * d.sigma))));
    if (d.min > d.max)
      j.fail("min", "must not exceed max (" + std::to_string(int64_t(d.max)) + "); found " + std::to_string(int64_t(d.min)));
  } else if (dist == "empirical") {
    d.kind = LengthDist::Kind::Empirical;
    if (j.has("samples")) {
      JsonIn s = j.array("samples");
      for (size_t i = 0; i < s.size(); ++i) {
        int64_t v = s[i].as_integer();
        if (v < 1 || v > kMaxTokens)
          s[i].fail("", "expected a token count in [1, " + std::to_string(kMaxTokens) + "], found " + std::to_string(v));
        d.samples.push_back(v);
      }
      if (d.samples.empty()) j.fail("samples", "expected at least one sample");
    } else if (j.has("trace")) {
      // Lengths resampled from another trace's column (arrivals may still be Poisson).
      Trace t = load_trace_for(j, "trace");
      const auto& col = key == "prompt_tokens" ? t.prompt_tokens : t.output_tokens;
      if (col.empty()) j.fail("trace", "trace " + t.file + " has no " + key + " column to sample from");
      d.samples = col;
      if (std::string note = t.skipped_note(); !note.empty()) notes.push_back(note);
    } else if (trace) {
      if (!column || column->empty())
        j.fail("dist", "the arrival trace " + trace->file + " has no " + key + " column; add one, or give \"samples\"");
      d.samples = *column;
      d.replay = true;  // request i takes row i's length: the trace replays as recorded
    } else {
      j.fail("dist", "empirical lengths need \"samples\": [...], \"trace\": FILE, or an arrival trace with a " + key +
                         " column");
    }
    d.min = double(*std::min_element(d.samples.begin(), d.samples.end()));
    d.max = double(*std::max_element(d.samples.begin(), d.samples.end()));
  } else {
    j.fail("dist", "unknown distribution '" + dist + "'; " + kDistHelp);
  }
  return d;
}

Workload from_json(const json& root, const std::string& origin) {
  JsonIn in(root, origin);
  if (!in.is_object()) in.fail("", "expected a JSON object describing a workload (see docs/model.md)");
  if (in.has("version") && in.integer("version") != 1)
    in.fail("version", "this peerplan reads workload version 1; found " + std::to_string(in.integer("version")));
  check_keys(in, {"version", "name", "description", "arrival", "prompt_tokens", "output_tokens", "batching", "slo",
                  "num_requests", "seed", "moe_routing", "sessions"});
  Workload w;
  w.source_file = origin;
  w.name = in.str_or("name", std::filesystem::path(origin).stem().string());

  JsonIn arr = in.object("arrival");
  check_keys(arr, {"process", "rate_rps", "file"});
  std::string process = arr.str("process");
  Trace trace;
  bool have_trace = false;
  if (process == "poisson") {
    w.arrival = Workload::Arrival::Poisson;
    w.rate_rps = arr.positive("rate_rps");
    if (w.rate_rps < kMinRate || w.rate_rps > kMaxRate)
      arr.fail("rate_rps", "expected requests per second in [1e-6, 1e9]; found " + std::to_string(w.rate_rps));
  } else if (process == "trace") {
    w.arrival = Workload::Arrival::Trace;
    trace = load_trace_for(arr, "file");
    have_trace = true;
    if (std::string note = trace.skipped_note(); !note.empty()) w.notes.push_back(note);
    double span = trace.timestamps_s.back() - trace.timestamps_s.front();
    w.rate_rps = span > 0 ? double(trace.timestamps_s.size() - 1) / span : 0;  // informative only
  } else {
    arr.fail("process", "unknown arrival process '" + process + "'; expected \"poisson\" (with rate_rps) or \"trace\" "
                        "(with file: a CSV or JSON of timestamp_s)");
  }

  if (in.has("num_requests")) {
    w.num_requests = in.positive_int("num_requests");
    if (w.num_requests > kMaxRequests)
      in.fail("num_requests", "at most " + std::to_string(kMaxRequests) + " requests per run is accepted; found " +
                                  std::to_string(w.num_requests));
    if (have_trace && size_t(w.num_requests) > trace.timestamps_s.size())
      in.fail("num_requests", "the trace " + trace.file + " has only " + std::to_string(trace.timestamps_s.size()) +
                                  " requests; ask for at most that many (or leave num_requests out)");
  } else if (have_trace) {
    w.num_requests = int64_t(trace.timestamps_s.size());
  }

  w.prompt = parse_length(in, "prompt_tokens", have_trace ? &trace : nullptr, have_trace ? &trace.prompt_tokens : nullptr,
                          w.notes);
  w.output = parse_length(in, "output_tokens", have_trace ? &trace : nullptr, have_trace ? &trace.output_tokens : nullptr,
                          w.notes);
  if (have_trace) {  // moved, not copied: a trace of millions of rows is read once and held once
    w.trace_arrivals_s = std::move(trace.timestamps_s);
    w.trace_prompt_tokens = std::move(trace.prompt_tokens);
    w.trace_output_tokens = std::move(trace.output_tokens);
  }

  if (auto b = in.opt("batching")) {
    if (!b->is_object()) in.fail("batching", "expected an object: {max_num_seqs, max_batched_tokens, chunked_prefill}");
    check_keys(*b, {"max_num_seqs", "max_batched_tokens", "chunked_prefill"});
    w.max_num_seqs = b->has("max_num_seqs") ? b->positive_int("max_num_seqs") : w.max_num_seqs;
    w.max_batched_tokens = b->has("max_batched_tokens") ? b->positive_int("max_batched_tokens") : w.max_batched_tokens;
    w.chunked_prefill = b->boolean_or("chunked_prefill", w.chunked_prefill);
  }
  if (auto s = in.opt("slo")) {
    if (!s->is_object()) in.fail("slo", "expected an object: {ttft_ms, tpot_ms, e2e_p99_ms}");
    check_keys(*s, {"ttft_ms", "tpot_ms", "e2e_p99_ms"});
    auto ms = [&](const char* key, double def_s) {
      double v = s->positive_or(key, def_s * 1e3);
      if (v < 1e-3 || v > 1e9) s->fail(key, "expected milliseconds in [0.001, 1e9]; found " + std::to_string(v));
      return v / 1e3;
    };
    w.slo_ttft_s = ms("ttft_ms", w.slo_ttft_s);
    w.slo_tpot_s = ms("tpot_ms", w.slo_tpot_s);
    w.slo_e2e_p99_s = ms("e2e_p99_ms", w.slo_e2e_p99_s);
  }
  if (in.has("seed")) w.seed = uint64_t(in.nonnegative_int("seed"));
  if (in.has("sessions")) w.sessions = in.nonnegative_int("sessions");
  if (auto r = in.opt("moe_routing")) w.moe_routing = routing::parse_routing_json(*r, origin);
  return w;
}

}  // namespace

Workload load_workload(const std::string& path) {
  json j = load_json_file(path, file_kind::kWorkload);
  return from_json(j, path);
}

void bind_model_context(Workload& w, int64_t context, const std::string& model, bool drop) {
  if (context <= 0) return;
  w.model_context = context;
  w.model_name = model;
  w.drop_over_context = drop;
}

int64_t requests_dropped_over_context(const Workload& w) {
  if (w.model_context <= 0 || w.num_requests <= 0) return 0;
  return RequestSource(w).dropped();
}

std::string over_context_note(const Workload& w) {
  const int64_t dropped = requests_dropped_over_context(w);
  if (dropped == 0) return "";
  return "dropped " + std::to_string(dropped) + " request" + (dropped == 1 ? "" : "s") +
         " whose prompt is longer than the context of " + w.model_name + " (" + std::to_string(w.model_context) +
         " tokens), as --drop-over-context asks";
}

Workload parse_workload(const std::string& json_text, const std::string& origin) {
  json j = parse_json_text(json_text, origin);
  return from_json(j, origin);
}

std::pair<double, double> parse_trace_window(const std::string& text) {
  auto bad = [&](const std::string& why) -> InputError {
    return InputError("", "--trace-window",
                      fmt::format("START:END in seconds from the trace's first request (e.g. 3600:7200; 600: to the "
                                  "end; :600 from the start), {}; got '{}'", why, text));
  };
  const size_t colon = text.find(':');
  if (colon == std::string::npos || text.find(':', colon + 1) != std::string::npos) throw bad("one colon");
  auto seconds = [&](const std::string& part, double def) {
    if (part.empty()) return def;
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(part.c_str(), &end);
    if (*end != '\0' || errno == ERANGE || !std::isfinite(v) || v < 0) throw bad("each a number of seconds >= 0");
    return v;
  };
  const double start = seconds(text.substr(0, colon), 0.0), end = seconds(text.substr(colon + 1), INFINITY);
  if (!(end > start)) throw bad("END after START");
  return {start, end};
}

namespace {

// Keeps rows [first, last) of a per-row column (a trace column, or replayed lengths).
template <class T>
void keep_rows(std::vector<T>& v, size_t first, size_t last) {
  if (v.empty()) return;
  v.erase(v.begin() + std::ptrdiff_t(std::min(last, v.size())), v.end());
  v.erase(v.begin(), v.begin() + std::ptrdiff_t(std::min(first, v.size())));
  v.shrink_to_fit();
}

// --trace-window and --trace-speedup on a workload with trace arrivals.
void slice_trace(Workload& w, const WorkloadOverrides& o) {
  const char* option = o.trace_window ? "--trace-window" : "--trace-speedup";
  if (w.arrival != Workload::Arrival::Trace)
    throw InputError(w.source_file, option, "a workload whose arrivals come from a trace (arrival.process \"trace\"); "
                                            "this one's are Poisson");
  if (o.rate_rps > 0 && o.trace_speedup > 0)
    throw InputError("", "--trace-speedup", "either --trace-speedup (the trace's own arrivals, faster) or --rate "
                                            "(Poisson arrivals), not both");
  auto& t = w.trace_arrivals_s;
  const double t0 = t.front();
  std::string what;
  if (o.trace_window) {
    const auto [start, end] = *o.trace_window;
    const size_t first = size_t(std::lower_bound(t.begin(), t.end(), t0 + start) - t.begin());
    const size_t last = size_t(std::lower_bound(t.begin(), t.end(), t0 + end) - t.begin());
    if (first >= last)
      throw InputError(w.source_file, "--trace-window",
                       fmt::format("a window holding requests; none of the trace's {} arrives in [{}, {}) s (it spans "
                                   "{:.3f} s from its first request)",
                                   t.size(), start, end, t.back() - t0));
    const size_t rows = t.size();
    for (LengthDist* d : {&w.prompt, &w.output})
      if (d->replay && d->samples.size() == rows) {
        keep_rows(d->samples, first, last);
        d->min = double(*std::min_element(d->samples.begin(), d->samples.end()));
        d->max = double(*std::max_element(d->samples.begin(), d->samples.end()));
      }
    keep_rows(w.trace_prompt_tokens, first, last);
    keep_rows(w.trace_output_tokens, first, last);
    keep_rows(t, first, last);
    w.num_requests = int64_t(t.size());
    what = fmt::format("requests {}..{} of the trace's {} (arriving in [{}, {}) s)", first, last - 1, rows, start,
                       std::isinf(end) ? std::string("end") : fmt::format("{}", end));
  }
  if (o.trace_speedup > 0) {
    const double t1 = t.front();
    for (double& x : t) x = t1 + (x - t1) / o.trace_speedup;
    what += fmt::format("{}arrivals {}x {}", what.empty() ? "the trace with " : ", ",
                        o.trace_speedup >= 1 ? o.trace_speedup : 1 / o.trace_speedup,
                        o.trace_speedup >= 1 ? "faster" : "slower");
  }
  const double span = t.back() - t.front();
  w.rate_rps = span > 0 ? double(t.size() - 1) / span : 0;  // informative only
  w.notes.push_back(fmt::format("replaying {}: {} requests at {:.2f} req/s", what, t.size(), w.rate_rps));
}

}  // namespace

void apply_overrides(Workload& w, const WorkloadOverrides& o) {
  // 0 means "the workload's own". NaN, inf and denormals were accepted once (robustness finding):
  // the same ranges as a workload file's rate_rps and num_requests.
  if (o.rate_rps != 0 && !(o.rate_rps >= kMinRate && o.rate_rps <= kMaxRate))
    throw InputError("", "--rate", fmt::format("a request rate in [1e-6, 1e9] requests/s, got {}", o.rate_rps));
  if (o.num_requests < 0 || o.num_requests > kMaxRequests)
    throw InputError("", "--requests", fmt::format("a number of requests in [1, 10000000], got {}", o.num_requests));
  if (o.trace_speedup != 0 && !(o.trace_speedup >= 1e-3 && o.trace_speedup <= 1e3))
    throw InputError("", "--trace-speedup", fmt::format("a factor in [0.001, 1000], got {}", o.trace_speedup));
  if (o.trace_window || o.trace_speedup > 0) slice_trace(w, o);
  if (o.rate_rps > 0) {
    w.arrival = Workload::Arrival::Poisson;
    w.rate_rps = o.rate_rps;
  }
  if (o.num_requests > 0) {
    if (w.arrival == Workload::Arrival::Trace && size_t(o.num_requests) > w.trace_arrivals_s.size())
      throw InputError(w.source_file, "--requests",
                       fmt::format("at most {} requests: the workload's arrival trace {}has only that many (or give "
                                   "--rate for Poisson arrivals instead of the trace's)",
                                   w.trace_arrivals_s.size(), o.trace_window ? "window " : ""));
    w.num_requests = o.num_requests;
  }
}

}  // namespace peerplan
