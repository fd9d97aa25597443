#include "planner/topology/measurements.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "planner/core/dtype.hpp"
#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "planner/core/suggest.hpp"
#include "planner/topology/collective.hpp"
#include "planner/topology/machine_check.hpp"

namespace peerplan {

SampleStats compute_stats(std::vector<double> s) {
  SampleStats r;
  r.n = int(s.size());
  if (s.empty()) return r;
  std::sort(s.begin(), s.end());
  auto pct = [&](double p) {
    double pos = p * double(s.size() - 1);
    size_t lo = size_t(std::floor(pos));
    size_t hi = std::min(lo + 1, s.size() - 1);
    double f = pos - double(lo);
    return s[lo] + (s[hi] - s[lo]) * f;
  };
  r.min = s.front();
  r.max = s.back();
  r.p10 = pct(0.10);
  r.median = pct(0.50);
  r.p90 = pct(0.90);
  r.p99 = pct(0.99);
  double sum = 0;
  for (double v : s) sum += v;
  r.mean = sum / double(s.size());
  return r;
}

namespace {

// Stats are stored in microseconds in JSON: easier to read next to nvbandwidth/nccl-tests output.
// Seconds -> microseconds rounded to 1 ps: the s <-> us conversion otherwise drifts in the last
// bits (49.999999999999986), and a profile must round-trip through JSON unchanged.
double us(double seconds) { return std::round(seconds * 1e12) / 1e6; }

nlohmann::json stats_json(const SampleStats& s) {
  nlohmann::json j = {{"n", s.n},
          {"min_us", us(s.min)},
          {"p10_us", us(s.p10)},
          {"median_us", us(s.median)},
          {"p90_us", us(s.p90)},
          {"p99_us", us(s.p99)},
          {"max_us", us(s.max)},
          {"mean_us", us(s.mean)}};
  if (s.sm_mhz > 0) j["sm_mhz"] = s.sm_mhz;
  return j;
}

SampleStats parse_stats(const JsonIn& j) {
  SampleStats s;
  s.n = int(j.positive_int("n"));
  s.min = j.positive("min_us") * 1e-6;
  s.p10 = j.positive("p10_us") * 1e-6;
  s.median = j.positive("median_us") * 1e-6;
  s.p90 = j.positive("p90_us") * 1e-6;
  s.p99 = j.positive("p99_us") * 1e-6;
  s.max = j.positive("max_us") * 1e-6;
  s.mean = j.positive_or("mean_us", s.median * 1e6) * 1e-6;
  if (j.has("sm_mhz")) s.sm_mhz = j.positive("sm_mhz");  // optional: compute tables since session 14
  if (!(s.min <= s.median && s.median <= s.max)) j.fail("median_us", "expected min_us <= median_us <= max_us");
  if (!(s.max * 1e6 <= kMaxLatencyUs * 1e3))
    j.fail("max_us", fmt::format("a sample time of at most {:g} us (the ceiling), got {:g}", kMaxLatencyUs * 1e3, s.max * 1e6));
  return s;
}

nlohmann::json points_json(const std::vector<CurvePoint>& pts) {
  auto a = nlohmann::json::array();
  for (const auto& p : pts) {
    auto o = stats_json(p.time);
    o["bytes"] = p.bytes;
    // Convenience figure for humans and plots: GB/s at the median.
    o["gbps_median"] = p.time.median > 0 ? double(p.bytes) / (us(p.time.median) * 1e-6) / 1e9 : 0.0;
    a.push_back(o);
  }
  return a;
}

// A curve's points: sizes ascending, each point's bandwidth (bytes / median) below the ceiling,
// and the top of the curve (the last four points, from which larger transfers are extrapolated)
// taking longer as sizes grow. Small sizes may be noisy (a measured host-staged curve is faster
// at 16 KiB than at 8 KiB), but a top that gets faster or stays flat would be read as an
// unbounded bandwidth (a decreasing curve came out as 1e9 GB/s "measured").
std::vector<CurvePoint> parse_points(const JsonIn& arr) {
  std::vector<CurvePoint> pts;
  for (size_t i = 0; i < arr.size(); ++i) {
    JsonIn p = arr[i];
    CurvePoint c;
    c.bytes = p.positive_int("bytes");
    if (c.bytes > kMaxMemoryBytes)
      p.fail("bytes", fmt::format("a size of at most {} bytes (1 PiB, the ceiling), got {}", kMaxMemoryBytes, c.bytes));
    c.time = parse_stats(p);
    if (!pts.empty() && c.bytes <= pts.back().bytes) p.fail("bytes", "expected sizes in strictly ascending order");
    double gbps = double(c.bytes) / c.time.median / 1e9;
    if (!(gbps <= kMaxBandwidthGbps))
      p.fail("median_us", fmt::format("a time giving at most {:g} GB/s (the ceiling) for {} bytes, got {:g} us = {:g} GB/s",
                                      kMaxBandwidthGbps, c.bytes, c.time.median * 1e6, gbps));
    pts.push_back(c);
  }
  size_t top = pts.size() >= 4 ? pts.size() - 4 : 0;
  for (size_t i = top + 1; i < pts.size(); ++i)
    if (pts[i].time.median < pts[i - 1].time.median)
      arr[i].fail("median_us", fmt::format("a time that grows with size at the top of the curve (used to extrapolate larger "
                                           "transfers): {} bytes take {:g} us, less than {} bytes ({:g} us)",
                                           pts[i].bytes, pts[i].time.median * 1e6, pts[i - 1].bytes,
                                           pts[i - 1].time.median * 1e6));
  if (pts.size() >= 2 && !(pts.back().time.median > pts[top].time.median))
    arr[pts.size() - 1].fail("median_us", fmt::format("a time above the {} bytes point's {:g} us: a curve whose top is flat "
                                                      "would extrapolate to unbounded bandwidth",
                                                      pts[top].bytes, pts[top].time.median * 1e6));
  return pts;
}

const std::vector<std::string> kTransferModes = {"p2p_ce",        "p2p_ce_bidir", "p2p_sm_read", "p2p_sm_write",
                                                 "nop2p_runtime", "host_staged",  "h2d",         "d2h",
                                                 "d2d",           "net_nccl"};
const std::vector<std::string> kLatencyKinds = {"ce_small", "sm_pingpong", "sm_pointer_chase"};

std::string known_name(const JsonIn& t, const std::string& key, const std::vector<std::string>& valid) {
  std::string v = t.str(key);
  if (std::find(valid.begin(), valid.end(), v) == valid.end())
    t.fail(key, one_of_with_suggestion(v, valid) + "; got \"" + v + "\"");
  return v;
}

std::vector<std::string> collective_names() {
  std::vector<std::string> v;
  for (CollOp op : all_coll_ops()) v.push_back(coll_op_name(op));
  return v;
}

std::vector<int> parse_gpu_list(const JsonIn& arr) {
  std::vector<int> v;
  for (size_t i = 0; i < arr.size(); ++i) {
    int64_t g = arr[i].as_integer();
    if (g < 0) arr[i].fail("", "expected a GPU id >= 0");
    v.push_back(int(g));
  }
  return v;
}

// A throttle's mixes: ascending attention shares in [0, 1], each class's factor in [1, 4].
std::vector<ThrottleMix> read_mixes(const JsonIn& mixes) {
  std::vector<ThrottleMix> out;
  double prev = -1;
  for (size_t i = 0; i < mixes.size(); ++i) {
    const JsonIn x = mixes[i];
    ThrottleMix c;
    c.attention_share = x.nonnegative("attention_share");
    if (c.attention_share > 1 || c.attention_share <= prev)
      x.fail("attention_share", fmt::format("in [0, 1], ascending along mixes (previous {:g}), got {:g}", prev,
                                            c.attention_share));
    prev = c.attention_share;
    for (auto [key, v] : {std::pair{"gemm", &c.gemm}, {"attention", &c.attention}, {"elementwise", &c.elementwise}}) {
      *v = x.positive(key);
      if (*v < 1 || *v > 4) x.fail(key, fmt::format("sustained / boost time in [1, 4], got {:g}", *v));
    }
    out.push_back(c);
  }
  return out;
}

nlohmann::json mixes_to_json(const std::vector<ThrottleMix>& mixes) {
  nlohmann::json a = nlohmann::json::array();
  for (const ThrottleMix& c : mixes)
    a.push_back({{"attention_share", std::round(c.attention_share * 1e4) / 1e4}, {"gemm", c.gemm},
                 {"attention", c.attention}, {"elementwise", c.elementwise}});
  return a;
}

}  // namespace

const TransferCurve* Measurements::find_transfer(int src, int dst, const std::string& mode,
                                                 const std::string& variant) const {
  for (const auto& t : transfers)
    if (t.src == src && t.dst == dst && t.mode == mode && (variant.empty() || t.variant == variant)) return &t;
  return nullptr;
}

const CollectiveCurve* Measurements::find_collective(const std::string& op, const std::vector<int>& gpus,
                                                     bool p2p, bool graph) const {
  std::vector<int> want = gpus;
  std::sort(want.begin(), want.end());
  for (const auto& c : collectives) {
    if (c.op != op || c.p2p != p2p || c.graph != graph) continue;
    std::vector<int> have = c.gpus;
    std::sort(have.begin(), have.end());
    if (have == want) return &c;
  }
  return nullptr;
}

const PeerAllReduceCurve* Measurements::find_peer_allreduce(const std::string& algo, const std::vector<int>& gpus,
                                                            bool graph) const {
  std::vector<int> want = gpus;
  std::sort(want.begin(), want.end());
  for (const auto& c : peer_allreduce) {
    if (c.algo != algo || c.graph != graph) continue;
    std::vector<int> have = c.gpus;
    std::sort(have.begin(), have.end());
    if (have == want) return &c;
  }
  return nullptr;
}

namespace {

// A grouped row's path as the profile names it: true for the cuBLAS-per-expert path, false for the
// grouped kernel (`def` when the key is absent); any other name fails naming the field.
bool read_grouped_path(const JsonIn& t, const std::string& key, const std::string& def) {
  const std::string path = t.str_or(key, def);
  if (path != "grouped" && path != "cublas_per_expert")
    t.fail(key, "\"grouped\" or \"cublas_per_expert\" (the executor's path the row was timed on), got '" + path + "'");
  return path == "cublas_per_expert";
}

// The grouped rows' dispatch as profiles of sessions 13-25 record it, beside the rows: the threshold
// in force and, for each eager row, the path it ran (extra.grouped_gemm.dispatch, written by
// profiler/measure/grouped_gemm.cpp). Rows that carry their own "path" keep it.
void read_grouped_dispatch(const JsonIn& extra, Measurements& m) {
  auto gg = extra.opt("grouped_gemm");
  if (!gg || !gg->raw().is_object()) return;
  auto d = gg->opt("dispatch");
  if (!d || !d->raw().is_object()) return;
  if (d->has("min_gflop")) m.grouped_cublas_min_gflop = d->nonnegative("min_gflop");
  auto paths = d->opt("paths");
  if (!paths) return;
  if (!paths->raw().is_array()) d->fail("paths", "an array of the eager grouped rows' paths");
  const int64_t gpu = gg->nonnegative_int_or("gpu", 0);
  for (size_t i = 0; i < paths->size(); ++i) {
    JsonIn p = (*paths)[i];
    if (!read_grouped_path(p, "path", "")) continue;
    const int64_t n = p.positive_int("n"), k = p.positive_int("k"), experts = p.positive_int("experts"),
                  tokens = p.positive_int("tokens"), rows = p.positive_int("rows"), touched = p.positive_int("touched"),
                  max_rows = p.positive_int("max_rows");
    const std::string dtype = p.str_or("dtype", "bf16");
    for (GroupedGemmTime& g : m.grouped_gemms)
      if (g.gpu == gpu && g.n == n && g.k == k && g.experts == experts && g.tokens == tokens && g.rows == rows &&
          g.touched == touched && g.max_rows == max_rows && g.dtype == dtype)
        g.cublas = true;
  }
}

const std::vector<std::string> kExpertFormats = {"bf16", "fp8", "int8", "int4", "mxfp4"};

// A cuBLAS-path grouped row's rows per touched expert: one positive count per touched expert, summing
// to its rows, the largest its max_rows (the routing they come from gives all three).
std::vector<int64_t> read_expert_rows(const JsonIn& t, const GroupedGemmTime& g) {
  const JsonIn a = t.array("expert_rows");
  std::vector<int64_t> out;
  int64_t sum = 0, top = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t r = a[i].as_integer();
    if (r < 1) a[i].fail("", fmt::format("a positive row count of a touched expert, got {}", r));
    out.push_back(r);
    sum += r, top = std::max(top, r);
  }
  if (int64_t(out.size()) != g.touched || sum != g.rows || top != g.max_rows)
    t.fail("expert_rows", fmt::format("one row count per touched expert ({}) summing to rows ({}), the largest max_rows "
                                      "({}); got {} counts summing to {}, the largest {}",
                                      g.touched, g.rows, g.max_rows, out.size(), sum, top));
  return out;
}

}  // namespace

Measurements parse_measurements(const JsonIn& j) {
  Measurements m;
  if (auto meta = j.opt("meta")) m.meta = meta->raw();
  if (auto a = j.opt("transfers")) {
    for (size_t i = 0; i < a->size(); ++i) {
      JsonIn t = (*a)[i];
      TransferCurve c;
      c.src = int(t.integer("src"));
      c.dst = int(t.integer("dst"));
      c.mode = known_name(t, "mode", kTransferModes);
      c.variant = t.str_or("variant", "");
      c.points = parse_points(t.array("points"));
      m.transfers.push_back(std::move(c));
    }
  }
  if (auto a = j.opt("latencies")) {
    for (size_t i = 0; i < a->size(); ++i) {
      JsonIn t = (*a)[i];
      LatencyPoint l;
      l.src = int(t.integer("src"));
      l.dst = int(t.integer("dst"));
      l.kind = known_name(t, "kind", kLatencyKinds);
      l.time = parse_stats(t);
      m.latencies.push_back(l);
    }
  }
  if (auto a = j.opt("collectives")) {
    for (size_t i = 0; i < a->size(); ++i) {
      JsonIn t = (*a)[i];
      CollectiveCurve c;
      c.op = known_name(t, "op", collective_names());
      c.gpus = parse_gpu_list(t.array("gpus"));
      if (c.gpus.empty()) t.fail("gpus", "expected at least one GPU");
      c.p2p = t.boolean_or("p2p", true);
      c.graph = t.boolean_or("graph", false);
      c.points = parse_points(t.array("points"));
      m.collectives.push_back(std::move(c));
    }
  }
  if (auto a = j.opt("peer_allreduce")) {
    if (!a->is_array()) j.fail("peer_allreduce", "an array of peer-memory all-reduce curves (docs/schema.md)");
    for (size_t i = 0; i < a->size(); ++i) {
      JsonIn t = (*a)[i];
      PeerAllReduceCurve c;
      c.algo = known_name(t, "algo", kPeerAllReduceAlgos);
      c.gpus = parse_gpu_list(t.array("gpus"));
      if (c.gpus.size() < 2) t.fail("gpus", "at least two GPUs (an all-reduce over peers)");
      c.graph = t.boolean_or("graph", false);
      c.points = parse_points(t.array("points"));
      m.peer_allreduce.push_back(std::move(c));
    }
  }
  if (auto a = j.opt("gemms")) {
    for (size_t i = 0; i < a->size(); ++i) {
      JsonIn t = (*a)[i];
      GemmTime g;
      g.gpu = int(t.nonnegative_int("gpu"));
      g.m = t.positive_int("m");
      g.n = t.positive_int("n");
      g.k = t.positive_int("k");
      g.dtype = t.str_or("dtype", "bf16");
      if (t.has("batch")) g.batch = t.positive_int("batch");  // optional: profiles before MLA have none
      g.time = parse_stats(t);
      m.gemms.push_back(g);
    }
  }
  if (auto a = j.opt("attention")) {
    for (size_t i = 0; i < a->size(); ++i) {
      JsonIn t = (*a)[i];
      AttentionTime g;
      g.gpu = int(t.nonnegative_int("gpu"));
      g.phase = t.str("phase");
      if (g.phase != "prefill" && g.phase != "decode") t.fail("phase", "expected \"prefill\" or \"decode\"");
      g.batch = t.positive_int("batch");
      g.q_len = t.positive_int("q_len");
      g.context = t.positive_int("context");
      g.heads = t.positive_int("heads");
      g.kv_heads = t.positive_int("kv_heads");
      g.head_dim = t.positive_int("head_dim");
      g.kv_dtype = t.str_or("kv_dtype", "bf16");
      if (g.kv_dtype != "bf16" && g.kv_dtype != "fp8") t.fail("kv_dtype", "\"bf16\" or \"fp8\", got '" + g.kv_dtype + "'");
      g.v_dim = t.has("v_dim") ? t.positive_int("v_dim") : g.head_dim;  // optional: absent means head_dim
      g.time = parse_stats(t);
      m.attention.push_back(g);
    }
  }
  if (auto a = j.opt("grouped_gemms")) {
    if (!a->is_array()) j.fail("grouped_gemms", "an array of grouped expert GEMM timings (docs/schema.md)");
    for (size_t i = 0; i < a->size(); ++i) {
      JsonIn t = (*a)[i];
      GroupedGemmTime g;
      g.gpu = int(t.nonnegative_int("gpu"));
      g.n = t.positive_int("n");
      g.k = t.positive_int("k");
      g.experts = t.positive_int("experts");
      g.topk = t.positive_int("topk");
      g.tokens = t.positive_int("tokens");
      g.rows = t.positive_int("rows");
      g.touched = t.positive_int("touched");
      g.max_rows = t.positive_int("max_rows");
      g.dtype = t.str_or("dtype", "bf16");
      if (g.touched > g.experts) t.fail("touched", fmt::format("at most experts ({}), got {}", g.experts, g.touched));
      if (g.rows < g.touched || g.rows > g.tokens * g.topk)
        t.fail("rows", fmt::format("between touched ({}) and tokens x topk ({}), got {}", g.touched, g.tokens * g.topk, g.rows));
      if (g.max_rows * g.touched < g.rows || g.max_rows > g.rows)
        t.fail("max_rows", fmt::format("between rows / touched and rows ({}), got {}", g.rows, g.max_rows));
      g.cublas = read_grouped_path(t, "path", "grouped");
      if (t.has("expert_rows")) g.expert_rows = read_expert_rows(t, g);  // optional: profiles from session 29
      g.time = parse_stats(t);
      m.grouped_gemms.push_back(g);
    }
  }
  if (auto a = j.opt("expert_gemms")) {
    if (!a->is_array()) j.fail("expert_gemms", "an array of one expert's cuBLAS GEMM timings (docs/schema.md)");
    for (size_t i = 0; i < a->size(); ++i) {
      JsonIn t = (*a)[i];
      ExpertGemmTime e;
      e.gpu = int(t.nonnegative_int("gpu"));
      e.n = t.positive_int("n");
      e.k = t.positive_int("k");
      e.rows = t.positive_int("rows");
      e.dtype = t.str_or("dtype", "bf16");
      if (std::find(kExpertFormats.begin(), kExpertFormats.end(), e.dtype) == kExpertFormats.end())
        t.fail("dtype", "one of bf16, fp8, int8, int4, mxfp4 (the executor's expert formats), got '" + e.dtype + "'");
      e.time = parse_stats(t);
      m.expert_gemms.push_back(e);
    }
  }
  if (auto a = j.opt("elementwise")) {
    if (!a->is_array()) j.fail("elementwise", "an array of elementwise kernel timings (docs/schema.md)");
    for (size_t i = 0; i < a->size(); ++i) {
      JsonIn t = (*a)[i];
      ElementwiseTime e;
      e.gpu = int(t.nonnegative_int("gpu"));
      e.kind = t.str("kind");
      if (std::find(kElementwiseKinds.begin(), kElementwiseKinds.end(), e.kind) == kElementwiseKinds.end())
        t.fail("kind", "one of rms_norm, qk_norm, rotary, residual, act, moe_route, moe_combine; got '" + e.kind + "'");
      e.rows = t.positive_int("rows");
      e.cols = t.positive_int("cols");
      e.time = parse_stats(t);
      m.elementwise.push_back(e);
    }
  }
  if (auto a = j.opt("hbm_gbps"))
    for (size_t i = 0; i < a->size(); ++i) {
      double v = (*a)[i].as_num();
      if (!(v > 0)) (*a)[i].fail("", "expected a positive bandwidth in GB/s");
      if (!(v <= kMaxBandwidthGbps))
        (*a)[i].fail("", fmt::format("a bandwidth of at most {:g} GB/s (the ceiling), got {:g}", kMaxBandwidthGbps, v));
      m.hbm_gbps.push_back(v);
    }
  m.launch_overhead_s = j.nonnegative_or("launch_overhead_us", 0) * 1e-6;
  if (m.launch_overhead_s * 1e6 > kMaxLatencyUs)
    j.fail("launch_overhead_us", fmt::format("at most {:g} us (the ceiling), got {:g}", kMaxLatencyUs, m.launch_overhead_s * 1e6));
  if (auto p = j.opt("power_throttle")) {
    PowerThrottle t;
    t.onset_s = p->nonnegative_or("onset_ms", 0) * 1e-3;
    t.factor = p->positive("factor");
    if (t.factor < 1 || t.factor > 4) p->fail("factor", fmt::format("sustained / boost time in [1, 4], got {:g}", t.factor));
    if (t.onset_s > 60) p->fail("onset_ms", fmt::format("at most 60000 ms, got {:g}", t.onset_s * 1e3));
    t.boost_s = p->nonnegative_or("boost_us", 0) * 1e-6;
    t.sustained_s = p->nonnegative_or("sustained_us", 0) * 1e-6;
    t.m = p->has("m") ? p->positive_int("m") : 0;
    t.n = p->has("n") ? p->positive_int("n") : 0;
    t.k = p->has("k") ? p->positive_int("k") : 0;
    if (p->has("mixes")) t.mixes = read_mixes(p->array("mixes"));
    if (p->has("grouped")) {
      const JsonIn gs = p->array("grouped");
      for (size_t i = 0; i < gs.size(); ++i) {
        const JsonIn x = gs[i];
        GroupedThrottle g;
        g.model = x.str_or("model", "");
        g.hidden = x.positive_int("hidden");
        g.intermediate = x.positive_int("intermediate");
        g.experts = x.positive_int("experts");
        g.topk = x.positive_int("topk");
        if (g.topk > g.experts) x.fail("topk", fmt::format("at most experts ({}), got {}", g.experts, g.topk));
        g.tokens = x.positive_int("tokens");
        g.dtype = x.str_or("dtype", "bf16");
        if (const auto d = parse_dtype(g.dtype); !d) x.fail("dtype", "the experts' format: bf16, fp16, fp8, int8, int4 or mxfp4");
        else g.dtype = dtype_name(*d);  // canonical, as the pricer matches it
        g.mixes = read_mixes(x.array("mixes"));
        if (g.mixes.empty()) x.fail("mixes", "at least one mix");
        t.grouped.push_back(std::move(g));
      }
    }
    m.power_throttle = t;
  }
  if (auto e = j.opt("extra")) {
    m.extra = e->raw();
    read_grouped_dispatch(*e, m);
  }
  return m;
}

nlohmann::json measurements_to_json(const Measurements& m) {
  nlohmann::json j;
  j["meta"] = m.meta;
  j["transfers"] = nlohmann::json::array();
  for (const auto& t : m.transfers) {
    nlohmann::json o{{"src", t.src}, {"dst", t.dst}, {"mode", t.mode}, {"points", points_json(t.points)}};
    if (!t.variant.empty()) o["variant"] = t.variant;
    j["transfers"].push_back(o);
  }
  j["latencies"] = nlohmann::json::array();
  for (const auto& l : m.latencies) {
    auto o = stats_json(l.time);
    o["src"] = l.src;
    o["dst"] = l.dst;
    o["kind"] = l.kind;
    j["latencies"].push_back(o);
  }
  j["collectives"] = nlohmann::json::array();
  for (const auto& c : m.collectives) {
    nlohmann::json o = {{"op", c.op}, {"gpus", c.gpus}, {"p2p", c.p2p}, {"points", points_json(c.points)}};
    if (c.graph) o["graph"] = true;  // written only when set: older profiles round-trip unchanged
    j["collectives"].push_back(std::move(o));
  }
  if (!m.peer_allreduce.empty()) {  // written only when measured: older profiles round-trip unchanged
    j["peer_allreduce"] = nlohmann::json::array();
    for (const auto& c : m.peer_allreduce) {
      nlohmann::json o = {{"algo", c.algo}, {"gpus", c.gpus}, {"points", points_json(c.points)}};
      if (c.graph) o["graph"] = true;
      j["peer_allreduce"].push_back(std::move(o));
    }
  }
  j["gemms"] = nlohmann::json::array();
  for (const auto& g : m.gemms) {
    auto o = stats_json(g.time);
    o["gpu"] = g.gpu; o["m"] = g.m; o["n"] = g.n; o["k"] = g.k; o["dtype"] = g.dtype;
    if (g.batch != 1) o["batch"] = g.batch;  // written only when batched: older profiles round-trip unchanged
    j["gemms"].push_back(o);
  }
  j["attention"] = nlohmann::json::array();
  for (const auto& a : m.attention) {
    auto o = stats_json(a.time);
    o["gpu"] = a.gpu; o["phase"] = a.phase; o["batch"] = a.batch; o["q_len"] = a.q_len;
    o["context"] = a.context; o["heads"] = a.heads; o["kv_heads"] = a.kv_heads; o["head_dim"] = a.head_dim;
    if (a.kv_dtype != "bf16") o["kv_dtype"] = a.kv_dtype;  // absent means bf16 (profiles before issue 15)
    // Written only when it differs (MLA rows): standard rows round-trip as before.
    if (attention_v_dim(a.v_dim, a.head_dim) != a.head_dim) o["v_dim"] = a.v_dim;
    j["attention"].push_back(o);
  }
  if (!m.grouped_gemms.empty()) {  // written only when measured: older profiles round-trip unchanged
    j["grouped_gemms"] = nlohmann::json::array();
    for (const auto& g : m.grouped_gemms) {
      auto o = stats_json(g.time);
      o["gpu"] = g.gpu; o["n"] = g.n; o["k"] = g.k; o["experts"] = g.experts; o["topk"] = g.topk;
      o["tokens"] = g.tokens; o["rows"] = g.rows; o["touched"] = g.touched; o["max_rows"] = g.max_rows;
      o["dtype"] = g.dtype;
      if (g.cublas) o["path"] = "cublas_per_expert";  // absent means the grouped kernel
      if (!g.expert_rows.empty()) o["expert_rows"] = g.expert_rows;  // written only when known: older rows unchanged
      j["grouped_gemms"].push_back(o);
    }
  }
  if (!m.expert_gemms.empty()) {  // written only when measured: older profiles round-trip unchanged
    j["expert_gemms"] = nlohmann::json::array();
    for (const auto& e : m.expert_gemms) {
      auto o = stats_json(e.time);
      o["gpu"] = e.gpu; o["n"] = e.n; o["k"] = e.k; o["rows"] = e.rows; o["dtype"] = e.dtype;
      j["expert_gemms"].push_back(o);
    }
  }
  if (!m.elementwise.empty()) {  // written only when measured: older profiles round-trip unchanged
    j["elementwise"] = nlohmann::json::array();
    for (const auto& e : m.elementwise) {
      auto o = stats_json(e.time);
      o["gpu"] = e.gpu; o["kind"] = e.kind; o["rows"] = e.rows; o["cols"] = e.cols;
      j["elementwise"].push_back(o);
    }
  }
  j["hbm_gbps"] = m.hbm_gbps;
  j["launch_overhead_us"] = us(m.launch_overhead_s);
  if (const auto& t = m.power_throttle)
    j["power_throttle"] = {{"onset_ms", std::round(t->onset_s * 1e6) / 1e3}, {"factor", t->factor},
                           {"boost_us", us(t->boost_s)}, {"sustained_us", us(t->sustained_s)},
                           {"m", t->m}, {"n", t->n}, {"k", t->k}};
  if (const auto& t = m.power_throttle; t && !t->mixes.empty()) j["power_throttle"]["mixes"] = mixes_to_json(t->mixes);
  if (const auto& t = m.power_throttle; t && !t->grouped.empty())
    for (const GroupedThrottle& g : t->grouped) {
      nlohmann::json x = {{"model", g.model}, {"hidden", g.hidden}, {"intermediate", g.intermediate},
                          {"experts", g.experts}, {"topk", g.topk}, {"tokens", g.tokens}};
      if (g.dtype != "bf16") x["dtype"] = g.dtype;  // bf16 as before: older files round-trip unchanged
      x["mixes"] = mixes_to_json(g.mixes);
      j["power_throttle"]["grouped"].push_back(std::move(x));
    }
  if (!m.extra.empty()) j["extra"] = m.extra;
  return j;
}

}  // namespace peerplan
