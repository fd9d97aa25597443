#include "planner/search/search.hpp"

#include "planner/search/prune.hpp"
#include "planner/search/screen.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <thread>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/plan/p2p_off.hpp"
#include "planner/strategy/strategy_runner.hpp"

namespace peerplan {

const char* to_string(Objective o) {
  switch (o) {
    case Objective::Gpus: return "gpus";
    case Objective::Goodput: return "goodput";
    case Objective::P99: return "p99";
    case Objective::Throughput: return "throughput";
  }
  return "?";
}

std::optional<Objective> objective_from_string(const std::string& s) {
  if (s == "gpus") return Objective::Gpus;
  if (s == "goodput") return Objective::Goodput;
  if (s == "p99") return Objective::P99;
  if (s == "throughput") return Objective::Throughput;
  return std::nullopt;
}

double objective_score(const Metrics& m, Objective o) {
  // Unfinished requests make a plan lose to any plan that finishes them all.
  double unfinished = double(m.requests - m.completed);
  switch (o) {
    case Objective::Gpus:
    case Objective::Goodput: return m.goodput_rps - unfinished;
    case Objective::P99: return -(m.e2e.p99 + 1e6 * unfinished);
    case Objective::Throughput: return m.output_tokens_per_s - 1e3 * unfinished;
  }
  return 0;
}

bool meets_slos(const Metrics& m, double threshold) {
  return m.requests > 0 && m.completed == m.requests && m.slo_attainment >= threshold;
}

Workload at_rate(const Workload& w, double rate_rps) {
  Workload out = w;
  if (w.arrival == Workload::Arrival::Trace && !out.trace_arrivals_s.empty() && w.rate_rps > 0) {
    const double k = w.rate_rps / rate_rps, t0 = out.trace_arrivals_s.front();
    for (double& t : out.trace_arrivals_s) t = t0 + (t - t0) * k;
  }
  out.rate_rps = rate_rps;
  return out;
}

namespace {

// The capacity search as a state: the highest rate known to meet (lo, with its tokens/s), the
// lowest known to miss (hi), the probes run, and the bracket's direction.
struct CapState {
  double lo = 0, lo_tps = 0, hi = 0;
  int probes = 0;
  bool up = true;  // the requested rate met: bracket upwards
};

// The rate the search probes next from `s`, or 0 when it is done: bracket (double up while it
// meets, halve down while it misses, within a factor 1024 of r0), then bisect geometrically (the
// ratio hi/lo halves in log each probe: 2 -> 1.05 in 4).
double next_probe(const CapState& s, double r0, const CapacityOptions& opt) {
  constexpr double kMaxFactor = 1024;
  if (s.probes >= opt.max_probes) return 0;
  if (s.up && s.hi == 0) return s.lo * 2 <= r0 * kMaxFactor ? s.lo * 2 : 0;
  if (!s.up && s.lo == 0) return s.hi / 2 >= r0 / kMaxFactor ? s.hi / 2 : 0;
  if (s.lo > 0 && s.hi > 0 && s.hi / s.lo > 1 + opt.tolerance) return std::sqrt(s.lo * s.hi);
  return 0;
}

void apply_probe(CapState& s, double rate, bool meets, double tps) {
  ++s.probes;
  if (meets) {
    s.lo = rate;
    s.lo_tps = tps;
  } else {
    s.hi = rate;
  }
}

struct ProbeResult {
  bool meets = false;
  double tps = 0;
};

// The capacity search; `threads` > 1: while probe k runs, the probe the search would make next if
// k misses (while bracketing upwards: if it meets) runs on a second thread, and is kept only when
// k's outcome makes it the search's next probe. So the probes kept, their order and their results
// are those of the sequential search whatever the threads; each thread keeps its own price memo.
Capacity find_capacity_with(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo,
                            const Workload& w, const Metrics& at_requested, const SimulateOptions& sim,
                            const CapacityOptions& opt, int threads) {
  Capacity c;
  c.searched = true;
  c.tolerance = opt.tolerance;
  const double r0 = w.rate_rps;
  if (!(r0 > 0)) {
    c.note = "the workload has no arrival rate to start from";
    return c;
  }
  // Every probe runs the same plan under the same costs: one price memo for all of a thread's
  // probes, so each iteration shape is priced once per thread, not once per probe.
  std::vector<PriceMemo> memos, memos2;
  SimulateOptions so = sim, so2 = sim;
  if (!so.price_memos) so.price_memos = &memos;
  so2.price_memos = &memos2;
  so2.progress = false;
  auto probe = [&](double rate, const SimulateOptions& o) {
    Workload pw = at_rate(w, rate);
    const RequestSource src(pw);  // the same seeded requests, arrivals rescaled
    // A screening run that proves a miss decides the probe as the full run would (screen.hpp).
    if (opt.screen_requests > 0 && src.size() >= 4 * opt.screen_requests &&
        screen_plan(plan, cfg, fig, topo, pw, src, opt.screen_requests, opt.slo_threshold, o).proves_miss)
      return ProbeResult{};
    Simulation s = simulate_plan(plan, cfg, fig, topo, pw, src, o);
    return ProbeResult{meets_slos(s.metrics, opt.slo_threshold), s.metrics.output_tokens_per_s};
  };
  CapState st;
  st.up = meets_slos(at_requested, opt.slo_threshold);
  if (st.up) {
    st.lo = r0;
    st.lo_tps = at_requested.output_tokens_per_s;
  } else {
    st.hi = r0;
  }
  for (double r1; (r1 = next_probe(st, r0, opt)) > 0;) {
    const bool guess = st.up && st.hi == 0;  // bracketing upwards: it keeps meeting; else: it misses
    CapState g = st;
    apply_probe(g, r1, guess, 0);
    const double r2 = threads > 1 ? next_probe(g, r0, opt) : 0;
    ProbeResult p2;
    std::exception_ptr err2;
    std::thread t2;
    // The second thread starts from every price the first has (a shape costs milliseconds to
    // price on a 64-GPU MoE plan; a copy of the memo, microseconds); its new ones are merged back.
    if (r2 > 0) memos2 = *so.price_memos;
    if (r2 > 0) t2 = std::thread([&] {
        try {
          p2 = probe(r2, so2);
        } catch (...) {
          err2 = std::current_exception();
        }
      });
    ProbeResult p1;
    std::exception_ptr err1;
    try {
      p1 = probe(r1, so);
    } catch (...) {
      err1 = std::current_exception();
    }
    if (t2.joinable()) {
      t2.join();
      std::vector<PriceMemo>& into = *so.price_memos;
      if (into.size() < memos2.size()) into.resize(memos2.size());
      for (size_t r = 0; r < memos2.size(); ++r)
        for (auto& [key, cost] : memos2[r]) into[r].try_emplace(key, std::move(cost));
    }
    if (err1) std::rethrow_exception(err1);
    apply_probe(st, r1, p1.meets, p1.tps);
    if (r2 > 0 && p1.meets == guess) {
      if (err2) std::rethrow_exception(err2);
      apply_probe(st, r2, p2.meets, p2.tps);
    }
  }
  c.probes = st.probes;
  const double lo = st.lo, hi = st.hi;
  c.rate_rps = lo;
  c.output_tokens_per_s = st.lo_tps;
  c.miss_rps = hi;
  if (lo == 0)
    c.note = fmt::format("misses the SLOs at every rate tried, down to {:.3g} req/s", hi);
  else if (hi == 0)
    c.note = fmt::format("meets the SLOs at every rate tried, up to {:.3g} req/s (a lower bound)", lo);
  else if (hi / lo > 1 + opt.tolerance)
    c.note = fmt::format("probe budget spent: between {:.3g} and {:.3g} req/s", lo, hi);
  return c;
}

}  // namespace

Capacity find_capacity(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo,
                       const Workload& w, const Metrics& at_requested, const SimulateOptions& sim,
                       const CapacityOptions& opt) {
  return find_capacity_with(plan, cfg, fig, topo, w, at_requested, sim, opt, 1);
}

namespace {

bool boundary_peer_usable(const Plan& p, size_t b, const Topology& topo) {
  const PlanStage& prev = p.stages[b];
  const PlanStage& next = p.stages[b + 1];
  for (size_t r = 0; r < next.gpus.size(); ++r) {
    int src = prev.gpus[r % prev.gpus.size()], dst = next.gpus[r];
    if (src != dst && !topo.p2p_usable(src, dst)) return false;
  }
  return true;
}

bool any_p2p(const Plan& p, const Topology& topo) {
  auto g = p.all_gpus();
  for (int a : g)
    for (int b : g)
      if (a != b && topo.p2p_usable(a, b)) return true;
  return false;
}

// The strategy's plan name: without the P2P-off and all-reduce variant suffixes.
std::string base_name(const std::string& n) {
  std::string b = without_p2p_off_suffix(n);
  const size_t ar = b.find(kAllReduceSuffix);
  return ar == std::string::npos ? b : b.substr(0, ar);
}

// fn(0..n-1) over `threads` threads (the caller's included), each index once.
template <class Fn>
void for_each_parallel(size_t n, int threads, Fn fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) fn(i);
  };
  int nthreads = std::max(1, std::min<int>(threads, int(n)));
  std::vector<std::thread> pool;
  for (int t = 1; t < nthreads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}


}  // namespace

std::vector<Plan> p2p_variants(const Plan& p, const Topology& topo, bool compare) {
  if (p.num_gpus() <= 1) return {p};
  Plan off = p2p_off_variant(p);
  if (!any_p2p(p, topo)) return {off};
  Plan on = p;
  on.p2p = true;
  on.boundary_modes.resize(p.stages.size() - 1);
  for (size_t b = 0; b + 1 < p.stages.size(); ++b)
    on.boundary_modes[b] = boundary_peer_usable(p, b, topo) ? "peer" : "host_staged";
  if (!compare) return {on};
  return {on, off};
}

void explain_bottleneck(CandidateResult& c, const Topology& topo) {
  c.bottleneck.clear();
  c.fix.clear();
  if (c.comm_fraction < 0.20 || c.plan.num_gpus() <= 1) return;
  // The slowest path the plan's traffic takes: a stage boundary or a pair inside a TP/EP group.
  PathType worst = PathType::Self;
  std::string where;
  const Plan& p = c.plan;
  for (size_t b = 0; b + 1 < p.stages.size(); ++b) {
    const PlanStage& prev = p.stages[b];
    const PlanStage& next = p.stages[b + 1];
    for (size_t r = 0; r < next.gpus.size(); ++r) {
      int src = prev.gpus[r % prev.gpus.size()], dst = next.gpus[r];
      PathType t = p.boundary_modes.at(b) == "peer" ? topo.path_type(src, dst) : PathType::SYS;
      if (int(t) > int(worst) || where.empty()) {
        worst = t;
        where = fmt::format("the stage {}->{} boundary (gpu{} -> gpu{}, {}{})", b, b + 1, src, dst,
                            to_string(topo.path_type(src, dst), topo.nvlinks_between(src, dst)),
                            p.boundary_modes.at(b) == "peer" ? ", peer copy" : ", host-staged");
      }
    }
  }
  for (const PlanStage& st : p.stages)
    for (int a : st.gpus)
      for (int b : st.gpus)
        if (a < b) {
          const bool net = topo.host_of(a) != topo.host_of(b);
          PathType t = net ? PathType::None : p.p2p ? topo.path_type(a, b) : PathType::SYS;
          if (int(t) > int(worst) || where.empty()) {
            worst = t;
            where = net ? fmt::format("the TP all-reduce between gpu{} and gpu{} (across hosts, over the network)", a, b)
                        : fmt::format("the TP all-reduce between gpu{} and gpu{} ({}{})", a, b,
                                      to_string(topo.path_type(a, b), topo.nvlinks_between(a, b)),
                                      p.p2p ? "" : ", P2P off");
          }
        }
  c.bottleneck = fmt::format("communication is {:.0f}% of GPU busy time; dominated by {}", 100 * c.comm_fraction, where);
  if (!c.metrics.busiest_link.empty()) c.bottleneck += "; busiest link " + c.metrics.busiest_link;
  if (c.metrics.provenance.contains("inferred_collectives"))
    c.bottleneck += "; its cross-host collectives are priced by NCCL's hierarchical rule (inferred: the profile "
                    "has no curve for those groups)";
  // Remedies, most specific first.
  auto islands = topo.nvlink_islands();
  auto switches = topo.switch_groups();
  auto groups_text = [](const std::vector<std::vector<int>>& g) {
    std::string s;
    for (const auto& x : g) {
      if (x.size() < 2) continue;
      s += s.empty() ? "{" : ", {";
      for (size_t i = 0; i < x.size(); ++i) s += (i ? "," : "") + std::to_string(x[i]);
      s += "}";
    }
    return s;
  };
  if (!p.p2p && any_p2p(p, topo)) {
    c.fix = "enable P2P (peer access and NCCL P2P): the same plan with P2P on avoids the host round trip";
  } else if (int(worst) >= int(PathType::PHB)) {
    std::string g = groups_text(islands);
    if (g.empty()) g = groups_text(switches);
    c.fix = g.empty() ? "use fewer GPUs or fewer stage crossings: every pair here goes through the host"
                      : "keep TP groups and adjacent stages inside one " +
                            std::string(islands.size() > 0 && groups_text(islands).size() ? "NVLink island " : "PCIe switch ") +
                            g + ", and cross the slow link only at a pipeline boundary (fewer, smaller transfers)";
  } else {
    c.fix = "fewer crossings: a lower TP degree, or pipeline stages instead of tensor parallelism over this link";
  }
}

namespace {

// Whether replicas of a smaller plan or one wider plan carry the rate on fewer GPUs: the fewest
// GPUs each way among plans that meet the SLOs ("" when no replicated plan was ranked).
std::string replicas_or_wider(const std::vector<CandidateResult>& ranked, double rate_rps) {
  const CandidateResult *rep = nullptr, *one = nullptr;
  bool any_rep = false;
  for (const CandidateResult& c : ranked) {
    const bool replicated = c.plan.replica_count() > 1;
    any_rep |= replicated;
    if (!c.meets_slos) continue;
    const CandidateResult*& slot = replicated ? rep : one;
    if (!slot || c.plan.num_gpus() < slot->plan.num_gpus()) slot = &c;
  }
  if (!any_rep) return "";
  auto said = [](const CandidateResult& c) {
    return fmt::format("{} ({} GPU{}, {} replica{})", c.plan.name, c.plan.num_gpus(), c.plan.num_gpus() == 1 ? "" : "s",
                       c.plan.replica_count(), c.plan.replica_count() == 1 ? "" : "s");
  };
  if (!rep && !one) return "";
  if (!rep) return fmt::format(" Replicas or one wider plan: no replicated plan meets the SLOs at {:.2f} req/s; one plan, {}, does.",
                               rate_rps, said(*one));
  if (!one) return fmt::format(" Replicas or one wider plan: only replicated plans meet the SLOs at {:.2f} req/s; the fewest GPUs: {}.",
                               rate_rps, said(*rep));
  const int nr = rep->plan.num_gpus(), no = one->plan.num_gpus();
  return fmt::format(" Replicas or one wider plan: at {:.2f} req/s the fewest GPUs that meet the SLOs are {} with replicas "
                     "and {} without: {}.",
                     rate_rps, said(*rep), said(*one),
                     nr < no ? "replicas carry the load on fewer GPUs"
                             : (no < nr ? "one plan carries it on fewer GPUs" : "as many GPUs either way"));
}

// The format a search compares the others with: the widest (most weight bytes, then KV bytes per token).
size_t reference_format(const std::vector<SearchFormat>& fmts) {
  size_t ref = 0;
  for (size_t i = 1; i < fmts.size(); ++i) {
    const ModelFigures &a = fmts[i].fig, &b = fmts[ref].fig;
    if (a.weight_bytes > b.weight_bytes || (a.weight_bytes == b.weight_bytes && a.kv_bytes_per_token > b.kv_bytes_per_token))
      ref = i;
  }
  return ref;
}

// What each format buys against the widest: its fewest GPUs that meet the SLOs ("fp8 weights: the
// same SLOs on 2 GPUs instead of 4"); on ties the best-ranked plan of that count.
std::string what_formats_buy(const std::vector<CandidateResult>& ranked, const std::vector<SearchFormat>& fmts,
                             double rate_rps) {
  std::vector<const CandidateResult*> best(fmts.size(), nullptr);
  std::vector<bool> ran(fmts.size(), false);
  for (const CandidateResult& c : ranked) {
    ran[c.format] = true;
    const CandidateResult*& b = best[c.format];
    if (c.meets_slos && (!b || c.plan.num_gpus() < b->plan.num_gpus())) b = &c;
  }
  const size_t ref = reference_format(fmts);
  auto differs = [&](size_t f) {
    std::string d;
    if (fmts[f].weights != fmts[ref].weights) d = fmts[f].weights + " weights";
    if (fmts[f].kv != fmts[ref].kv) d += (d.empty() ? "" : " and ") + fmts[f].kv + " KV";
    return d;
  };
  auto on = [](const CandidateResult& c) {
    return fmt::format("{} on {} GPU{}", c.plan.name, c.plan.num_gpus(), c.plan.num_gpus() == 1 ? "" : "s");
  };
  std::string s = fmt::format("\nWhat each format buys (its fewest GPUs that meet the SLOs at {:.2f} req/s, against {}):",
                              rate_rps, fmts[ref].words());
  for (size_t f = 0; f < fmts.size(); ++f) {
    s += fmt::format("\n  {:<10} ", fmts[f].label());
    if (!best[f]) {
      s += ran[f] ? "none of its simulated plans meets the SLOs" : "no plan of it was simulated (see 'did not run')";
      continue;
    }
    const CandidateResult& c = *best[f];
    s += fmt::format("{} (TPOT p50 {:.2f} ms, goodput {:.2f} req/s)", on(c), c.metrics.tpot.p50 * 1e3, c.metrics.goodput_rps);
    if (f == ref) continue;
    const int n = c.plan.num_gpus();
    if (!best[ref]) {
      s += fmt::format(": {} meet the SLOs on {} GPU{}; {} meets them on no plan simulated", differs(f), n,
                       n == 1 ? "" : "s", fmts[ref].words());
      continue;
    }
    const int n_ref = best[ref]->plan.num_gpus();
    if (n < n_ref)
      s += fmt::format(": {}: the same SLOs on {} GPU{} instead of {}", differs(f), n, n == 1 ? "" : "s", n_ref);
    else if (n == n_ref)
      s += fmt::format(": {}: as many GPUs ({}), goodput {:.2f} vs {:.2f} req/s, TPOT p50 {:.2f} vs {:.2f} ms", differs(f),
                       n, c.metrics.goodput_rps, best[ref]->metrics.goodput_rps, c.metrics.tpot.p50 * 1e3,
                       best[ref]->metrics.tpot.p50 * 1e3);
    else
      s += fmt::format(": {}: needs {} GPUs, {} in {}", differs(f), n, n_ref, fmts[ref].words());
  }
  return s;
}

}  // namespace

SearchResult search_plans(const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo, const Workload& w,
                          const SearchOptions& opt) {
  SearchFormat f;
  f.cfg = cfg;
  f.fig = fig;
  f.weights = checkpoint_weights_name(cfg);
  f.kv = dtype_name(cfg.kv_dtype);
  std::vector<SearchFormat> one;
  one.push_back(std::move(f));
  return search_plans(std::move(one), topo, w, opt);
}

SearchResult search_plans(std::vector<SearchFormat> formats, const Topology& topo, const Workload& w,
                          const SearchOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  if (formats.empty()) throw InputError("", "--dtypes", "at least one format to search");
  SearchResult res;
  res.formats = std::move(formats);
  const std::vector<SearchFormat>& fmts = res.formats;
  const bool multi = fmts.size() > 1;
  res.precision = precision_json(fmts[0].cfg, fmts[0].fig);
  res.precision_line = precision_line(fmts[0].cfg, fmts[0].fig);
  if (multi) {
    res.precision_line = "formats (weights/KV):";
    for (const SearchFormat& f : fmts) res.precision_line += " " + f.label();
  }
  res.objective = opt.objective;
  res.slo_threshold = opt.capacity.slo_threshold;
  res.workload = w;
  WorkloadOverrides overrides;
  overrides.rate_rps = opt.rate_rps.value_or(0.0);
  overrides.num_requests = opt.num_requests;
  apply_overrides(res.workload, overrides);
  const Workload& wl = res.workload;
  // One seeded source for every candidate: each simulation draws its own stream of the same
  // requests, and none holds them all (planner/model/workload_requests.hpp).
  const RequestSource reqs(wl);

  MemoryOptions mem;
  mem.max_seqs = wl.max_num_seqs;
  mem.context = wl.max_context();
  mem.max_batched_tokens = wl.max_batched_tokens;
  // The strategies see each format's model (weight and KV bytes decide what fits and how stages balance).
  std::vector<std::vector<CandidatePlan>> cands_of(fmts.size());
  for (size_t fi = 0; fi < fmts.size(); ++fi)
    cands_of[fi] = run_strategies(opt.strategy_files, fmts[fi].cfg, fmts[fi].fig, CostModel(topo, opt.sim.cost),
                                  opt.sets, mem);

  std::vector<CandidateResult> jobs;
  for (size_t fi = 0; fi < fmts.size(); ++fi)
  for (const CandidatePlan& cp : cands_of[fi]) {
    bool fits = cp.memory.max_seqs_that_fit >= 1;
    std::vector<Plan> variants;
    for (const Plan& v : fits ? p2p_variants(cp.plan, topo, opt.compare_p2p) : std::vector<Plan>{cp.plan})
      for (Plan& a : fits && !opt.allreduce.empty() ? allreduce_variants(v, opt.allreduce) : std::vector<Plan>{v})
        variants.push_back(std::move(a));
    for (const Plan& v : variants) {
      CandidateResult r;
      r.plan = v;
      r.strategy_file = cp.strategy_file;
      r.format = fi;
      r.p2p = v.p2p;
      r.multi_gpu = v.num_gpus() > 1;
      r.memory = cp.memory;
      if (!fits)
        r.why_not = cp.memory.why.empty() ? "does not fit in GPU memory (not even one sequence of " +
                                                std::to_string(mem.context) + " tokens)"
                                          : cp.memory.why;
      jobs.push_back(std::move(r));
    }
  }

  // Cheap bounds first (prune.hpp): a plan that cannot meet the SLOs at this rate is not simulated.
  // Only when the objective ranks by the SLOs; plans that do not fit are already out.
  const bool by_slos = opt.prune && (opt.objective == Objective::Gpus || opt.objective == Objective::Goodput);
  std::vector<PruneContext> pctx;
  for (const SearchFormat& f : fmts)
    pctx.push_back(prune_context(f.cfg, f.fig, topo.machine(), wl, opt.capacity.slo_threshold, by_slos));
  PruneTally tally;
  for (CandidateResult& r : jobs) {
    if (!r.why_not.empty()) continue;
    PruneVerdict v = prune_candidate(r.plan, r.memory, pctx[r.format]);
    tally.add(v);
    if (v.keep) continue;
    r.pruned_by = v.bound;
    r.why_not = "not simulated: the " + v.bound + " bound says it cannot meet the SLOs: " + v.why;
  }
  // `memos`: prices kept from the plan's screening run (null: the run's own).
  auto simulate_job = [&](CandidateResult& r, std::vector<PriceMemo>* memos = nullptr) {
      try {
        SimulateOptions so = opt.sim;
        so.memory = r.memory;
        so.memory_context = mem.context;
        so.price_memos = memos;
        Simulation sim = simulate_plan(r.plan, fmts[r.format].cfg, fmts[r.format].fig, topo, wl, reqs, so);
        r.metrics = std::move(sim.metrics);
        r.distinct_shapes = sim.distinct_shapes;
        r.simulated = true;
      } catch (const std::exception& e) {
        r.why_not = std::string("simulation failed: ") + e.what();
      }
  };
  const bool screening = opt.objective == Objective::Gpus && opt.screen_requests > 0 &&
                         reqs.size() >= 4 * opt.screen_requests;
  int screened_out = 0, more_gpus = 0, format_known = 0, met_at = 0;  // met_at: the fewest GPUs meeting the SLOs, any format
  std::vector<int> met_at_of(fmts.size(), 0);       // ... in each format
  if (!screening) {
    // Simulate in parallel: every job has its own cost model and pricer; the topology is shared read-only.
    for_each_parallel(jobs.size(), opt.threads, [&](size_t i) {
      if (jobs[i].why_not.empty()) simulate_job(jobs[i]);
    });
  } else {
    // Rounds by ascending GPU count (screen.hpp): screen, then fully simulate what could meet the
    // SLOs; a format leaves the rounds after the first in which one of its plans meets them (so
    // each format's fewest GPUs are known for the verdict), the search stops when every format has.
    auto active = [&](const CandidateResult& r) { return met_at_of[r.format] == 0; };
    std::vector<int> counts;
    for (const CandidateResult& r : jobs)
      if (r.why_not.empty()) counts.push_back(r.plan.num_gpus());
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    auto screen_then_simulate = [&](size_t i) {
      CandidateResult& r = jobs[i];
      std::vector<PriceMemo> memos;  // the screening run's prices, reused by the full run
      SimulateOptions so = opt.sim;
      so.memory = r.memory;
      so.memory_context = mem.context;
      so.price_memos = &memos;
      ScreenVerdict v;
      try {
        v = screen_plan(r.plan, fmts[r.format].cfg, fmts[r.format].fig, topo, wl, reqs, opt.screen_requests,
                        opt.capacity.slo_threshold, so);
      } catch (const std::exception&) {
        v = ScreenVerdict{};  // the full run says what failed
      }
      if (v.proves_miss) {
        r.pruned_by = "screen";
        r.why_not = "not fully simulated: " + v.why;
        return;
      }
      simulate_job(r, &memos);
    };
    auto met = [&](const CandidateResult& r) { return r.simulated && meets_slos(r.metrics, opt.capacity.slo_threshold); };
    for (int k : counts) {
      // A format still looking for its fewest GPUs on a round past the fewest that meet the SLOs in
      // another format cannot be recommended here: the verdict needs only whether one of its plans
      // on k GPUs meets them. Those plans go one at a time, the one with the shortest decode step
      // bound first (prune.hpp; job order on ties, so the outcome does not depend on the threads).
      const int fewest = *std::min_element(met_at_of.begin(), met_at_of.end(), [](int a, int b) {
        return a > 0 && (b == 0 || a < b);
      });
      std::vector<size_t> round;
      std::vector<std::vector<size_t>> probe(fmts.size());
      for (size_t i = 0; i < jobs.size(); ++i)
        if (jobs[i].why_not.empty() && jobs[i].plan.num_gpus() == k && active(jobs[i]))
          (fewest > 0 && fewest < k ? probe[jobs[i].format] : round).push_back(i);
      for_each_parallel(round.size(), opt.threads, [&](size_t j) { screen_then_simulate(round[j]); });
      for (size_t i : round) {
        const CandidateResult& r = jobs[i];
        screened_out += r.pruned_by == "screen";
        if (met(r)) met_at_of[r.format] = k;
      }
      for (auto& list : probe) {
        std::vector<double> lb(jobs.size());
        for (size_t i : list) lb[i] = decode_step_lower_bound_s(jobs[i].plan, pctx[jobs[i].format], 1);
        std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) { return lb[a] < lb[b]; });
      }
      for (size_t step = 0;; ++step) {
        std::vector<size_t> batch;  // each probing format's next plan, run side by side
        for (size_t f = 0; f < fmts.size(); ++f)
          if (met_at_of[f] == 0 && step < probe[f].size()) batch.push_back(probe[f][step]);
        if (batch.empty()) break;
        for_each_parallel(batch.size(), opt.threads, [&](size_t j) { screen_then_simulate(batch[j]); });
        for (size_t i : batch) {
          screened_out += jobs[i].pruned_by == "screen";
          if (met(jobs[i])) met_at_of[jobs[i].format] = k;
        }
      }
      for (size_t f = 0; f < fmts.size(); ++f) {
        const CandidateResult* first = nullptr;
        for (size_t i : probe[f]) first = !first && met(jobs[i]) ? &jobs[i] : first;
        if (first)
          for (size_t i : probe[f])
            if (!jobs[i].simulated && jobs[i].why_not.empty()) {
              jobs[i].pruned_by = "gpus";
              jobs[i].why_not = fmt::format(
                  "not simulated: {} meets the SLOs on {} GPUs with {}, and plans on {} GPUs meet them in another "
                  "format, so none of its plans on {} GPUs can be recommended (screening, --screen 0 simulates every "
                  "plan)",
                  fmts[f].words(), k, first->plan.name, fewest, k);
              ++format_known;
            }
      }
      if (std::all_of(met_at_of.begin(), met_at_of.end(), [](int m) { return m > 0; })) break;
    }
    for (int m : met_at_of)
      if (m > 0 && (met_at == 0 || m < met_at)) met_at = m;
    for (CandidateResult& r : jobs) {
      const int at = met_at_of[r.format];
      if (at && r.why_not.empty() && !r.simulated && r.plan.num_gpus() > at) {
        r.pruned_by = "gpus";
        r.why_not = fmt::format("not simulated: plans on {} GPUs{} meet the SLOs and the objective is the fewest GPUs "
                                "(screening, --screen 0 simulates every plan)",
                                at, multi ? " in " + fmts[r.format].words() : "");
        ++more_gpus;
      }
    }
  }
  // When no survivor meets the SLOs the ranking falls back to goodput, where a pruned plan still
  // has its place (a rate-pruned one may have some goodput; with nothing else simulated, even a
  // TPOT-pruned one belongs in the table): the pruned and screened-out plans are simulated after all.
  bool any_meets = false;
  for (const CandidateResult& r : jobs)
    any_meets |= r.simulated && meets_slos(r.metrics, opt.capacity.slo_threshold);
  std::vector<size_t> again;
  for (size_t i = 0; i < jobs.size(); ++i)
    if (!any_meets && !jobs[i].pruned_by.empty()) again.push_back(i);
  for_each_parallel(again.size(), opt.threads, [&](size_t k) {
    CandidateResult& r = jobs[again[k]];
    r.why_not.clear();
    r.pruned_by.clear();
    simulate_job(r);
  });
  if (!again.empty()) screened_out = 0;
  const int by_bounds = tally.pruned() - tally.memory - (again.empty() ? 0 : tally.tpot + tally.rate);
  res.pruned = by_bounds + screened_out + more_gpus + format_known;
  if (by_bounds > 0 || !again.empty())
    res.pruned_summary = tally.summary() + (again.empty() ? std::string()
                                                          : fmt::format("; no survivor met the SLOs, so the {} "
                                                                        "pruned were simulated after all",
                                                                        again.size()));
  if (screened_out + more_gpus + format_known > 0)
    res.pruned_summary += fmt::format(
        "{}screening (first {} of {} requests): {} proved to miss the SLOs, {} on more {} not simulated",
        res.pruned_summary.empty() ? "" : "; ", opt.screen_requests, reqs.size(), screened_out, more_gpus,
        multi ? "GPUs than their format's fewest that meet the SLOs" : fmt::format("than {} GPUs", met_at));
  if (format_known > 0)
    res.pruned_summary += fmt::format(", {} more in formats that cannot be recommended once one of their plans on as "
                                      "many GPUs met the SLOs",
                                      format_known);

  for (CandidateResult& r : jobs) {
    if (!r.simulated) {
      res.rejected.push_back(std::move(r));
      continue;
    }
    r.score = objective_score(r.metrics, opt.objective);
    r.meets_slos = meets_slos(r.metrics, opt.capacity.slo_threshold);
    double busy = 0, comm = 0;
    for (int g : r.plan.all_gpus()) {
      const GpuUsage& u = r.metrics.gpus.at(size_t(g));
      busy += u.compute_s + u.communication_s + u.sync_s;
      comm += u.communication_s;
    }
    r.comm_fraction = busy > 0 ? comm / busy : 0;
    explain_bottleneck(r, topo);
    res.ranked.push_back(std::move(r));
  }
  const bool by_gpus = opt.objective == Objective::Gpus;
  std::stable_sort(res.ranked.begin(), res.ranked.end(), [by_gpus](const CandidateResult& a, const CandidateResult& b) {
    if (by_gpus && a.meets_slos != b.meets_slos) return a.meets_slos;
    if (by_gpus && a.meets_slos && a.plan.num_gpus() != b.plan.num_gpus()) return a.plan.num_gpus() < b.plan.num_gpus();
    if (a.score != b.score) return a.score > b.score;
    if (a.metrics.e2e.p99 != b.metrics.e2e.p99) return a.metrics.e2e.p99 < b.metrics.e2e.p99;
    if (a.plan.num_gpus() != b.plan.num_gpus()) return a.plan.num_gpus() < b.plan.num_gpus();
    return a.plan.name < b.plan.name;
  });

  // Recommendation: walk down to fewer GPUs while the bigger plan does not clearly beat the smaller.
  if (!res.ranked.empty()) {
    res.best_overall = 0;
    int cur = 0;
    std::string why_smaller;
    // `gpus`: the first-ranked plan meeting the SLOs is on the fewest GPUs that do; nothing to walk.
    const bool fewest = by_gpus && res.ranked.front().meets_slos;
    for (; !fewest;) {
      const CandidateResult& big = res.ranked[size_t(cur)];
      int n = big.plan.num_gpus();
      int smaller = -1;
      for (size_t i = 0; i < res.ranked.size(); ++i)
        if (res.ranked[i].plan.num_gpus() < n) {
          smaller = int(i);
          break;
        }
      if (smaller < 0) break;
      const Metrics& a = big.metrics;
      const Metrics& b = res.ranked[size_t(smaller)].metrics;
      double g = opt.min_gain;
      bool unfinished_small = b.completed < b.requests && a.completed == a.requests;
      bool latency = (a.tpot.p50 > 0 && b.tpot.p50 >= a.tpot.p50 * (1 + g)) || b.e2e.p99 >= a.e2e.p99 * (1 + g) ||
                     b.ttft.p50 >= a.ttft.p50 * (1 + g);
      bool capacity = a.goodput_rps >= b.goodput_rps * (1 + g) || a.output_tokens_per_s >= b.output_tokens_per_s * (1 + g);
      if (latency || capacity || unfinished_small) break;
      why_smaller = fmt::format(
          "{} ({} GPUs) would rank first but beats {} ({} GPU{}) by less than {:.0f}% in latency and capacity "
          "(TPOT p50 {:.2f} vs {:.2f} ms, E2E p99 {:.2f} vs {:.2f} s, goodput {:.2f} vs {:.2f} req/s), so the "
          "smaller plan is recommended.",
          big.plan.name, n, res.ranked[size_t(smaller)].plan.name, res.ranked[size_t(smaller)].plan.num_gpus(),
          res.ranked[size_t(smaller)].plan.num_gpus() > 1 ? "s" : "", 100 * g, a.tpot.p50 * 1e3, b.tpot.p50 * 1e3,
          a.e2e.p99, b.e2e.p99, a.goodput_rps, b.goodput_rps);
      cur = smaller;
    }
    res.recommended = cur;
    // Capacity: the recommended plan's, or every ranked plan's (each search is sequential in itself).
    std::vector<size_t> cap_of;
    for (size_t i = 0; i < res.ranked.size(); ++i)
      if (opt.capacity_all || (opt.capacity_recommended && int(i) == cur)) cap_of.push_back(i);
    for_each_parallel(cap_of.size(), opt.threads, [&](size_t k) {
      CandidateResult& c = res.ranked[cap_of[k]];
      SimulateOptions so = opt.sim;
      so.memory = c.memory;
      so.memory_context = mem.context;
      so.progress = false;
      try {
        CapacityOptions co = opt.capacity;
        if (co.screen_requests == 0) co.screen_requests = opt.screen_requests;
        // One plan's search: its probes over the threads (find_capacity_with); several: one each.
        c.capacity = find_capacity_with(c.plan, fmts[c.format].cfg, fmts[c.format].fig, topo, wl, c.metrics, so, co,
                                        cap_of.size() == 1 ? opt.threads : 1);
      } catch (const std::exception& e) {
        c.capacity.searched = true;
        c.capacity.note = std::string("capacity search failed: ") + e.what();
      }
    });
    // What each additional GPU buys: the best-ranked plan at every GPU count.
    for (size_t i = 0; i < res.ranked.size(); ++i) {
      int n = res.ranked[i].plan.num_gpus();
      bool seen = false;
      for (const GpuStep& g : res.gpu_steps) seen |= g.gpus == n;
      if (!seen) res.gpu_steps.push_back({n, int(i)});
    }
    std::sort(res.gpu_steps.begin(), res.gpu_steps.end(), [](const GpuStep& a, const GpuStep& b) { return a.gpus < b.gpus; });
    const CandidateResult& r = res.ranked[size_t(cur)];
    const Metrics& m = r.metrics;
    res.verdict = fmt::format(
        "Recommended: {} on {} GPU{} ({}). At {:.2f} req/s: TTFT p50 {:.1f} ms, TPOT p50 {:.2f} ms, E2E p99 {:.2f} s, "
        "{:.0f} output tok/s, {:.0f}% of requests within the SLOs (goodput {:.2f} req/s).",
        r.plan.name, r.plan.num_gpus(), r.plan.num_gpus() > 1 ? "s" : "",
        (r.plan.strategy.empty() ? "strategy ?" : r.plan.strategy) + (multi ? "; " + fmts[r.format].words() : ""),
        wl.rate_rps, m.ttft.p50 * 1e3, m.tpot.p50 * 1e3, m.e2e.p99, m.output_tokens_per_s, 100 * m.slo_attainment,
        m.goodput_rps);
    if (!why_smaller.empty()) res.verdict += " " + why_smaller;
    const double thr = opt.capacity.slo_threshold;
    if (fewest) {
      res.verdict += fmt::format(" It is the fewest GPUs that meet the SLOs at {:.2f} req/s (>= {:.0f}% of requests "
                                 "within TTFT and TPOT, all finished)",
                                 wl.rate_rps, 100 * thr);
      for (size_t i = 0; i < res.ranked.size(); ++i)
        if (res.ranked[i].plan.num_gpus() < r.plan.num_gpus()) {
          const Metrics& s = res.ranked[i].metrics;
          res.verdict += fmt::format("; the best plan on fewer GPUs, {}, meets them for {:.0f}% ({} of {} finished)",
                                     res.ranked[i].plan.name, 100 * s.slo_attainment, s.completed, s.requests);
          break;
        }
      res.verdict += ".";
    } else if (by_gpus) {
      res.verdict += fmt::format(" No plan meets the SLOs at {:.2f} req/s (>= {:.0f}% of requests within TTFT and TPOT, "
                                 "all finished); ranked by goodput instead.",
                                 wl.rate_rps, 100 * thr);
    }
    if (r.capacity.searched) {
      const Capacity& cap = r.capacity;
      if (cap.rate_rps > 0)
        res.verdict += fmt::format(" Capacity: {:.2f} req/s ({:.0f} output tok/s) within the SLOs", cap.rate_rps,
                                   cap.output_tokens_per_s);
      else
        res.verdict += " Capacity: none found";
      res.verdict += cap.miss_rps > 0 && cap.rate_rps > 0
                         ? fmt::format(" (misses at {:.2f}; bisection to {:.0f}%, {} simulations)", cap.miss_rps,
                                       100 * cap.tolerance, cap.probes)
                         : fmt::format(" ({}, {} simulations)", cap.note, cap.probes);
      res.verdict += ".";
    }
    res.verdict += replicas_or_wider(res.ranked, wl.rate_rps);
    if (!fewest && r.plan.num_gpus() > 1) {
      for (size_t i = 0; i < res.ranked.size(); ++i)
        if (res.ranked[i].plan.num_gpus() < r.plan.num_gpus()) {
          const Metrics& s = res.ranked[i].metrics;
          res.verdict += fmt::format(" It beats the best plan on fewer GPUs, {} (TPOT p50 {:.2f} ms, E2E p99 {:.2f} s, goodput {:.2f} req/s).",
                                     res.ranked[i].plan.name, s.tpot.p50 * 1e3, s.e2e.p99, s.goodput_rps);
          break;
        }
      bool any_smaller = false;
      for (const auto& c : res.ranked) any_smaller |= c.plan.num_gpus() < r.plan.num_gpus();
      if (!any_smaller) res.verdict += " No plan on fewer GPUs fits in memory.";
    }
    if (res.gpu_steps.size() > 1) {
      res.verdict += " What each GPU count buys (its best plan):";
      for (const GpuStep& g : res.gpu_steps) {
        const CandidateResult& c = res.ranked[size_t(g.rank)];
        const Metrics& s = c.metrics;
        res.verdict += fmt::format("\n  {:>2} GPU{}: {:<28} TPOT p50 {:7.2f} ms, E2E p99 {:7.2f} s, goodput {:6.2f} req/s{}",
                                   g.gpus, g.gpus == 1 ? " " : "s",
                                   multi ? c.plan.name + " [" + fmts[c.format].label() + "]" : c.plan.name,
                                   s.tpot.p50 * 1e3, s.e2e.p99, s.goodput_rps,
                                   c.meets_slos ? "" : " (misses the SLOs)");
      }
    }
    if (!r.bottleneck.empty()) {
      res.advice.push_back("Communication-bound: " + r.bottleneck + ".");
      res.advice.push_back("Try: " + r.fix + ".");
    }
    // P2P on vs off for the recommended plan.
    for (const auto& c : res.ranked)
      if (&c != &r && c.format == r.format && base_name(c.plan.name) == base_name(r.plan.name) && c.p2p != r.p2p) {
        const CandidateResult& on = r.p2p ? r : c;
        const CandidateResult& off = r.p2p ? c : r;
        if (on.metrics.tpot.p50 > 0)
          res.advice.push_back(fmt::format("P2P: turning it off changes TPOT p50 by {:+.1f}% and TTFT p50 by {:+.1f}% for {}.",
                                           100 * (off.metrics.tpot.p50 / on.metrics.tpot.p50 - 1),
                                           100 * (off.metrics.ttft.p50 / std::max(on.metrics.ttft.p50, 1e-12) - 1),
                                           base_name(r.plan.name)));
      }
    // All-reduce settings of the recommended plan's shape (--allreduce), against its NCCL variant.
    for (const auto& c : res.ranked)
      if (&c != &r && c.format == r.format && c.p2p && r.p2p && base_name(c.plan.name) == base_name(r.plan.name) &&
          c.plan.allreduce != r.plan.allreduce && c.plan.allreduce == ArSetting::Nccl && c.metrics.tpot.p50 > 0)
        res.advice.push_back(fmt::format("All-reduce: '{}' instead of NCCL changes TPOT p50 by {:+.1f}% and TTFT p50 by "
                                         "{:+.1f}% for {}.",
                                         to_string(r.plan.allreduce), 100 * (r.metrics.tpot.p50 / c.metrics.tpot.p50 - 1),
                                         100 * (r.metrics.ttft.p50 / std::max(c.metrics.ttft.p50, 1e-12) - 1),
                                         base_name(r.plan.name)));
    if (multi) {
      res.verdict += what_formats_buy(res.ranked, fmts, wl.rate_rps);
      if (r.format != reference_format(fmts))
        res.advice.push_back(fmt::format("Formats: peerplan prices speed and memory, not accuracy; check {}'s quality "
                                         "with {} before deploying it.",
                                         fmts[r.format].cfg.name, fmts[r.format].words()));
    }
    if (!res.pruned_summary.empty()) res.advice.push_back("Search: " + res.pruned_summary + ".");
    if (m.completed < m.requests)
      res.advice.push_back(fmt::format("{} of {} requests did not finish: the plan cannot hold them in its KV cache.",
                                       m.requests - m.completed, m.requests));
    else if (m.slo_attainment < 0.9)
      res.advice.push_back(fmt::format("Only {:.0f}% of requests meet the SLOs at {:.2f} req/s: the load is above this "
                                       "plan's capacity; lower the rate (--rate) or add GPUs.",
                                       100 * m.slo_attainment, wl.rate_rps));
  } else {
    // Several formats: the most compressed one's weights (none of the others fits either).
    const SearchFormat& smallest = *std::min_element(fmts.begin(), fmts.end(), [](const SearchFormat& a, const SearchFormat& b) {
      return a.fig.weight_bytes < b.fig.weight_bytes;
    });
    int64_t worst_short = -1;
    std::string why;
    for (const auto& c : res.rejected) {
      if (why.empty()) why = c.why_not;
      for (const GpuMemory& g : c.memory.gpus)
        if (g.used() - g.capacity > worst_short) worst_short = g.used() - g.capacity;
    }
    res.verdict = fmt::format(
        "Nothing fits: none of the {} candidate plan{} for {} ({:.1f} GB of weights as stored{}) fits on {} ({} GPU{} of {:.1f} GB). "
        "{} Options: a machine with more or larger GPUs, a smaller model, or a workload with a shorter context "
        "(this one needs up to {} tokens per sequence).",
        jobs.size(), jobs.size() == 1 ? "" : "s", fmts[0].cfg.name, double(smallest.fig.weight_bytes) / 1e9,
        multi ? " in " + smallest.weights + ", the most compressed format searched" : "", topo.machine().name,
        topo.gpu_count(), topo.gpu_count() == 1 ? "" : "s",
        topo.gpu_count() ? double(topo.machine().gpus[0].memory_bytes) / 1e9 : 0.0,
        why.empty() ? std::string("No strategy proposed a plan.") : "For example: " + why, wl.max_context());
  }
  if (!res.ranked.empty()) {
    res.provenance = res.ranked.front().metrics.provenance;
    for (const char* k : {"p2p", "boundary_modes", "cost_sources", "scheduler", "distinct_iteration_shapes"})
      res.provenance.erase(k);
  } else {
    CostModel cm(topo, opt.sim.cost);
    res.provenance = cm.provenance();
  }
  res.provenance["requests"] = wl.num_requests;
  res.provenance["seed"] = wl.seed;
  res.provenance["candidates"] = jobs.size();
  res.provenance["pruned"] = res.pruned;
  if (multi) {
    res.provenance["formats"] = nlohmann::json::array();
    for (const SearchFormat& f : fmts) res.provenance["formats"].push_back(f.label());
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace peerplan
