#include "planner/report/trace.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "planner/compile/compiler.hpp"
#include "planner/compile/graph_batch.hpp"

namespace peerplan {

namespace {

constexpr int kPidStages = 1, kPidGpus = 2, kPidLinks = 3;

nlohmann::json meta(const char* what, int pid, int tid, const std::string& name) {
  nlohmann::json e = {{"ph", "M"}, {"pid", pid}, {"name", what}, {"args", {{"name", name}}}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

std::string shape_text(const BatchShape& s) {
  if (s.prefill_tokens > 0 && s.decode_seqs > 0)
    return fmt::format("prefill {} tok/{} seq + decode {} seq", s.prefill_tokens, s.prefill_seqs, s.decode_seqs);
  if (s.prefill_tokens > 0) return fmt::format("prefill {} tok/{} seq", s.prefill_tokens, s.prefill_seqs);
  return fmt::format("decode {} seq @ctx {}", s.decode_seqs, s.decode_context);
}

}  // namespace

nlohmann::json chrome_trace(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const CostModel& cost,
                            const ServingRun& run, const PricerOptions& popt, const nlohmann::json& provenance) {
  const Topology& topo = cost.topology();
  const int ngpu = topo.gpu_count();
  const std::vector<double> capacity = sim_capacity(cost);  // edges, then each GPU's HBM, then its SM slots

  nlohmann::json ev = nlohmann::json::array();
  ev.push_back(meta("process_name", kPidStages, -1, "pipeline stages (iterations)"));
  ev.push_back(meta("process_name", kPidGpus, -1, "GPU streams"));
  ev.push_back(meta("process_name", kPidLinks, -1, "links (point-to-point traffic)"));
  // A replicated plan: each copy's stages get their own tracks, and its ops are drawn on its GPUs.
  const int S = int(plan.stages.size()), R = plan.replica_count();
  std::vector<Plan> copies;
  for (int r = 0; r < R; ++r) copies.push_back(replica_plan(plan, r));
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < S; ++s)
      ev.push_back(meta("thread_name", kPidStages, r * S + s, R > 1 ? fmt::format("copy {} stage {}", r, s) : fmt::format("stage {}", s)));
  for (int g : plan.all_gpus()) {
    ev.push_back(meta("thread_name", kPidGpus, compute_stream(g), fmt::format("gpu{} compute", g)));
    ev.push_back(meta("thread_name", kPidGpus, copy_stream(g), fmt::format("gpu{} copy engine", g)));
    ev.push_back(meta("thread_name", kPidGpus, aux_stream(g), fmt::format("gpu{} auxiliary stream", g)));
  }
  auto X = [&](const std::string& name, const char* cat, int pid, int tid, double t0, double t1, nlohmann::json args) {
    nlohmann::json e = {{"name", name}, {"cat", cat}, {"ph", "X"}, {"pid", pid}, {"tid", tid},
                        {"ts", t0 * 1e6},   {"dur", std::max(0.0, t1 - t0) * 1e6}};
    if (!args.is_null()) e["args"] = std::move(args);
    ev.push_back(std::move(e));
  };

  std::map<int, std::vector<std::pair<double, double>>> link_spans;
  std::map<int, double> link_bytes;
  std::map<std::pair<int, std::array<int64_t, 8>>, OpGraph> graphs;  // one compile per copy and shape
  for (const StageRecord& rec : run.records) {
    const int copy = std::clamp(rec.replica, 0, R - 1);
    X(R > 1 ? fmt::format("copy {} iter {} stage {}", copy, rec.iteration, rec.stage)
            : fmt::format("iter {} stage {}", rec.iteration, rec.stage),
      "iteration", kPidStages, copy * S + rec.stage, rec.start, rec.end, {{"shape", shape_text(rec.shape)}});
    // The shape the pricer prices (iteration_cost.cpp): a decode iteration at its CUDA graph's padded
    // batch. Unpadded, a batch-3 step's attention showed grid(3) prices (124 us a layer at 26.8k for
    // 8B) inside an iteration priced at grid(4) (111 us).
    BatchShape q = quantize_shape(graph_padded(rec.shape), popt.per_octave);
    const std::pair<int, std::array<int64_t, 8>> key{copy, price_key(q)};
    auto it = graphs.find(key);
    if (it == graphs.end())
      it = graphs.emplace(key, compile_iteration(copies[size_t(copy)], cfg, fig, topo.machine(), q)).first;
    const OpGraph& g = it->second;
    const bool graph_launch = q.prefill_tokens == 0;
    // The stage's ops, layer segment by layer segment, as the pricer runs them.
    std::vector<int> ops;
    if (size_t(rec.stage) < g.stage_ops.size()) ops = g.stage_ops[size_t(rec.stage)];
    double t = rec.start;
    for (size_t b = 0; b < ops.size();) {
      size_t e = b + 1;
      while (e < ops.size() && g.ops[size_t(ops[e])].layer == g.ops[size_t(ops[b])].layer) ++e;
      std::vector<int> seg(ops.begin() + ptrdiff_t(b), ops.begin() + ptrdiff_t(e));
      b = e;
      std::vector<const OpCost*> costs;
      std::vector<SimTask> tasks = tasks_for_ops(g, seg, cost, graph_launch, &costs);
      TaskRun tr = run_tasks(tasks, kStreamsPerGpu * ngpu, capacity);
      for (size_t i = 0; i < seg.size(); ++i) {
        const Op& op = g.ops[size_t(seg[i])];
        double a = t + tr.timing[i].start + tasks[i].gap, z = t + tr.timing[i].end;
        nlohmann::json args = {{"source", to_string(costs[i]->source)}, {"kind", to_string(op.kind)}};
        if (op.bytes) args["bytes"] = op.bytes;
        if (op.flops) args["gflop"] = op.flops / 1e9;
        if (op.kind == OpKind::Send) {
          X(op.name, "send", kPidGpus, copy_stream(op.gpus[0]), a, z, args);
          for (int edge : tasks[i].edges) {
            link_spans[edge].push_back({a, z});
            link_bytes[edge] += double(op.bytes);
          }
        } else {
          for (int gpu : op.gpus)
            X(op.name, is_collective(op.kind) ? "collective" : "compute", kPidGpus,
              op.stream == 1 ? aux_stream(gpu) : compute_stream(gpu), a, z, args);
        }
      }
      t += tr.makespan;
    }
  }
  // Links: merge the spans of concurrent flows into busy periods (a track must not overlap itself).
  for (auto& entry : link_spans) {
    // Plain variables, not a structured binding: the lambda below captures edge, which clang 14 refuses.
    const int edge = entry.first;
    auto& spans = entry.second;
    ev.push_back(meta("thread_name", kPidLinks, edge, topo.edge_name(edge)));
    std::sort(spans.begin(), spans.end());
    double a = spans[0].first, z = spans[0].second;
    int n = 1;
    auto flush = [&] { X(fmt::format("{} flow{}", n, n > 1 ? "s" : ""), "link", kPidLinks, edge, a, z, nullptr); };
    for (size_t i = 1; i < spans.size(); ++i) {
      if (spans[i].first <= z) {
        z = std::max(z, spans[i].second);
        ++n;
      } else {
        flush();
        a = spans[i].first;
        z = spans[i].second;
        n = 1;
      }
    }
    flush();
  }
  nlohmann::json out;
  out["traceEvents"] = std::move(ev);
  out["displayTimeUnit"] = "ms";
  out["otherData"] = {{"generator", "peerplan simulate"}, {"plan", plan.name}, {"provenance", provenance}};
  return out;
}

}  // namespace peerplan
