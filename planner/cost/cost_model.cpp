#include "planner/cost/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "planner/core/error.hpp"
#include "planner/cost/attention_window.hpp"
#include "planner/cost/collective_cost.hpp"
#include "planner/cost/compute_cost.hpp"
#include "planner/cost/elementwise_cost.hpp"
#include "planner/cost/grouped_gemm_cost.hpp"
#include "planner/cost/peer_allreduce_cost.hpp"
#include "planner/cost/cross_host_collective.hpp"
#include "planner/cost/quant_cost.hpp"
#include "planner/cost/sm_slots.hpp"
#include "planner/cost/transfer_cost.hpp"
#include "planner/topology/executor_launch.hpp"

namespace peerplan {

namespace {

// One of the profile's launch figures of `gpu` (measurements.extra.launch.gpuN.<key>,
// profiler/measure/launch_overhead.cpp), NaN when the profile has none.
double launch_figure(const Machine& m, int gpu, const char* key) {
  if (!m.measurements) return std::nan("");
  const nlohmann::json& x = m.measurements->extra;
  const std::string g = "gpu" + std::to_string(gpu);
  if (!x.contains("launch") || !x["launch"].is_object() || !x["launch"].contains(g) || !x["launch"][g].is_object())
    return std::nan("");
  const nlohmann::json& l = x["launch"][g];
  return l.contains(key) && l[key].is_number() ? l[key].get<double>() : std::nan("");
}

}  // namespace

CostModel::CostModel(const Topology& topo, CostOptions opt) : topo_(topo), opt_(opt) {
  const Machine& m = topo_.machine();
  const nlohmann::json* o = nullptr;
  if (m.meta.contains("profile") && m.meta["profile"].is_object() && m.meta["profile"].contains("options") &&
      m.meta["profile"]["options"].is_object())
    o = &m.meta["profile"]["options"];
  const bool paced = o && o->contains("duty") && (*o)["duty"].is_number() && (*o)["duty"].get<double>() < 1;
  boost_ = paced && m.measurements && m.measurements->power_throttle.has_value();
  // Read once: the simulator asks at every join, and for the floor at every op, of every priced shape.
  for (int gpu = 0; gpu < topo_.gpu_count(); ++gpu) {
    const double us = launch_figure(m, gpu, "fork_join_us");
    fork_join_.push_back(us > 0 && us < 1e3 ? us * 1e-6 : 0);  // a hostile or broken figure prices nothing
    min_kernel_.push_back(read_min_kernel_s(gpu));
  }
  executor_pdl_ = executor_launch(m) == "pdl";
}

const PowerThrottle* CostModel::serving_throttle() const {
  return boost_ ? &*topo_.machine().measurements->power_throttle : nullptr;
}

double CostModel::launch_s(bool graph_launch) const {
  if (graph_launch) return opt_.graph_launch_s;
  const Machine& m = topo_.machine();
  if (m.measurements && m.measurements->launch_overhead_s > 0) return m.measurements->launch_overhead_s;
  return opt_.eager_launch_s;
}

double CostModel::min_kernel_s(int gpu) const {
  return gpu >= 0 && size_t(gpu) < min_kernel_.size() ? min_kernel_[size_t(gpu)] : read_min_kernel_s(gpu);
}

double CostModel::read_min_kernel_s(int gpu) const {
  if (!(opt_.min_kernel_s > 0)) return 0;  // floor switched off (closed-form tests)
  const Machine& m = topo_.machine();
  // profiler/ records the GPU-side spacing of back-to-back empty kernels per GPU here.
  const double us = launch_figure(m, gpu, "gpu_gap_us");
  if (us > 0 && us < 1e3) return us * 1e-6;
  return opt_.min_kernel_s;
}

double CostModel::gemv_pair_progress(int /*gpu*/) const {
  return kGemvPairProgress;  // the profile's gemv_pair_progress is recorded, not priced yet
}

double CostModel::fork_join_s(int gpu) const {
  return gpu >= 0 && size_t(gpu) < fork_join_.size() ? fork_join_[size_t(gpu)] : 0;
}

double CostModel::peak_flops(int gpu) const {
  const GpuSpec& g = topo_.machine().gpus.at(size_t(gpu));
  if (!(g.peak_bf16_tflops > 0))
    throw InputError(topo_.machine().source_file, "/gpus/" + std::to_string(gpu) + "/peak_bf16_tflops",
                     "a positive dense bf16 peak in TFLOP/s (e.g. 989 for H100 SXM): needed to price GEMMs this "
                     "machine has no measured table for");
  return g.peak_bf16_tflops * 1e12;
}

double CostModel::hbm_Bps_if_known(int gpu, bool* measured) const {
  const Machine& m = topo_.machine();
  if (m.measurements && size_t(gpu) < m.measurements->hbm_gbps.size() && m.measurements->hbm_gbps[size_t(gpu)] > 0) {
    *measured = true;
    return m.measurements->hbm_gbps[size_t(gpu)] * 1e9;
  }
  *measured = false;
  if (gpu < 0 || size_t(gpu) >= m.gpus.size() || !(m.gpus[size_t(gpu)].hbm_gbps > 0)) return 0;
  return m.gpus[size_t(gpu)].hbm_gbps * 1e9 * opt_.hbm_efficiency;
}

double CostModel::sm_stream_Bps(int gpu) const {
  const Machine& m = topo_.machine();
  if (gpu < 0 || !m.measurements) return 0;
  if (sm_stream_.size() <= size_t(gpu)) sm_stream_.resize(size_t(gpu) + 1, -1);
  double& best = sm_stream_[size_t(gpu)];
  if (best >= 0) return best;
  // This GPU's rows, else any GPU's (a profile times its GEMMs on one GPU of the host's one SKU).
  auto scan = [&](bool this_gpu) {
    double b = 0;
    for (const GemmTime& r : m.measurements->gemms)
      if ((!this_gpu || r.gpu == gpu) && r.dtype == "bf16" && r.batch == 1 && r.m >= 1 && r.m <= 2 && r.n > 0 &&
          r.k > 0 && r.time.median > 0) {
        const double bps = double(r.n) * double(r.k) * 2.0 / r.time.median;
        if (std::isfinite(bps)) b = std::max(b, bps);  // (a hostile profile's 1e-300 s row adds nothing)
      }
    return b;
  };
  best = scan(true);
  if (best == 0) best = scan(false);
  return best;
}

double CostModel::hbm_Bps(int gpu, bool* measured) const {
  const double bw = hbm_Bps_if_known(gpu, measured);
  if (bw > 0) return bw;
  const Machine& m = topo_.machine();
  if (gpu < 0 || size_t(gpu) >= m.gpus.size())
    throw InputError(m.source_file, "/gpus", "an entry for GPU " + std::to_string(gpu) + " (the file lists " +
                                                 std::to_string(m.gpus.size()) + ")");
  throw InputError(m.source_file, "/gpus/" + std::to_string(gpu) + "/hbm_gbps",
                   "a positive HBM bandwidth in GB/s (e.g. 4800 for H200): needed to price memory-bound ops");
}

const FittedCompute* CostModel::fitted() const {
  if (fitted_built_) return fitted_.get();
  fitted_built_ = true;
  const Machine& m = topo_.machine();
  if (!opt_.fitted_fallback || !m.measurements || (m.measurements->gemms.empty() && m.measurements->attention.empty()))
    return nullptr;
  // The normaliser is GPU 0's roofline (peak 0 if the file lacks it: the fit then uses bytes only).
  bool measured = false;
  double peak = m.gpus.empty() ? 0 : m.gpus[0].peak_bf16_tflops * 1e12;
  double bw = m.gpus.empty() ? 0 : hbm_Bps(0, &measured);
  fitted_ = std::make_unique<FittedCompute>(*m.measurements, std::max(peak, 0.0), bw);
  return fitted_.get();
}

OpCost CostModel::price_compute(const Op& op) const {
  OpCost c;
  const int gpu = op.gpus.empty() ? 0 : op.gpus[0];
  const Measurements* meas = topo_.machine().measurements ? &*topo_.machine().measurements : nullptr;
  if (op.kind == OpKind::Gemm && op.batch_count > 1) {
    // One strided-batched call (MLA's absorbed products): its own rows when the profile timed it.
    if (meas)
      if (auto t = gemm_from_table(meas->gemms, gpu, op.m, op.n, op.k, gemm_table_dtype(op.wdtype), op.batch_count)) {
        c.seconds = t->seconds;
        c.source = t->source;
        return c;
      }
    // Else a model: the call takes at least one product's time and at least that of one GEMM of the
    // same FLOPs and weight bytes ([m, k] x [k, n * batch]), and at most batch_count separate
    // products. Priced as that loop, DeepSeek-V2-Lite's decode (2 x 16 products of ~5 us a layer, one
    // call each in the executor) was predicted 1.2-1.7x its GPU time (H200, session 8 D).
    Op one = op;
    one.batch_count = 1;
    one.flops = op.flops / double(op.batch_count);
    one.mem_bytes = op.mem_bytes / double(op.batch_count);
    const OpCost product = price_compute(one);
    Op wide = op;
    wide.batch_count = 1;
    wide.n = op.n * op.batch_count;
    const OpCost whole = price_compute(wide);
    c.seconds = std::min(std::max(product.seconds, whole.seconds), product.seconds * double(op.batch_count));
    c.source = weaker(weaker(product.source, whole.source), CostSource::Fitted);
    return c;
  }
  if (op.kind == OpKind::Gemm && meas) {
    if (auto t = gemm_from_table(meas->gemms, gpu, op.m, op.n, op.k, gemm_table_dtype(op.wdtype))) {
      c.seconds = t->seconds;  // batch_count is 1 here (batched calls return above)
      c.source = t->source;
      return c;
    }
  }
  if (op.kind == OpKind::GroupedGemm) {  // routed experts: planner/cost/grouped_gemm_cost.hpp
    if (meas) {
      bool measured_bw = false;
      const double bw = hbm_Bps_if_known(gpu, &measured_bw);
      const double floor_s = bw > 0 ? double(op.n) * double(op.k) * dtype_bits(op.wdtype) / 8 / bw : 0;  // one expert's weights
      const double min_gflop = meas->grouped_cublas_min_gflop.value_or(kMoeCublasMinGflop);
      if (auto t = cublas_experts_from_table(meas->expert_gemms, meas->grouped_gemms, gpu, op, min_gflop)) {
        c.seconds = t->seconds;
        c.source = t->source;
        return c;
      }
      if (auto t = grouped_gemm_from_table(meas->grouped_gemms, gpu, op, min_gflop, floor_s)) {
        c.seconds = t->seconds;
        c.source = t->source;
        return c;
      }
    }
    if (const FittedCompute* f = fitted()) {
      bool all = true;
      auto one = [&](double rows) {
        std::optional<double> t = f->gemm_s(std::max<int64_t>(1, std::llround(rows)), op.n, op.k);
        all = all && t.has_value();
        return t.value_or(0.0);
      };
      const double t = grouped_time(one, op.m, op.batch_count, op.group_max_rows);
      if (all) {
        c.seconds = t;
        c.source = CostSource::Fitted;
        return c;
      }
    }
  }
  if (op.kind == OpKind::Elementwise && meas) {  // the executor's kernel timed in a graph (elementwise_cost.hpp)
    if (auto t = elementwise_from_table(meas->elementwise, gpu, op)) {
      c.seconds = t->seconds;
      c.source = t->source;
      return c;
    }
  }
  if (op.kind == OpKind::Attention && meas) {
    // The wave model with boost tables only: with back-to-back tables the attended-pairs rule's low
    // whole-prompt prices offset their GEMM over-price (docs/attention.md, "Held-back rows").
    const int sms = boost_ ? topo_.machine().gpus.at(size_t(gpu)).sm_count : 0;
    if (auto t = attention_from_table(meas->attention, gpu, op, sms)) {
      c.seconds = t->seconds;
      c.source = t->source;
      return c;
    }
  }
  // A quantized weight format or an FP8 KV cache the profile has no rows of: the bf16 price of the
  // same shape scaled by the roofline ratio (quant_cost.hpp); at best Fitted, as it is a model.
  if ((op.kind == OpKind::Gemm || op.kind == OpKind::Attention) && is_quantized_op(op)) {
    OpCost b = price_compute(bf16_equivalent(op));
    bool hbm_measured = false;
    const GpuSpec& spec = topo_.machine().gpus.at(size_t(gpu));
    const double peak = spec.peak_bf16_tflops > 0 ? spec.peak_bf16_tflops * 1e12 : 0;
    b.seconds *= quant_roofline_ratio(op, peak, hbm_Bps(gpu, &hbm_measured), spec.compute_capability);
    b.source = weaker(b.source, CostSource::Fitted);
    return b;
  }
  if ((op.kind == OpKind::Gemm || op.kind == OpKind::Attention) && fitted()) {
    std::optional<double> t = op.kind == OpKind::Gemm ? fitted()->gemm_s(op.m, op.n, op.k)
                                                         : fitted_attention_windowed_s(*fitted(), op);
    if (t) {
      c.seconds = *t;
      c.source = CostSource::Fitted;
      return c;
    }
  }
  bool hbm_measured = false;
  double bw = hbm_Bps(gpu, &hbm_measured);
  double eff = op.kind == OpKind::Attention ? opt_.attention_efficiency : opt_.gemm_efficiency;
  double flops_rate = op.flops > 0 ? peak_flops(gpu) * eff : 0;
  c.seconds = roofline_s(op.flops, op.mem_bytes, flops_rate, bw);
  bool compute_bound = flops_rate > 0 && op.flops / flops_rate >= op.mem_bytes / bw;
  c.source = (hbm_measured && !compute_bound) ? CostSource::Derived : CostSource::Nominal;
  return c;
}

OpCost CostModel::price_collective_op(const Op& op, bool graph_launch) const {
  OpCost c;
  const Machine& m = topo_.machine();
  if (op.kind == OpKind::AllReduce && op.allreduce != ArSetting::Nccl) {
    // The engine's rule (or the plan's "custom") may run a peer-memory kernel at this size.
    ArChoice ch = choose_allreduce(op.allreduce, allreduce_group(topo_, op.gpus, op.p2p), op.bytes);
    if (ch.impl != ArImpl::Nccl) {
      CollectivePrice p = price_peer_allreduce(ch.impl, op.gpus, double(op.bytes), topo_,
                                               m.measurements ? &*m.measurements : nullptr, opt_,
                                               !m.measurements || m.measurements->transfers.empty(), graph_launch);
      c.seconds = p.seconds;
      c.source = p.source;
      c.edge_bytes = std::move(p.edge_bytes);
      c.allreduce_impl = ch.impl;
      c.launch_s = p.graph_timed ? 0 : launch_s(graph_launch);
      return c;
    }
  }
  const std::vector<CurvePoint>* pts = nullptr;
  bool graph_timed = false;
  if (m.measurements) {
    const std::string name = coll_op_name(coll_op(op.kind));
    if (const CollectiveCurve* cc = graph_or_stream_curve(m.measurements->find_collective(name, op.gpus, op.p2p, true),
                                                          m.measurements->find_collective(name, op.gpus, op.p2p),
                                                          graph_launch, double(op.bytes))) {
      pts = &cc->points;
      graph_timed = cc->graph;
    }
  }
  bool nominal_graph = !m.measurements || m.measurements->transfers.empty();
  // A group spanning hosts without a curve of its own: NCCL's hierarchical algorithms.
  std::optional<CollectivePrice> h;
  if (!pts)
    h = price_cross_host_collective(op.kind, op.gpus, double(op.bytes), op.p2p, topo_,
                                    m.measurements ? &*m.measurements : nullptr, opt_, nominal_graph);
  CollectivePrice p = h ? std::move(*h)
                        : price_collective(op.kind, op.gpus, double(op.bytes), op.p2p, topo_, pts, opt_, nominal_graph);
  c.seconds = p.seconds;
  c.source = p.source;
  c.edge_bytes = std::move(p.edge_bytes);
  c.inferred = std::move(p.inferred);
  // A curve timed in a graph already holds its in-graph gap (as the compute tables do, price()).
  c.launch_s = graph_timed ? 0 : launch_s(graph_launch);
  return c;
}

PairTransfer CostModel::transfer(int src, int dst, TransferMode mode, double bytes) const {
  return price_pair_transfer(topo_, src, dst, mode, bytes, opt_);
}

OpCost CostModel::price_send(const Op& op) const {
  OpCost c;
  if (op.gpus.size() != 2)
    throw RuntimeError("send op '" + op.name + "' has " + std::to_string(op.gpus.size()) + " GPUs; expected {src, dst}");
  const int src = op.gpus[0], dst = op.gpus[1];
  PairTransfer t = transfer(src, dst, op.mode, double(op.bytes));
  if (!t.route.valid)
    throw RuntimeError("send '" + op.name + "' gpu" + std::to_string(src) + " -> gpu" + std::to_string(dst) + " in mode " +
                       to_string(op.mode) + " has no route: " + t.route.why_invalid);
  c.seconds = t.price.seconds;
  c.alpha_s = t.price.alpha_s;
  c.rate_Bps = t.price.rate_Bps;
  c.source = t.price.source;
  c.edges = std::move(t.route.edges);
  return c;
}

const OpCost& CostModel::price(const Op& op, bool graph_launch) const {
  if (auto it = cache_.find(MemoProbe{&op, graph_launch}); it != cache_.end()) return it->second;

  OpCost c;
  if (op.kind == OpKind::GroupedGemm && op.group_share != 1.0 && op.group_share > 0) {
    // One of a reduced layer's routing loads (op_graph.hpp group_share): the whole op's price, weighted.
    Op whole = op;
    whole.group_share = 1.0;
    whole.flops /= op.group_share, whole.mem_bytes /= op.group_share;
    c = price(whole, graph_launch);
    c.seconds *= op.group_share, c.launch_s *= op.group_share;
  } else if (is_compute(op.kind)) {
    c = price_compute(op);
    c.seconds = std::max(c.seconds, min_kernel_s(op.gpus.empty() ? 0 : op.gpus[0]));
    c.launch_s = launch_s(graph_launch);
    // Inside a CUDA graph, a kernel timed back to back (GEMM and attention tables: region / reps)
    // already holds one inter-kernel gap; adding the graph gap again over-priced 8B decode steps
    // by ~0.24 ms (docs/validation/runs/2026-12-01-kernels-ab/). Roofline-priced ops keep it.
    // Fitted prices rest on the same back-to-back timings, so they hold the gap too.
    if (graph_launch && (c.source == CostSource::Measured || c.source == CostSource::Interpolated ||
                         c.source == CostSource::Fitted))
      c.launch_s = 0;
  } else if (is_collective(op.kind)) {
    c = price_collective_op(op, graph_launch);
  } else {
    c = price_send(op);
  }
  MemoKey key{op, graph_launch};
  key.op.name.clear();  // placement fields are not part of the key: keep the stored copy small
  key.op.deps.clear();
  return cache_.emplace(std::move(key), std::move(c)).first->second;
}

nlohmann::json CostModel::provenance() const {
  const Machine& m = topo_.machine();
  nlohmann::json j;
  j["machine"] = m.name;
  j["machine_file"] = m.source_file;
  j["origin"] = m.origin;
  j["host"] = m.host;
  j["date"] = m.date;
  if (m.measurements) {
    const Measurements& s = *m.measurements;
    j["measured"] = {{"transfer_curves", s.transfers.size()},
                     {"collective_curves", s.collectives.size()},
                     {"gemm_shapes", s.gemms.size()},
                     {"attention_shapes", s.attention.size()},
                     {"hbm_gbps", !s.hbm_gbps.empty()},
                     {"launch_overhead_us", s.launch_overhead_s * 1e6}};
    if (!s.grouped_gemms.empty()) j["measured"]["grouped_gemm_points"] = s.grouped_gemms.size();
    if (boost_)  // absent for back-to-back profiles: their outputs stay as they were
      j["power"] = {{"tables", "boost clock (profile --duty < 1)"},
                    {"throttle_onset_ms", s.power_throttle->onset_s * 1e3},
                    {"throttle_factor", s.power_throttle->factor},
                    {"throttle_by_class", !s.power_throttle->mixes.empty()},
                    {"rule", s.power_throttle->mixes.empty()
                                 ? "prefill iterations past the onset of continuous work run factor x slower; idle refills "
                                   "the budget (docs/simulator.md, Power)"
                                 : "prefill iterations past the onset of continuous work run slower, each class (GEMM, "
                                   "attention, elementwise) by its factor at the iteration's attention share, between "
                                   "the measured mixes; idle refills the budget (docs/simulator.md, Power)"}};
    j["meta"] = s.meta;
    if (!fused_add_norm(m))  // compiler.cpp: such a profile keeps the earlier executor's two residual-add kernels
      j["norms"] = "residual adds as kernels of their own (a profile from before the fused add + RMSNorm: re-profile)";
  } else {
    j["measured"] = nullptr;
  }
  // Inferred collectives: one entry per op and group whatever sizes were priced (a part's source
  // varies with the size, so it is left out), sorted so the output does not depend on the memo.
  std::map<std::pair<std::string, std::vector<int>>, nlohmann::json> inferred;
  for (const auto& [key, c] : cache_)
    if (c.inferred.is_object()) {
      nlohmann::json e = c.inferred;
      for (auto& part : e["parts"]) part.erase("source");
      inferred.emplace(std::make_pair(e.value("op", std::string()), e["gpus"].get<std::vector<int>>()), e);
    }
  for (auto& [k, e] : inferred) j["inferred_collectives"].push_back(e);  // absent when none
  // Peer-memory all-reduce: how many priced shapes ran each kernel, and whether curves backed them.
  nlohmann::json peer = nlohmann::json::object();
  for (const auto& [key, c] : cache_)
    if (c.allreduce_impl != ArImpl::Nccl) {
      nlohmann::json& e = peer[to_string(c.allreduce_impl)];
      if (!e.is_object()) e = {{"shapes", 0}};
      e["shapes"] = e.value("shapes", 0) + 1;
      const bool curve = c.source == CostSource::Measured || c.source == CostSource::Interpolated ||
                         c.source == CostSource::Extrapolated;
      if (!curve) e["modelled"] = e.value("modelled", 0) + 1;
    }
  if (!peer.empty()) {
    peer["model"] = "one-shot base + 2 L + S / r, two-shot base + 3 L + 2 S/n / r (planner/cost/peer_allreduce_cost.hpp)";
    peer["base_us"] = opt_.peer_allreduce_base_s * 1e6;  // the model's assumption (cost_options.hpp)
    peer["measured_curves"] = m.measurements ? m.measurements->peer_allreduce.size() : 0;
    j["peer_allreduce"] = peer;
  }
  bool any_fitted = false;  // only then: outputs priced without the fit keep their provenance
  for (const auto& [key, c] : cache_) any_fitted = any_fitted || c.source == CostSource::Fitted;
  if (const FittedCompute* f = any_fitted ? fitted() : nullptr)
    j["fitted_fallback"] = {{"gemm_shapes_fitted_from", f->gemm_shape_count()},
                            {"attention_points_fitted_from", f->attention_point_count()},
                            {"rule", "efficiency of the 3 nearest measured shapes (planner/cost/fitted_compute.hpp)"},
                            // Mean |error| of each measured shape priced with it left out: the fitted band.
                            {"band_gemm", f->gemm_band()},
                            {"band_attention", f->attention_band()}};
  j["assumptions"] = {{"gemm_efficiency", opt_.gemm_efficiency},
                      {"attention_efficiency", opt_.attention_efficiency},
                      {"hbm_efficiency", opt_.hbm_efficiency},
                      {"link_efficiency", opt_.link_efficiency},
                      {"copy_setup_us", opt_.copy_setup_s * 1e6},
                      {"host_stage_setup_us", opt_.host_stage_setup_s * 1e6},
                      {"nccl_base_latency_us", opt_.nccl_base_latency_s * 1e6},
                      {"nccl_step_latency_us", opt_.nccl_step_latency_s * 1e6},
                      {"graph_launch_us", opt_.graph_launch_s * 1e6},
                      {"eager_launch_us", opt_.eager_launch_s * 1e6},
                      {"min_kernel_us", opt_.min_kernel_s * 1e6},
                      {"iteration_overhead_us", opt_.iteration_overhead_s * 1e6}};
  return j;
}

}  // namespace peerplan
