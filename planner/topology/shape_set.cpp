#include "planner/topology/shape_set.hpp"

#include <algorithm>
#include <chrono>
#include <cctype>
#include <ctime>
#include <string_view>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/core/build_info.hpp"
#include "planner/core/json_in.hpp"
#include "planner/topology/machine.hpp"

namespace peerplan {

void ShapeSet::insert(const ShapeSet& o) {
  gemms.insert(o.gemms.begin(), o.gemms.end());
  attention.insert(o.attention.begin(), o.attention.end());
  grouped.insert(o.grouped.begin(), o.grouped.end());
  elementwise.insert(o.elementwise.begin(), o.elementwise.end());
  attention_max_context = std::max(attention_max_context, o.attention_max_context);
}

ShapeSet missing_shapes(const ShapeSet& wanted, const Measurements& have) {
  std::set<std::tuple<int64_t, int64_t, std::string, int64_t>> gemm_rows;  // + batch (gemm_from_table's match)
  // Grouped rows by their expert group too: another model of the same expert shape (Qwen1.5-MoE's and
  // DeepSeek-V2-Lite's 2816 x 2048) routes other counts, and priced from Qwen's rows alone DeepSeek-V2-Lite's
  // decode at batch 3-4 ran 0.94 of its price (session 23 E; with its own rows beside them it met).
  std::set<std::tuple<int64_t, int64_t, std::string, int64_t, int64_t>> grouped_rows;
  for (const GemmTime& g : have.gemms) gemm_rows.insert({g.n, g.k, g.dtype, g.batch});
  for (const GroupedGemmTime& g : have.grouped_gemms) grouped_rows.insert({g.n, g.k, g.dtype, g.experts, g.topk});
  std::set<std::tuple<int64_t, int64_t, int64_t, std::string, int64_t, std::string>> attn_rows;  // + v_dim, phase
  for (const AttentionTime& a : have.attention)
    attn_rows.insert({a.heads, a.kv_heads, a.head_dim, a.kv_dtype, attention_v_dim(a.v_dim, a.head_dim), a.phase});
  ShapeSet out;
  out.attention_max_context = wanted.attention_max_context;
  for (const GemmShapeKey& g : wanted.gemms)
    if (!gemm_rows.count({g.n, g.k, g.dtype, g.batch})) out.gemms.insert(g);
  for (const AttentionShapeKey& a : wanted.attention) {
    auto lacks = [&](const char* phase) {
      return (a.phase.empty() || a.phase == phase) &&
             !attn_rows.count({a.heads, a.kv_heads, a.head_dim, a.kv_dtype, attention_v_dim(a.v_dim, a.head_dim), phase});
    };
    if (lacks("decode") || lacks("prefill")) out.attention.insert(a);
  }
  for (const GroupedShapeKey& g : wanted.grouped)
    if (!grouped_rows.count({g.n, g.k, g.dtype, g.experts, g.topk})) out.grouped.insert(g);
  std::set<std::pair<std::string, int64_t>> ew_rows;  // (kind, cols): elementwise_from_table's curve
  for (const ElementwiseTime& e : have.elementwise) ew_rows.insert({e.kind, e.cols});
  for (const ElementwiseShapeKey& e : wanted.elementwise)
    if (!ew_rows.count({e.kind, e.cols})) out.elementwise.insert(e);
  return out;
}

std::string describe_shapes(const ShapeSet& s) {
  if (s.empty()) return "nothing";
  std::vector<std::string> parts;
  if (!s.gemms.empty()) {
    std::set<std::string> dts;
    for (const auto& g : s.gemms) dts.insert(g.dtype);
    parts.push_back(fmt::format("{} GEMM shape{} ({})", s.gemms.size(), s.gemms.size() == 1 ? "" : "s",
                                fmt::join(dts, ", ")));
  }
  if (!s.attention.empty())
    parts.push_back(fmt::format("{} attention configuration{}", s.attention.size(), s.attention.size() == 1 ? "" : "s"));
  if (!s.grouped.empty())
    parts.push_back(fmt::format("{} grouped expert GEMM{}", s.grouped.size(), s.grouped.size() == 1 ? "" : "s"));
  if (!s.elementwise.empty())
    parts.push_back(fmt::format("{} elementwise kernel shape{}", s.elementwise.size(), s.elementwise.size() == 1 ? "" : "s"));
  return fmt::format("{}", fmt::join(parts, ", "));
}

nlohmann::json shapes_to_json(const ShapeSet& s) {
  nlohmann::json j = {{"gemms", nlohmann::json::array()}, {"attention", nlohmann::json::array()},
                      {"grouped_gemms", nlohmann::json::array()}};
  if (!s.elementwise.empty()) j["elementwise"] = nlohmann::json::array();  // absent before: older entries unchanged
  for (const auto& g : s.gemms) {
    j["gemms"].push_back({{"n", g.n}, {"k", g.k}, {"dtype", g.dtype}});
    if (g.batch != 1) j["gemms"].back()["batch"] = g.batch;  // as the rows: plain keys written as before
  }
  for (const auto& a : s.attention) {
    j["attention"].push_back(
        {{"heads", a.heads}, {"kv_heads", a.kv_heads}, {"head_dim", a.head_dim}, {"kv_dtype", a.kv_dtype}});
    if (a.v_dim) j["attention"].back()["v_dim"] = a.v_dim;  // MLA keys only: standard ones written as before
    if (!a.phase.empty()) j["attention"].back()["phase"] = a.phase;
  }
  for (const auto& g : s.grouped)
    j["grouped_gemms"].push_back({{"n", g.n}, {"k", g.k}, {"experts", g.experts}, {"topk", g.topk},
                                  {"model_experts", g.model_experts}, {"gather", g.gather}, {"dtype", g.dtype}});
  for (const auto& e : s.elementwise) {
    nlohmann::json o = {{"kind", e.kind}, {"cols", e.cols}};
    if (e.head_dim) o["heads"] = e.heads, o["kv_heads"] = e.kv_heads, o["head_dim"] = e.head_dim;
    if (e.topk) o["topk"] = e.topk, o["experts"] = e.experts, o["local_experts"] = e.local_experts;
    j["elementwise"].push_back(o);
  }
  if (!s.attention.empty()) j["attention_max_context"] = s.attention_max_context;
  return j;
}

ShapeSet shapes_from_json(const JsonIn& j) {
  ShapeSet s;
  if (auto a = j.opt("gemms"))
    for (size_t i = 0; i < a->size(); ++i) {
      const JsonIn g = (*a)[i];
      s.gemms.insert({g.positive_int("n"), g.positive_int("k"), g.str("dtype"), g.integer_or("batch", 1)});
    }
  if (auto a = j.opt("attention"))
    for (size_t i = 0; i < a->size(); ++i) {
      const JsonIn t = (*a)[i];
      s.attention.insert({t.positive_int("heads"), t.positive_int("kv_heads"), t.positive_int("head_dim"),
                          t.str("kv_dtype"), t.nonnegative_int_or("v_dim", 0), t.str_or("phase", "")});
    }
  if (auto a = j.opt("grouped_gemms"))
    for (size_t i = 0; i < a->size(); ++i) {
      const JsonIn g = (*a)[i];
      s.grouped.insert({g.positive_int("n"), g.positive_int("k"), g.positive_int("experts"), g.positive_int("topk"),
                        g.positive_int("model_experts"), g.boolean("gather"), g.str("dtype")});
    }
  if (auto a = j.opt("elementwise"))
    for (size_t i = 0; i < a->size(); ++i) {
      const JsonIn e = (*a)[i];
      ElementwiseShapeKey k;
      k.kind = e.str("kind");
      k.cols = e.positive_int("cols");
      k.heads = e.nonnegative_int_or("heads", 0), k.kv_heads = e.nonnegative_int_or("kv_heads", 0);
      k.head_dim = e.nonnegative_int_or("head_dim", 0);
      k.topk = e.nonnegative_int_or("topk", 0), k.experts = e.nonnegative_int_or("experts", 0);
      k.local_experts = e.nonnegative_int_or("local_experts", 0);
      s.elementwise.insert(k);
    }
  s.attention_max_context = j.integer_or("attention_max_context", s.attention_max_context);
  return s;
}

ShapeSweep shape_sweep_of(const Machine& profile) {
  ShapeSweep s;
  nlohmann::json opt = nlohmann::json::object();
  if (profile.meta.contains("profile") && profile.meta["profile"].is_object() &&
      profile.meta["profile"].contains("options") && profile.meta["profile"]["options"].is_object())
    opt = profile.meta["profile"]["options"];
  auto int_of = [&](const char* key, int64_t dflt) {
    return opt.contains(key) && opt[key].is_number_integer() ? opt[key].get<int64_t>() : dflt;
  };
  s.quick = opt.contains("quick") && opt["quick"].is_boolean() && opt["quick"].get<bool>();
  s.samples = int(std::max<int64_t>(1, int_of("samples", s.quick ? 5 : 20)));
  s.warmup = int(std::max<int64_t>(0, int_of("warmup", s.quick ? 1 : 3)));
  if (opt.contains("duty") && opt["duty"].is_number() && opt["duty"].get<double>() > 0 && opt["duty"].get<double>() <= 1)
    s.duty = opt["duty"].get<double>();
  if (s.quick) s.samples = std::min(s.samples, 5), s.warmup = std::min(s.warmup, 1);  // as plan_sweep does
  std::set<int64_t> m;
  if (profile.measurements) {
    for (const GemmTime& g : profile.measurements->gemms) m.insert(g.m);
    for (const GroupedGemmTime& g : profile.measurements->grouped_gemms) m.insert(g.tokens);
    for (const ElementwiseTime& e : profile.measurements->elementwise) m.insert(e.rows);
  }
  if (m.empty()) {  // no model-dependent points yet: the profiler's own token sweep
    const int64_t max_tokens = std::max<int64_t>(1, int_of("max_tokens", 8192));
    for (int64_t t = 1; t <= max_tokens; t *= 2) m.insert(t);
    m.insert(max_tokens);
  }
  s.tokens.assign(m.begin(), m.end());
  return s;
}

MergeCount merge_shape_rows(Measurements& into, const Measurements& from) {
  MergeCount c;
  using GemmK = std::tuple<int, int64_t, int64_t, int64_t, std::string, int64_t>;
  std::set<GemmK> gk;
  for (const GemmTime& g : into.gemms) gk.insert({g.gpu, g.m, g.n, g.k, g.dtype, g.batch});
  for (const GemmTime& g : from.gemms) {
    if (!gk.insert({g.gpu, g.m, g.n, g.k, g.dtype, g.batch}).second) { ++c.duplicates; continue; }
    into.gemms.push_back(g);
    ++c.gemms;
  }
  using AttnK = std::tuple<int, std::string, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, std::string, int64_t>;
  std::set<AttnK> ak;
  auto akey = [](const AttentionTime& a) {
    return AttnK{a.gpu,      a.phase,    a.batch,    a.q_len, a.context, a.heads, a.kv_heads, a.head_dim,
                 a.kv_dtype, attention_v_dim(a.v_dim, a.head_dim)};
  };
  for (const AttentionTime& a : into.attention) ak.insert(akey(a));
  for (const AttentionTime& a : from.attention) {
    if (!ak.insert(akey(a)).second) { ++c.duplicates; continue; }
    into.attention.push_back(a);
    ++c.attention;
  }
  // A token count is timed under several routings (one per busiest-expert row count): rows, touched
  // and max_rows are part of a row's identity.
  using GroupK = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, std::string, int64_t, int64_t, int64_t>;
  std::set<GroupK> grk;
  auto gkey = [](const GroupedGemmTime& g) {
    return GroupK{g.gpu, g.n, g.k, g.experts, g.topk, g.tokens, g.dtype, g.rows, g.touched, g.max_rows};
  };
  for (const GroupedGemmTime& g : into.grouped_gemms) grk.insert(gkey(g));
  for (const GroupedGemmTime& g : from.grouped_gemms) {
    if (!grk.insert(gkey(g)).second) { ++c.duplicates; continue; }
    into.grouped_gemms.push_back(g);
    ++c.grouped;
  }
  // One expert's rows: another model of the same (n, k, dtype) plans the same rows, timed once.
  using ExpertK = std::tuple<int, int64_t, int64_t, std::string, int64_t>;
  std::set<ExpertK> xk;
  for (const ExpertGemmTime& e : into.expert_gemms) xk.insert({e.gpu, e.n, e.k, e.dtype, e.rows});
  for (const ExpertGemmTime& e : from.expert_gemms) {
    if (!xk.insert({e.gpu, e.n, e.k, e.dtype, e.rows}).second) { ++c.duplicates; continue; }
    into.expert_gemms.push_back(e);
    ++c.expert;
  }
  using EwK = std::tuple<int, std::string, int64_t, int64_t>;
  std::set<EwK> ek;
  for (const ElementwiseTime& e : into.elementwise) ek.insert({e.gpu, e.kind, e.rows, e.cols});
  for (const ElementwiseTime& e : from.elementwise) {
    if (!ek.insert({e.gpu, e.kind, e.rows, e.cols}).second) { ++c.duplicates; continue; }
    into.elementwise.push_back(e);
    ++c.elementwise;
  }
  if (from.extra.contains("not_applicable") && from.extra["not_applicable"].is_object()) {
    if (!into.extra.contains("not_applicable") || !into.extra["not_applicable"].is_object())
      into.extra["not_applicable"] = nlohmann::json::object();
    for (const auto& [k, v] : from.extra["not_applicable"].items()) into.extra["not_applicable"][k] = v;
  }
  return c;
}

void record_added_shapes(Machine& profile, const AddedShapes& a) {
  if (!profile.meta.contains("added_shapes") || !profile.meta["added_shapes"].is_array())
    profile.meta["added_shapes"] = nlohmann::json::array();
  profile.meta["added_shapes"].push_back(
      {{"by", a.by},
       {"models", a.models},
       {"date", a.date},
       {"peerplan", build::version},
       {"measured", describe_shapes(a.measured)},
       {"shapes", shapes_to_json(a.measured)},
       {"rows_added", {{"gemms", a.rows.gemms}, {"attention", a.rows.attention}, {"grouped_gemms", a.rows.grouped}}},
       {"rows_already_there", a.rows.duplicates},
       {"seconds", a.seconds}});
  if (a.rows.elementwise) profile.meta["added_shapes"].back()["rows_added"]["elementwise"] = a.rows.elementwise;
  if (a.rows.expert) profile.meta["added_shapes"].back()["rows_added"]["expert_gemms"] = a.rows.expert;
  if (!a.details.is_null() && !a.details.empty()) profile.meta["added_shapes"].back()["details"] = a.details;
}

MergeCount add_measured_shapes(Machine& profile, const Measurements& rows, AddedShapes a) {
  if (!profile.measurements) profile.measurements = Measurements{};
  a.rows = merge_shape_rows(*profile.measurements, rows);
  nlohmann::json details = rows.extra.is_object() ? rows.extra : nlohmann::json::object();
  details.erase("not_applicable");
  if (!details.empty()) a.details = details;
  if (rows.extra.contains("not_applicable")) a.details["not_applicable"] = rows.extra["not_applicable"];
  record_added_shapes(profile, a);
  return a.rows;
}

namespace {

std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("._/:@%+=-").find(char(c)) != std::string_view::npos;
  });
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::string add_model_command(const std::string& model_arg, const std::string& machine_file) {
  return "peerplan profile --add-model " + shell_word(model_arg) + " --machine " +
         (machine_file.empty() ? std::string("<file>") : shell_word(machine_file));
}

std::string utc_now_iso8601() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace peerplan
