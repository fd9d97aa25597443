#include "planner/sim/iteration_cost.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>

#include <malloc.h>

#include "planner/compile/compiler.hpp"
#include "planner/compile/graph_batch.hpp"
#include "planner/cost/gemv_prefetch.hpp"
#include "planner/cost/sm_slots.hpp"
#include "planner/core/error.hpp"

namespace peerplan {

double IterationCost::total_s() const {
  double t = 0;
  for (double s : stage_s) t += s;
  return t;
}

void IterationCost::index_used() {
  used_gpus.clear();
  used_edges.clear();
  for (size_t g = 0; g < gpu.size(); ++g)
    if (gpu[g].compute != 0 || gpu[g].communication != 0 || gpu[g].sync != 0) used_gpus.push_back(int(g));
  for (size_t e = 0; e < edge_bytes.size(); ++e)
    if (edge_bytes[e] != 0 || edge_busy_s[e] != 0) used_edges.push_back(int(e));
  indexed = true;
}

int64_t quantize_count(int64_t v, int per_octave) {
  if (per_octave <= 0 || v <= 2 * int64_t(per_octave)) return v;
  double r = std::round(double(per_octave) * std::log2(double(v)));
  return std::llround(std::exp2(r / double(per_octave)));
}

std::array<int64_t, 8> price_key(const BatchShape& q) {
  return {q.prefill_seqs,   q.prefill_tokens,     q.prefill_context,    q.decode_seqs,
          q.decode_context, q.decode_context_min, q.decode_context_max, q.decode_real_seqs};
}

BatchShape quantize_shape(const BatchShape& s, int q) {
  // Dimensions that decide most of the time (GEMM rows: prefill tokens, decode sequences) keep
  // the full grid; those that only shape attention get a coarser one. Mixed (chunked-prefill)
  // iterations are few but nearly all distinct, so their minor dimensions are coarser still.
  auto coarse = [q](int div) { return q <= 0 ? 0 : std::max(2, q / div); };
  const bool mixed = s.prefill_tokens > 0 && s.decode_seqs > 0;
  BatchShape o;
  o.prefill_seqs = quantize_count(s.prefill_seqs, coarse(mixed ? 8 : 4));
  // Prefill tokens exact: they set a prefill's GEMM / grouped-GEMM time nearly linearly, and a request's
  // TTFT rides on one or two prefill iterations, so the grid (mixed iterations: 8 points per octave,
  // +-4.4 %) did not cancel in TTFT p50. Mixtral-8x7B long prompts (H200, session 10 B, 11 A, 11 D):
  // 3299 tokens priced as 3444 (+19.6 ms of 327), TTFT p50 +4.2 / +8.0 / +5.7 % as the GPU runs predicted
  // them, +2.1 / +4.3 / +3.3 % re-predicted with exact tokens (found by a helper). Interpolating between
  // the two grid points instead was as good on average but not on short Azure prompts (GEMM time is not
  // linear in M there). Cost: each distinct token count is a shape to compile (prefill iterations are a
  // few % of all): `plan` of Mixtral on 8 x H100 2.5 -> 3.7 s.
  o.prefill_tokens = s.prefill_tokens;
  o.prefill_context = quantize_count(s.prefill_context, coarse(mixed ? 4 : 2));
  o.decode_seqs = quantize_count(s.decode_seqs, mixed ? coarse(4) : q);
  o.decode_context = quantize_count(s.decode_context, coarse(mixed ? 8 : 2));
  // The real sequences' spread (decode_split.hpp prices it), on the full grid: min <= max kept, a
  // uniform batch stays uniform. (decode_context may be a padded batch's diluted mean: the real
  // mean follows from it and the real count, which is exact: it is small.)
  if (s.decode_context_max > 0 && o.decode_seqs > 0) {
    o.decode_context_max = quantize_count(s.decode_context_max, coarse(mixed ? 8 : 1));
    o.decode_context_min = s.decode_context_min == s.decode_context_max
                               ? o.decode_context_max
                               : std::min(o.decode_context_max, quantize_count(s.decode_context_min, coarse(mixed ? 8 : 1)));
    o.decode_real_seqs = std::min(s.decode_real_seqs, o.decode_seqs);
  }
  // Keep the shape consistent: at least one token per prefilling sequence, context >= chunk.
  if (o.prefill_seqs > 0) {
    o.prefill_tokens = std::max(o.prefill_tokens, o.prefill_seqs);
    o.prefill_context = std::max(o.prefill_context, (o.prefill_tokens + o.prefill_seqs - 1) / o.prefill_seqs);
  }
  return o;
}

namespace {

// Whether the op after ops[i] on its GPU and stream (in the slice's order, which is the executor's launch order on
// a stream) is a PDL dense GEMV, which prefetches its weights under ops[i] (cost/gemv_prefetch.hpp).
bool next_on_stream_prefetches(const OpGraph& g, const int* ops, size_t n, size_t i, const CostModel& cost) {
  const Op& op = g.ops[size_t(ops[i])];
  for (size_t j = i + 1; j < n; ++j) {
    const Op& nx = g.ops[size_t(ops[j])];
    if (nx.kind == OpKind::Send) continue;  // copy engines: not on the compute streams
    const bool same_gpu = std::find(nx.gpus.begin(), nx.gpus.end(), op.gpus.at(0)) != nx.gpus.end();
    const int stream = is_compute(nx.kind) ? nx.stream : 0;  // collectives run on the compute stream
    if (!same_gpu || stream != op.stream) continue;
    return is_compute(nx.kind) && is_pdl_dense_gemv(nx, cost.executor_pdl());
  }
  return false;
}

// tasks_for_ops into `tasks`, whose slots (and their vectors' storage) are reused; `local` is
// scratch (each op's index in `ops`, -1 for ops outside them), `two_streams` too (by GPU: the slice
// has ops on its auxiliary stream); `capacity` is sim_capacity's.
void tasks_into(std::vector<SimTask>& tasks, std::vector<int>& local, std::vector<char>& two_streams, const OpGraph& g,
                const int* ops, size_t n, const CostModel& cost, bool graph_launch, const std::vector<double>& capacity,
                std::vector<const OpCost*>* costs) {
  local.assign(g.ops.size(), -1);
  two_streams.clear();
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops[size_t(ops[i])];
    local[size_t(ops[i])] = int(i);
    if (op.stream == 1 && is_compute(op.kind)) {
      const size_t gpu = size_t(op.gpus.at(0));
      if (two_streams.size() <= gpu) two_streams.resize(gpu + 1, 0);
      two_streams[gpu] = 1;
    }
  }
  const int hbm0 = cost.topology().edge_count();
  if (tasks.size() < n) tasks.resize(n);
  if (costs) costs->assign(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops[size_t(ops[i])];
    const OpCost& c = cost.price(op, graph_launch);
    SimTask& t = tasks[i];
    {  // a fresh task but for its vectors' storage
      std::vector<int> st = std::move(t.streams), dp = std::move(t.deps), ed = std::move(t.edges), gp = std::move(t.gpus);
      std::vector<double> ew = std::move(t.edge_weights);
      t = SimTask{};
      t.streams = std::move(st), t.deps = std::move(dp), t.edges = std::move(ed), t.gpus = std::move(gp);
      t.edge_weights = std::move(ew);
      t.streams.clear(), t.deps.clear(), t.edges.clear(), t.gpus.clear(), t.edge_weights.clear();
    }
    for (int d : op.deps)
      if (d >= 0 && size_t(d) < local.size() && local[size_t(d)] >= 0) t.deps.push_back(local[size_t(d)]);
    t.gap = c.launch_s;
    if (is_compute(op.kind)) {
      const int gpu = op.gpus.at(0);
      // A main-stream op waiting on the branch (the join) starts on a full dependency, not under its
      // predecessor's tail: the fork and join's measured cost (session 35: 0.94 us in a PDL graph of empty kernels,
      // 0.8-1.4 us a layer in Qwen1.5-MoE's decode steps on an H100).
      if (op.stream == 0 && size_t(gpu) < two_streams.size() && two_streams[size_t(gpu)])  // only a GPU with a branch
        for (int d : op.deps)
          if (d >= 0 && size_t(d) < g.ops.size() && local[size_t(d)] >= 0 && g.ops[size_t(d)].stream == 1) {
            t.gap += cost.fork_join_s(gpu);
            break;
          }
      t.streams.push_back(op.stream == 1 ? aux_stream(gpu) : compute_stream(gpu));
      t.duration = c.seconds;
      if (op.kind == OpKind::Elementwise && cost.executor_pdl() && next_on_stream_prefetches(g, ops, n, i, cost))
        t.duration = before_prefetching_gemv_s(c.seconds, cost.min_kernel_s(gpu));
      t.category = TaskCategory::Compute;
      t.gpus.push_back(gpu);
      const size_t hbm = size_t(hbm0 + gpu);
      if (size_t(gpu) < two_streams.size() && two_streams[size_t(gpu)] && hbm < capacity.size() &&
          capacity[hbm] > 0 && op.mem_bytes > 0 && t.duration > 0) {
        t.flow = true;
        t.bytes = op.mem_bytes;
        t.rate_cap = op.mem_bytes / t.duration;
        t.edges.push_back(int(hbm));
        t.duration = 0;
        // A kernel that fills the SMs also takes its share of them (cost/sm_slots.hpp): all of them at its solo rate.
        const size_t slots = size_t(hbm0 + cost.topology().gpu_count() + gpu);
        const double per_byte = 1.0 / t.rate_cap;  // finite and > 0 unless a hostile price overflowed
        if (slots < capacity.size() && capacity[slots] > 0 && per_byte > 0 && std::isfinite(per_byte) &&
            fills_sms(op, cost.executor_pdl())) {
          t.edges.push_back(int(slots));
          t.edge_weights.assign({1.0, per_byte});
        }
      }
    } else if (is_collective(op.kind)) {
      for (int gpu : op.gpus) t.streams.push_back(compute_stream(gpu));
      t.duration = c.seconds;
      t.category = TaskCategory::Communication;
      t.gpus.assign(op.gpus.begin(), op.gpus.end());
    } else {  // Send: a flow on the source's copy engine
      t.streams.push_back(copy_stream(op.gpus.at(0)));
      t.flow = !c.edges.empty();
      t.bytes = double(op.bytes);
      t.alpha = c.alpha_s;
      t.rate_cap = c.rate_Bps;
      t.edges.assign(c.edges.begin(), c.edges.end());
      t.duration = t.flow ? 0 : c.seconds;
      t.category = TaskCategory::Communication;
      t.gpus.assign(op.gpus.begin(), op.gpus.end());
    }
    if (costs) (*costs)[i] = &c;
  }
}

}  // namespace

double stream_hbm_capacity_Bps(const CostModel& cost, int gpu) {
  // SM kernels on two streams share what SM reads reach, which the copy-engine rate understates (session 34:
  // Qwen1.5-MoE's two-stream decode at 4-8 sequences priced 3-3.4 % long on it, chat TPOT p50 +5.0 to +7.3 %).
  bool measured = false;
  return std::max(cost.hbm_Bps_if_known(gpu, &measured), cost.sm_stream_Bps(gpu));
}

std::vector<double> sim_capacity(const CostModel& cost) {
  const Topology& topo = cost.topology();
  std::vector<double> cap(size_t(topo.edge_count() + 2 * topo.gpu_count()), 0.0);
  for (int e = 0; e < topo.edge_count(); ++e) cap[size_t(e)] = topo.edge_props(e).capacity_Bps;
  for (int gpu = 0; gpu < topo.gpu_count(); ++gpu) {
    cap[size_t(topo.edge_count() + gpu)] = stream_hbm_capacity_Bps(cost, gpu);
    cap[size_t(topo.edge_count() + topo.gpu_count() + gpu)] = cost.gemv_pair_progress(gpu);  // SM slots (sm_slots.hpp)
  }
  return cap;
}

std::vector<SimTask> tasks_for_ops(const OpGraph& g, const std::vector<int>& ops, const CostModel& cost,
                                   bool graph_launch, std::vector<const OpCost*>* costs) {
  std::vector<SimTask> tasks;
  std::vector<int> local;
  std::vector<char> two;
  tasks_into(tasks, local, two, g, ops.data(), ops.size(), cost, graph_launch, sim_capacity(cost), costs);
  return tasks;
}

PlanPricer::PlanPricer(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const CostModel& cost,
                       PricerOptions opt, PriceMemo* shared)
    : plan_(plan), cfg_(cfg), fig_(fig), cost_(cost), opt_(opt), shared_(shared) {
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id.fetch_add(1);
  // Every priced shape compiles an op graph (~10^3 small allocations) and frees it; without this
  // glibc hands the heap top back to the kernel after each one and page-faults it in again,
  // which was a third of the search's time.
  static const bool tuned = [] {
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 64 << 20);
    return true;
  }();
  (void)tuned;
  rplan_ = plan;
  rcfg_ = cfg;
  rfig_ = fig;
  if (!opt_.reuse_layers) return;
  // One representative per layer kind and stage, in order; the stage ranges remapped onto them.
  rfig_.layers.clear();
  layer_weight_.clear();
  auto same_kind = [](const LayerFigures& a, const LayerFigures& b) {
    // The window too: gpt-oss alternates sliding-window and full layers of the same matrices, and one
    // representative (layer 0, windowed) priced all 24 as windowed, its decode price flat in context. And the
    // stored formats: a GGUF Q4_K_M file keeps some layers' matrices in Q6_K, a checkpoint may leave whole
    // layers unquantized (modules_to_not_convert).
    if (a.moe != b.moe || a.window != b.window || a.params != b.params || a.active_params != b.active_params ||
        a.kv_bytes_per_token != b.kv_bytes_per_token || a.flops_per_token != b.flops_per_token ||
        a.attn_flops_per_context_token != b.attn_flops_per_context_token || a.weight_bytes != b.weight_bytes ||
        a.matrices.size() != b.matrices.size())
      return false;
    for (size_t i = 0; i < a.matrices.size(); ++i) {
      const MatrixShape &x = a.matrices[i], &y = b.matrices[i];
      if (x.name != y.name || x.k != y.k || x.n != y.n || x.count != y.count || x.per_token_active != y.per_token_active ||
          x.format.dtype != y.format.dtype || x.bytes != y.bytes)
        return false;
    }
    return true;
  };
  for (size_t si = 0; si < plan.stages.size(); ++si) {
    const PlanStage& st = plan.stages[si];
    const size_t first = rfig_.layers.size();
    for (int64_t l = st.layer_begin; l < st.layer_end; ++l) {
      const LayerFigures& lf = fig.layers.at(size_t(l));
      size_t k = first;
      while (k < rfig_.layers.size() && !same_kind(rfig_.layers[k], lf)) ++k;
      if (k == rfig_.layers.size()) {
        rfig_.layers.push_back(lf);
        rfig_.layers.back().index = int64_t(k);
        layer_weight_.push_back(0);
      }
      layer_weight_[k] += 1;
      routing_layers_.resize(rfig_.layers.size());
      routing_layers_[k].push_back(int(l));  // its MoE routing is the average of the layers it stands for
    }
    rplan_.stages[si].layer_begin = int64_t(first);
    rplan_.stages[si].layer_end = int64_t(rfig_.layers.size());
  }
  rcfg_.layers = int64_t(rfig_.layers.size());
}

const IterationCost& PlanPricer::price(const BatchShape& shape) {
  BatchShape q = quantize_shape(graph_padded(shape), opt_.per_octave);  // decode: the CUDA graph's batch
  const std::array<int64_t, 8> key = price_key(q);
  PriceMemo& m = memo();
  auto it = m.find(key);
  if (it == m.end()) it = m.emplace(key, price_exact(q)).first;
  if (it->second.seen_by != id_) {
    it->second.seen_by = id_;
    ++distinct_;
  }
  return it->second;
}

IterationCost PlanPricer::price_exact(const BatchShape& unpadded) const {
  const BatchShape shape = graph_padded(unpadded);  // decode: the CUDA graph's batch (graph_batch.hpp)
  const Topology& topo = cost_.topology();
  const OpGraph& g = opt_.reuse_layers ? compile_iteration(compile_, rplan_, rcfg_, rfig_, topo.machine(), shape,
                                                           CompileOptions{&routing_layers_})
                                        : compile_iteration(compile_, plan_, cfg_, fig_, topo.machine(), shape);
  const bool graph_launch = runs_as_graph(shape);  // decode iterations up to 256 run as CUDA graphs
  const int ngpu = topo.gpu_count();
  const int nedge = topo.edge_count();
  if (capacity_.size() != size_t(nedge + 2 * ngpu)) capacity_ = sim_capacity(cost_);

  const size_t S = plan_.stages.size();
  IterationCost r;
  r.stage_s.assign(S, 0.0);
  r.stage_class_s.assign(S, ClassSeconds{});
  r.gpu.assign(size_t(ngpu), TimeSplit{});
  r.edge_bytes.assign(size_t(nedge), 0.0);
  r.edge_busy_s.assign(size_t(nedge), 0.0);
  for (const PlanStage& st : plan_.stages) r.stage_gpus.push_back(st.gpus);

  std::vector<std::vector<int>> rebuilt;  // only for a graph without stage_ops
  const std::vector<std::vector<int>>* stage_ops = &g.stage_ops;
  if (g.stage_ops.size() != S) {
    rebuilt.assign(S, {});
    for (const Op& op : g.ops) rebuilt.at(size_t(op.stage)).push_back(op.id);
    stage_ops = &rebuilt;
  }
  // Each segment (one layer's ops, or a run of ops outside layers) is simulated on its own and
  // counted as many times as the layers its layer stands for (the reduced model: header).
  std::array<int64_t, kCostSourceCount> n{};
  std::array<double, kCostSourceCount> secs{};
  for (size_t s = 0; s < S; ++s) {
    const auto& ops = (*stage_ops)[s];
    for (size_t b = 0; b < ops.size();) {
      size_t e = b + 1;
      while (e < ops.size() && g.ops[size_t(ops[e])].layer == g.ops[size_t(ops[b])].layer) ++e;
      const int* seg = ops.data() + b;
      const size_t len = e - b;
      b = e;
      const int layer = g.ops[size_t(seg[0])].layer;
      const double w = (opt_.reuse_layers && layer >= 0) ? layer_weight_.at(size_t(layer)) : 1.0;
      std::vector<SimTask>& tasks = scratch_.tasks;
      std::vector<const OpCost*>& costs = scratch_.costs;
      tasks_into(tasks, scratch_.local, scratch_.two_streams, g, seg, len, cost_, graph_launch, capacity_, &costs);
      const std::span<const SimTask> ts(tasks.data(), len);
      TaskRun run = run_tasks(ts, kStreamsPerGpu * ngpu, capacity_);
      const std::vector<TimeSplit> split = split_time(ts, run, ngpu, 0, run.makespan);
      for (size_t i = 0; i < len; ++i) {
        const OpCost& c = *costs[i];
        for (auto [edge, bytes] : c.edge_bytes) {  // collectives: bytes and time on the ring's links
          run.edge_bytes[size_t(edge)] += bytes;
          run.edge_busy[size_t(edge)] += tasks[i].duration;
        }
      }
      n.fill(0);
      secs.fill(0);
      for (size_t i = 0; i < len; ++i) {
        const OpCost& c = *costs[i];
        ++n[size_t(c.source)];
        const double d = run.timing[i].end - run.timing[i].start;
        secs[size_t(c.source)] += d;
        switch (g.ops[size_t(seg[i])].kind) {
          case OpKind::Gemm: r.stage_class_s[s].gemm += w * d; break;
          case OpKind::GroupedGemm: r.stage_class_s[s].grouped += w * d; break;
          case OpKind::Attention: r.stage_class_s[s].attention += w * d; break;
          case OpKind::Elementwise: case OpKind::Embedding: r.stage_class_s[s].elementwise += w * d; break;
          default: break;  // transfers and collectives: not the SMs' clock
        }
      }
      r.stage_s[s] += w * run.makespan;
      // Only GPUs and edges the segment used (w * 0 added changes no sum).
      for (int gpu = 0; gpu < ngpu; ++gpu) {
        const TimeSplit& t = split[size_t(gpu)];
        if (t.compute == 0 && t.communication == 0 && t.sync == 0) continue;
        r.gpu[size_t(gpu)].compute += w * t.compute;
        r.gpu[size_t(gpu)].communication += w * t.communication;
        r.gpu[size_t(gpu)].sync += w * t.sync;
      }
      for (int x = 0; x < nedge; ++x) {
        if (run.edge_bytes[size_t(x)] == 0 && run.edge_busy[size_t(x)] == 0) continue;
        r.edge_bytes[size_t(x)] += w * run.edge_bytes[size_t(x)];
        r.edge_busy_s[size_t(x)] += w * run.edge_busy[size_t(x)];
      }
      for (int k = 0; k < kCostSourceCount; ++k) {
        r.ops_by_source[size_t(k)] += int64_t(w) * n[size_t(k)];
        r.seconds_by_source[size_t(k)] += w * secs[size_t(k)];
      }
    }
  }
  // The step's host side (scheduling, sampling, the final sync) ends the last stage.
  double ov = cost_.iteration_overhead_s();
  r.stage_s.back() += ov;
  for (int gpu : plan_.stages.back().gpus) r.gpu[size_t(gpu)].sync += ov;
  r.index_used();
  return r;
}

}  // namespace peerplan
