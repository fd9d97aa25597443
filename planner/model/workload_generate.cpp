// Request generation. Deterministic for a seed on every platform: std::mt19937_64 is fully
// specified by the standard, but libstdc++/libc++ distributions (exponential, lognormal, ...) are
// not, and have changed between versions; so the distributions below are our own code.
#include <algorithm>
#include <cmath>

#include "planner/model/workload.hpp"
#include "planner/model/workload_requests.hpp"

#include "planner/core/error.hpp"

namespace peerplan {

namespace {

constexpr double kPi = 3.14159265358979323846;

// Uniform in [0, 1) from the top 53 bits: exact doubles, the same on every platform.
double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

// Standard normal by Box-Muller; always two draws per call so streams stay aligned.
double std_normal(std::mt19937_64& rng) {
  double u1 = 1.0 - uniform01(rng);  // (0, 1]: log is finite
  double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

// Independent streams for arrivals, prompts and outputs: changing one distribution does not
// reshuffle the others (splitmix64 decorrelates the derived seeds).
uint64_t stream_seed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

int64_t clamp_len(double v, double lo, double hi) {
  double r = std::round(std::min(v, 1e15));  // exp() of a far tail must not overflow the integer
  r = std::max(r, std::max(1.0, lo));
  if (hi > 0) r = std::min(r, hi);
  return int64_t(r);
}

}  // namespace

int64_t LengthDist::sample(std::mt19937_64& rng) const {
  switch (kind) {
    case Kind::Fixed:
      return std::max<int64_t>(1, std::llround(value));
    case Kind::Uniform: {  // integers in [min, max], each equally likely
      double span = std::floor(max) - std::ceil(min) + 1;
      return clamp_len(std::ceil(min) + std::floor(uniform01(rng) * span), min, max);
    }
    case Kind::Lognormal:  // rounded, then clamped to [min, max] (the clamp moves the mean; see mean())
      return clamp_len(std::exp(mu + sigma * std_normal(rng)), min, max);
    case Kind::Empirical:
      if (samples.empty()) return 1;
      return std::max<int64_t>(1, samples[size_t(uniform01(rng) * double(samples.size()))]);
  }
  return 1;
}

double LengthDist::mean() const {
  switch (kind) {
    case Kind::Fixed:
      return std::max(1.0, std::round(value));
    case Kind::Uniform:
      return 0.5 * (std::ceil(min) + std::floor(max));
    case Kind::Lognormal: {
      // Mean of min(max(X, a), b) for X lognormal(mu, sigma), in closed form (rounding ignored).
      double a = std::max(1.0, min);
      double b = max > 0 ? max : INFINITY;
      double la = (std::log(a) - mu) / sigma;
      double lb = std::isinf(b) ? INFINITY : (std::log(b) - mu) / sigma;
      double inner = std::exp(mu + 0.5 * sigma * sigma) * (normal_cdf(lb - sigma) - normal_cdf(la - sigma));
      double upper = std::isinf(b) ? 0.0 : b * (1.0 - normal_cdf(lb));
      return a * normal_cdf(la) + inner + upper;
    }
    case Kind::Empirical: {
      if (samples.empty()) return 1;
      double s = 0;
      for (int64_t v : samples) s += double(v);
      return s / double(samples.size());
    }
  }
  return 1;
}

// The most tokens `d` can draw, and whether that is a hard bound (a lognormal without max is
// not clamped above: exp(mu + 4 sigma) is only its 99.997th percentile).
static int64_t dist_upper(const LengthDist& d, bool* exact = nullptr) {
  if (exact) *exact = true;
  switch (d.kind) {
    case LengthDist::Kind::Fixed: return std::max<int64_t>(1, std::llround(d.value));
    case LengthDist::Kind::Uniform: return int64_t(std::floor(d.max));
    case LengthDist::Kind::Lognormal:
      if (d.max > 0) return int64_t(d.max);
      if (exact) *exact = false;
      return int64_t(std::ceil(std::exp(d.mu + 4 * d.sigma)));
    case LengthDist::Kind::Empirical:
      return d.samples.empty() ? 1 : std::max<int64_t>(1, *std::max_element(d.samples.begin(), d.samples.end()));
  }
  return 1;
}

WorkloadStream::WorkloadStream(const Workload& w, int64_t rows, int64_t total, bool drop)
    : w_(&w),
      arrivals_(stream_seed(w.seed, 0)),
      prompts_(stream_seed(w.seed, 1)),
      outputs_(stream_seed(w.seed, 2)),
      sessions_(stream_seed(w.seed, 3)),
      rows_(rows),
      total_(total),
      drop_(drop) {}

bool WorkloadStream::raw(Request& r) {
  if (i_ >= rows_) return false;
  const Workload& w = *w_;
  const size_t i = size_t(i_);
  r.id = i_++;
  if (w.arrival == Workload::Arrival::Poisson) {
    t_ += -std::log(1.0 - uniform01(arrivals_)) / w.rate_rps;  // exponential gap, mean 1/rate
    r.arrival_s = t_;
  } else {
    r.arrival_s = w.trace_arrivals_s[i] - w.trace_arrivals_s.front();  // traces start at 0
  }
  r.prompt_tokens = w.prompt.replay && i < w.prompt.samples.size() ? w.prompt.samples[i] : w.prompt.sample(prompts_);
  r.output_tokens = w.output.replay && i < w.output.samples.size() ? w.output.samples[i] : w.output.sample(outputs_);
  r.session = w.sessions > 0 ? int64_t(sessions_() % uint64_t(w.sessions)) : -1;
  return true;
}

bool WorkloadStream::next(Request& r) {
  while (raw(r)) {
    if (drop_ && r.prompt_tokens > w_->model_context) continue;  // as engines refuse them
    r.id = emitted_++;  // the survivors numbered 0..n-1
    return true;
  }
  return false;
}

RequestSource::RequestSource(const Workload& w) : w_(&w) {
  rows_ = std::max<int64_t>(w.num_requests, 0);
  if (w.arrival == Workload::Arrival::Trace) rows_ = std::min<int64_t>(rows_, int64_t(w.trace_arrivals_s.size()));
  total_ = rows_;
  bool exact = false;
  if (w.model_context <= 0 || (dist_upper(w.prompt, &exact) <= w.model_context && exact)) return;
  // Some prompt may be over the context: one pass to count them (time, not memory).
  int64_t over = 0, longest = 0;
  WorkloadStream s(w, rows_, rows_, false);
  for (Request r; s.next(r);)
    if (r.prompt_tokens > w.model_context) {
      ++over;
      longest = std::max(longest, r.prompt_tokens);
    }
  if (over == 0) return;
  if (!w.drop_over_context)
    throw InputError(w.source_file, "prompt_tokens",
                     std::to_string(over) + " of " + std::to_string(rows_) +
                         " requests have prompts longer than the context of " + w.model_name + " (" +
                         std::to_string(w.model_context) + " tokens; the longest has " + std::to_string(longest) +
                         "); shorten them, or pass --drop-over-context to drop them as serving engines refuse them");
  if (over == rows_)
    throw InputError(w.source_file, "prompt_tokens", "every request's prompt is longer than the context of " +
                                                         w.model_name + " (" + std::to_string(w.model_context) +
                                                         " tokens): nothing is left to simulate");
  drop_ = true;
  dropped_ = over;
  total_ = rows_ - over;
}

std::vector<Request> RequestSource::all() const {
  std::vector<Request> out;
  out.reserve(size_t(total_));
  WorkloadStream s = stream();
  for (Request r; s.next(r);) out.push_back(r);
  return out;
}

std::vector<Request> Workload::generate() const { return RequestSource(*this).all(); }

int64_t Workload::max_context() const {
  int64_t p = dist_upper(prompt);
  if (model_context > 0 && drop_over_context) p = std::min(p, model_context);  // longer ones are dropped
  return p + dist_upper(output);
}

}  // namespace peerplan
