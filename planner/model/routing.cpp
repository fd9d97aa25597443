// The host side of MoE routing: specs, their CDF, per-expert counts (cached), summaries, parsing.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "planner/model/routing.hpp"
#include "planner/model/routing_model.hpp"

namespace peerplan::routing {

namespace {

constexpr FileKind kPopularityFile{"expert popularity", 16 * file_kind::kMiB};
constexpr int64_t kStride = 64;       // tokens between cached count checkpoints
constexpr int64_t kMaxExperts = 1 << 16;
constexpr int64_t kMaxTokens = int64_t(1) << 26;
constexpr double kMaxZipf = 10;

std::string fmt_s(double s) { return fmt::format("{:g}", s); }

uint64_t spec_hash(const RoutingSpec& s) {
  uint64_t h = mix64(s.seed ^ (uint64_t(s.skew) << 56));
  uint64_t bits;
  std::memcpy(&bits, &s.zipf_s, sizeof bits);
  h = mix64(h ^ bits);
  for (double w : s.popularity) {
    std::memcpy(&bits, &w, sizeof bits);
    h = mix64(h ^ bits);
  }
  return h;
}

// Zipf ranks scattered over the expert ids: hot experts of trained models are not the first ids,
// and ranking by id would put every hot expert on EP rank 0.
std::vector<double> zipf_weights(double s, int64_t experts, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [seed](int64_t a, int64_t b) {
    const uint64_t ha = mix64(seed ^ mix64(uint64_t(a) + 0x5A17u)), hb = mix64(seed ^ mix64(uint64_t(b) + 0x5A17u));
    return ha != hb ? ha < hb : a < b;
  });
  std::vector<double> w(static_cast<size_t>(experts));
  for (int64_t r = 0; r < experts; ++r) w[size_t(order[size_t(r)])] = 1.0 / std::pow(double(r + 1), s);
  return w;
}

struct LayerRoute {
  std::vector<float> cdf;
  int64_t experts = 0, k = 0;
  std::vector<std::vector<int32_t>> ckpt;  // ckpt[i]: counts of tokens 0 .. i*kStride-1
};

struct Cache {
  std::map<std::tuple<uint64_t, int64_t, int64_t, int>, LayerRoute> layers;
  std::unordered_map<uint64_t, std::vector<int32_t>> counts;  // (layer route, tokens) -> counts
  size_t count_ints = 0;
};

void add_tokens(const LayerRoute& lr, uint64_t seed, int layer, int64_t from, int64_t to, std::vector<int32_t>& c) {
  int out[64];
  const float* cdf = lr.cdf.empty() ? nullptr : lr.cdf.data();
  for (int64_t t = from; t < to; ++t) {
    route_token(seed, layer, t, int(lr.experts), int(lr.k), cdf, out);
    for (int64_t i = 0; i < lr.k; ++i) ++c[size_t(out[i])];
  }
}

}  // namespace

std::string RoutingSpec::label() const {
  switch (skew) {
    case Skew::Uniform: return "uniform";
    case Skew::Zipf: return "zipf:" + fmt_s(zipf_s);
    case Skew::Popularity:
      return "popularity:" + (popularity_file.empty() ? std::string("inline") : popularity_file);
  }
  return "?";
}

std::vector<float> routing_cdf(const RoutingSpec& spec, int64_t experts) {
  if (spec.skew == Skew::Uniform || experts <= 0) return {};
  std::vector<double> w;
  if (spec.skew == Skew::Zipf) {
    w = zipf_weights(spec.zipf_s, experts, spec.seed);
  } else {
    check_routing_for_model(spec, experts, "");
    w = spec.popularity;
  }
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<float> cdf(static_cast<size_t>(experts));
  double acc = 0;
  for (int64_t e = 0; e < experts; ++e) {
    acc += w[size_t(e)];
    cdf[size_t(e)] = std::min(1.0f, float(acc / total));
  }
  cdf.back() = 1.0f;  // route_token's search relies on it
  return cdf;
}

const std::vector<int32_t>& expert_counts(const RoutingSpec& spec, int64_t experts, int64_t k, int64_t tokens,
                                          int layer) {
  if (experts <= 0 || experts > kMaxExperts || k <= 0 || k > experts || k > 64 || tokens < 0 || tokens > kMaxTokens)
    throw RuntimeError(fmt::format("expert_counts: {} experts, top-{}, {} tokens out of range", experts, k, tokens));
  thread_local Cache cache;
  const uint64_t sh = spec_hash(spec);
  LayerRoute& lr = cache.layers[{sh, experts, k, layer}];
  if (lr.ckpt.empty()) {
    lr.cdf = routing_cdf(spec, experts);
    lr.experts = experts, lr.k = k;
    lr.ckpt.emplace_back(size_t(experts), 0);
  }
  const uint64_t key = mix64(sh ^ mix64(uint64_t(experts) << 8 ^ uint64_t(k))) ^ mix64(uint64_t(layer) << 32 ^ uint64_t(tokens));
  if (auto it = cache.counts.find(key); it != cache.counts.end()) return it->second;
  // Extend the checkpoints up to the last whole stride below `tokens`, then route the rest.
  const size_t want = size_t(tokens / kStride);
  while (lr.ckpt.size() <= want) {
    std::vector<int32_t> next = lr.ckpt.back();
    const int64_t from = int64_t(lr.ckpt.size() - 1) * kStride;
    add_tokens(lr, spec.seed, layer, from, from + kStride, next);
    lr.ckpt.push_back(std::move(next));
  }
  std::vector<int32_t> c = lr.ckpt[want];
  add_tokens(lr, spec.seed, layer, int64_t(want) * kStride, tokens, c);
  if (cache.count_ints > (size_t(16) << 20)) {  // bound the memo (64 MB per thread)
    cache.counts.clear();
    cache.count_ints = 0;
  }
  cache.count_ints += c.size();
  return cache.counts.emplace(key, std::move(c)).first->second;
}

GroupLoad group_load(const std::vector<int32_t>& counts, int64_t first, int64_t count) {
  GroupLoad g;
  const int64_t end = std::min<int64_t>(first + count, int64_t(counts.size()));
  for (int64_t e = std::max<int64_t>(first, 0); e < end; ++e) {
    const int64_t c = counts[size_t(e)];
    g.rows += c;
    g.touched += c > 0;
    g.max_rows = std::max(g.max_rows, c);
  }
  return g;
}

double expected_touched_uniform(int64_t experts, int64_t k, int64_t batch) {
  if (experts <= 0) return 0;
  return double(experts) * (1.0 - std::pow(1.0 - double(k) / double(experts), double(batch)));
}

RoutingSummary summarize(const RoutingSpec& spec, int64_t experts, int64_t k, int64_t batch,
                         const std::vector<int>& layers) {
  RoutingSummary s;
  s.label = spec.label();
  s.seed = spec.seed;
  s.experts = experts, s.k = k, s.batch = std::max<int64_t>(batch, 1);
  s.touched_uniform = expected_touched_uniform(experts, k, s.batch);
  if (experts <= 0 || k <= 0 || layers.empty()) return s;
  for (int l : layers) {
    const GroupLoad g = group_load(expert_counts(spec, experts, k, s.batch, l), 0, experts);
    s.touched += double(g.touched);
    s.busiest_share += double(g.max_rows) / double(s.batch * k);
  }
  s.touched /= double(layers.size());
  s.busiest_share /= double(layers.size());
  return s;
}

nlohmann::json summary_json(const RoutingSummary& s) {
  return {{"skew", s.label},
          {"seed", s.seed},
          {"experts", s.experts},
          {"top_k", s.k},
          {"decode_batch", s.batch},
          {"touched_experts_per_step", std::round(s.touched * 100) / 100},
          {"touched_experts_uniform", std::round(s.touched_uniform * 100) / 100},
          {"busiest_expert_share", std::round(s.busiest_share * 10000) / 10000}};
}

std::string summary_text(const nlohmann::json& s) {
  return fmt::format("{} (seed {}): {:.1f} of {} experts touched per layer and decode step at batch {} (uniform: "
                     "{:.1f}), busiest expert {:.1f}% of routed rows",
                     s.value("skew", std::string("?")), s.value("seed", uint64_t(0)),
                     s.value("touched_experts_per_step", 0.0), s.value("experts", int64_t(0)),
                     s.value("decode_batch", int64_t(0)), s.value("touched_experts_uniform", 0.0),
                     100 * s.value("busiest_expert_share", 0.0));
}

std::vector<double> load_popularity_file(const std::string& path) {
  const nlohmann::json root = load_json_file(path, kPopularityFile);
  JsonIn in(root, path);
  std::optional<JsonIn> arr;
  if (in.is_array()) arr = in;
  else if (in.is_object() && in.has("popularity")) arr = in.array("popularity");
  else in.fail("", "a JSON array of non-negative weights, one per routed expert, or {\"popularity\": [...]}");
  std::vector<double> w;
  double total = 0;
  for (size_t i = 0; i < arr->size(); ++i) {
    const double v = (*arr)[i].as_num();
    if (!(v >= 0) || !std::isfinite(v)) (*arr)[i].fail("", fmt::format("a finite non-negative weight, got {}", v));
    w.push_back(v);
    total += v;
  }
  if (w.empty() || !(total > 0)) arr->fail("", "at least one positive weight (one weight per routed expert)");
  return w;
}

RoutingSpec parse_routing_json(const JsonIn& j, const std::string& base_file) {
  if (!j.is_object())
    j.fail("", "an object such as {\"skew\": \"uniform\"}, {\"skew\": \"zipf\", \"exponent\": 1.2} or "
               "{\"skew\": \"popularity\", \"weights\": [...]} (optional \"seed\")");
  for (const auto& [key, v] : j.raw().items()) {
    (void)v;
    if (key != "skew" && key != "exponent" && key != "weights" && key != "file" && key != "seed")
      j.fail(key, "unknown field; expected one of: skew, exponent, weights, file, seed");
  }
  RoutingSpec s;
  s.origin = base_file;
  const std::string skew = j.str_or("skew", "uniform");
  if (j.has("seed")) s.seed = uint64_t(j.nonnegative_int("seed"));
  auto only = [&](std::initializer_list<const char*> allowed) {
    for (const char* key : {"exponent", "weights", "file"}) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || std::strcmp(a, key) == 0;
      if (!ok && j.has(key)) j.fail(key, fmt::format("no '{}' with skew \"{}\"", key, skew));
    }
  };
  if (skew == "uniform") {
    only({});
  } else if (skew == "zipf") {
    only({"exponent"});
    s.skew = Skew::Zipf;
    s.zipf_s = j.positive("exponent");
    if (s.zipf_s > kMaxZipf) j.fail("exponent", fmt::format("a Zipf exponent in (0, {:g}], got {:g}", kMaxZipf, s.zipf_s));
  } else if (skew == "popularity") {
    only({"weights", "file"});
    s.skew = Skew::Popularity;
    if (j.has("weights") == j.has("file")) j.fail("weights", "either \"weights\" (one per routed expert) or \"file\"");
    if (j.has("file")) {
      std::filesystem::path p = j.str("file");
      if (p.is_relative() && !base_file.empty()) p = std::filesystem::path(base_file).parent_path() / p;
      s.popularity_file = p.string();
      s.popularity = load_popularity_file(s.popularity_file);
    } else {
      JsonIn arr = j.array("weights");
      double total = 0;
      for (size_t i = 0; i < arr.size(); ++i) {
        const double v = arr[i].as_num();
        if (!(v >= 0)) arr[i].fail("", fmt::format("a non-negative weight, got {}", v));
        s.popularity.push_back(v);
        total += v;
      }
      if (!(total > 0)) j.fail("weights", "at least one positive weight (one per routed expert)");
    }
  } else {
    j.fail("skew", "\"uniform\", \"zipf\" (with exponent) or \"popularity\" (with weights or file), got \"" + skew + "\"");
  }
  return s;
}

RoutingSpec parse_routing_arg(const std::string& arg) {
  const std::string kForm = "uniform, zipf:S (S in (0, 10]) or popularity:FILE.json, optionally followed by ,seed=N";
  RoutingSpec s;
  s.origin = "--moe-routing";
  std::string body = arg;
  if (auto c = arg.find(",seed="); c != std::string::npos) {
    const std::string n = arg.substr(c + 6);
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || errno == ERANGE || n[0] == '-')
      throw InputError("", "--moe-routing", fmt::format("a seed as a whole number after ',seed=', got '{}'", n));
    s.seed = v;
    body = arg.substr(0, c);
  }
  if (body == "uniform") return s;
  if (body.rfind("zipf:", 0) == 0) {
    const std::string v = body.substr(5);
    char* end = nullptr;
    errno = 0;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x) || !(x > 0) || x > kMaxZipf)
      throw InputError("", "--moe-routing", fmt::format("a Zipf exponent in (0, {:g}] after 'zipf:', got '{}'", kMaxZipf, v));
    s.skew = Skew::Zipf;
    s.zipf_s = x;
    return s;
  }
  if (body.rfind("popularity:", 0) == 0 && body.size() > 11) {
    s.skew = Skew::Popularity;
    s.popularity_file = body.substr(11);
    s.popularity = load_popularity_file(s.popularity_file);
    return s;
  }
  throw InputError("", "--moe-routing", fmt::format("{}; got '{}'", kForm, arg));
}

nlohmann::json routing_to_json(const RoutingSpec& s) {
  nlohmann::json j{{"skew", s.skew == Skew::Uniform ? "uniform" : s.skew == Skew::Zipf ? "zipf" : "popularity"},
                   {"seed", s.seed}};
  if (s.skew == Skew::Zipf) j["exponent"] = s.zipf_s;
  if (s.skew == Skew::Popularity) j["weights"] = s.popularity;
  return j;
}

void check_routing_for_model(const RoutingSpec& spec, int64_t experts, const std::string& model) {
  if (spec.skew != Skew::Popularity || experts <= 0) return;
  if (int64_t(spec.popularity.size()) != experts) {
    const std::string file = !spec.popularity_file.empty() ? spec.popularity_file
                             : spec.origin == "--moe-routing" ? std::string() : spec.origin;
    const std::string field = !spec.popularity_file.empty() ? "" : spec.origin == "--moe-routing" ? "--moe-routing"
                                                                                                   : "moe_routing/weights";
    throw InputError(file, field,
                     fmt::format("one popularity weight per routed expert{}: {} weights, got {}",
                                 model.empty() ? std::string() : " of " + model, experts, spec.popularity.size()));
  }
}

}  // namespace peerplan::routing
