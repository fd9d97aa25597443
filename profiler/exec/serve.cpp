// The serving loop on real clocks, step benchmarks, the KV cache's size. The scheduler is the
// simulator's (planner/sim/scheduler.hpp), the requests are Workload::generate's and the KV slots
// the planner's memory model's (planner/validate/kv_fit.hpp), so only the iteration times differ
// between prediction and measurement.

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/validate/kv_fit.hpp"
#include "planner/sim/scheduler.hpp"
#include "profiler/discovery/discovery.hpp"
#include "profiler/exec/engine.hpp"
#include "profiler/gpu/cuda_check.hpp"

namespace peerplan::exec {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int64_t kv_slots_that_fit(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                          int64_t max_ctx, int64_t max_tokens, RankBus* bus) {
  std::vector<GpuFreeMemory> free;
  for (int id : plan.all_gpus()) {
    if (bus && id != bus->rank()) continue;  // MPI: each rank asks its own GPU only
    gpu::ScopedDevice d(bus ? bus->device() : id);
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    free.push_back(GpuFreeMemory{id, int64_t(free_b)});
  }
  int64_t best = executor_kv_slots(plan, cfg, fig, machine, free, max_ctx, max_tokens);
  if (bus) best = bus->min_over_ranks(best);
  return std::max<int64_t>(0, best);
}

std::vector<StepBench> bench_steps(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig,
                                   const Machine& machine, const std::vector<int64_t>& batches, int64_t context,
                                   int64_t prefill_tokens, const ExecOptions& opt) {
  const int64_t max_b = batches.empty() ? 1 : *std::max_element(batches.begin(), batches.end());
  const int64_t max_ctx = std::max(context, prefill_tokens) + 16;
  Engine eng(plan, cfg, fig, machine, opt, max_b, max_ctx, std::max<int64_t>(prefill_tokens, 256), 1);
  std::vector<StepBench> out;
  auto time_it = [&](const std::vector<SeqRun>& seqs, int reps) {
    for (int w = 0; w < 3; ++w) {  // warm-up: capture, plans, NCCL
      eng.launch(seqs, 0);
      eng.wait(0);
    }
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      auto t0 = Clock::now();
      eng.launch(seqs, 0);
      eng.wait(0);
      t.push_back(since(t0));
    }
    std::sort(t.begin(), t.end());
    StepBench b;
    b.reps = reps;
    // What the step's compute ops move through HBM on its busiest GPU (the compiler's mem_bytes:
    // for routed MoE only the touched experts' weights): the bandwidth bound of the step.
    std::map<int, double> bytes;
    for (const Op& op : eng.compile(Engine::shape_of(seqs)).ops)
      if (is_compute(op.kind)) bytes[op.gpus[0]] += op.mem_bytes;
    for (const auto& [gpu, v] : bytes) b.hbm_bytes = std::max(b.hbm_bytes, v);
    b.step_s = t[t.size() / 2];
    b.min_s = t.front();
    b.max_s = t.back();
    return b;
  };
  for (int64_t b : batches) {
    std::vector<SeqRun> seqs;
    for (int64_t i = 0; i < b; ++i) seqs.push_back(SeqRun{int(i), 1, int(context), false});
    StepBench r = time_it(seqs, 30);
    r.what = "decode";
    r.batch = b;
    r.context = context;
    r.tokens = b;
    r.graph = opt.cuda_graphs && eng.graph_failure().empty();
    out.push_back(r);
  }
  if (prefill_tokens > 0) {
    std::vector<SeqRun> seqs{SeqRun{0, int(prefill_tokens), int(prefill_tokens), true}};
    StepBench r = time_it(seqs, 5);
    r.what = "prefill";
    r.batch = 1;
    r.context = prefill_tokens;
    r.tokens = prefill_tokens;
    out.push_back(r);
  }
  if (!eng.graph_failure().empty())
    fmt::print(stderr, "peerplan: CUDA graph capture failed, decode ran eagerly: {}\n", eng.graph_failure());
  return out;
}

ServeResult serve(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                  const Workload& workload, const ExecOptions& opt) {
  ServeResult res;
  const int64_t max_ctx = opt.max_ctx > 0 ? opt.max_ctx : workload.max_context() + 1;
  const int64_t max_tokens = std::max<int64_t>(workload.max_batched_tokens, 1);
  int64_t slots = opt.kv_slots > 0 ? opt.kv_slots : workload.max_num_seqs;
  res.kv_slots = slots;
  res.max_ctx = max_ctx;
  const int in_flight = plan.stages.size() > 1 ? std::max(1, plan.micro_batches) : 1;  // as the simulator
  Engine eng(plan, cfg, fig, machine, opt, slots, max_ctx, max_tokens, in_flight);
  RankBus* bus = opt.bus;
  if (bus && bus->rank() != 0) {
    // MPI, ranks > 0: do what rank 0 says, in its order, on this rank's GPU.
    for (;;) {
      ExecMessage m = bus->receive();
      if (m.cmd == ExecCommand::Stop) break;
      if (m.cmd == ExecCommand::Launch) eng.launch(m.seqs, int(m.slot));
      else if (m.cmd == ExecCommand::WarmGemm) eng.warm_gemm_plans(m.a, m.b);
      else if (m.cmd == ExecCommand::TimeOps) bus->sum_on_root(eng.time_ops(m.seqs, nullptr));
    }
    return res;  // ~Engine waits for this GPU's last work
  }
  // Rank 0 (or the one process): every engine call is posted to the other ranks first.
  auto launch = [&](const std::vector<SeqRun>& seqs, int slot) {
    if (bus) bus->post(ExecMessage{ExecCommand::Launch, slot, 0, 0, seqs});
    eng.launch(seqs, slot);
  };

  SchedulerConfig sc = SchedulerConfig::from_workload(workload, in_flight);
  sc.max_num_seqs = std::min<int64_t>(sc.max_num_seqs, slots);
  Scheduler sched(sc);
  std::vector<Request> reqs = workload.generate();
  std::sort(reqs.begin(), reqs.end(), [](const Request& a, const Request& b) { return a.arrival_s < b.arrival_s; });
  std::unordered_map<int64_t, size_t> index;
  std::vector<RequestTiming> timing(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    index[reqs[i].id] = i;
    timing[i] = RequestTiming{reqs[i].id, reqs[i].arrival_s, -1, -1, reqs[i].prompt_tokens, reqs[i].output_tokens};
  }
  std::vector<int> free_slots;
  for (int64_t s = slots - 1; s >= 0; --s) free_slots.push_back(int(s));
  std::unordered_map<int64_t, int> slot_of;

  // Warm-up outside the clock: capture the decode graphs of every padded batch the run can use,
  // as an engine does at start-up (cheap: a graph per size).
  if (opt.cuda_graphs) {
    for (int64_t b = 1; b <= sc.max_num_seqs; b = eng.padded_batch(b) + 1) {
      std::vector<SeqRun> seqs;
      for (int64_t i = 0; i < b; ++i) seqs.push_back(SeqRun{int(i), 1, 2, false});
      launch(seqs, 0);
      eng.wait(0);
      if (!eng.graph_failure().empty()) break;
    }
  }
  {
    std::vector<SeqRun> seqs{SeqRun{0, int(std::min<int64_t>(max_tokens, max_ctx - 1)), int(std::min<int64_t>(max_tokens, max_ctx - 1)), true}};
    launch(seqs, 0);
    eng.wait(0);
  }
  if (opt.warm_gemm_plans) {
    const auto tw = Clock::now();
    if (bus) bus->post(ExecMessage{ExecCommand::WarmGemm, 0, max_tokens, sc.max_num_seqs, {}});
    const int64_t n = eng.warm_gemm_plans(max_tokens, sc.max_num_seqs);
    res.provenance["gemm_shapes_warmed"] = n;
    res.provenance["gemm_kernels_warmed"] = eng.warm_kernels();
    res.provenance["gemm_warm_up_s"] = since(tw);
  }

  struct Flight {
    Iteration it;
    int slot;
  };
  std::vector<Flight> flying;
  size_t next_arrival = 0;
  int64_t iterations = 0;
  std::vector<BatchShape> decode_shapes, prefill_shapes;
  std::vector<IterationRecord> rec_of_slot(static_cast<size_t>(in_flight));
  std::set<int64_t> token_counts_seen;
  std::unordered_map<int64_t, double> first_scheduled;
  eng.mark_epoch();
  const auto t0 = Clock::now();
  while (sched.finished() < int64_t(reqs.size())) {
    const double now = since(t0);
    while (next_arrival < reqs.size() && reqs[next_arrival].arrival_s <= now) sched.add_request(reqs[next_arrival++]);
    bool launched = false;
    while (int(flying.size()) < in_flight) {
      std::optional<Iteration> it = sched.next_iteration();
      if (!it) break;
      IterationRecord rec;
      rec.host_begin_s = since(t0);
      std::vector<SeqRun> seqs;
      for (int pass = 0; pass < 2; ++pass)  // prefills first, then decodes (the kernels' token order)
        for (const SeqWork& w : it->seqs) {
          if (w.prefill != (pass == 0)) continue;
          auto sl = slot_of.find(w.request_id);
          if (sl == slot_of.end()) {
            if (free_slots.empty()) throw RuntimeError("executor: more running sequences than KV-cache slots");
            sl = slot_of.emplace(w.request_id, free_slots.back()).first;
            free_slots.pop_back();
          }
          seqs.push_back(SeqRun{sl->second, int(w.new_tokens), int(w.context), w.prefill});
          first_scheduled.emplace(w.request_id, rec.host_begin_s);
        }
      BatchShape sh = Engine::shape_of(seqs);
      (sh.prefill_seqs ? prefill_shapes : decode_shapes).push_back(sh);
      rec.index = it->index;
      rec.shape = it->shape;
      rec.graph = opt.cuda_graphs && eng.graph_failure().empty() && sh.prefill_seqs == 0;
      const int64_t m = rec.graph ? eng.padded_batch(sh.tokens()) : sh.tokens();
      rec.new_tokens_count = token_counts_seen.insert(m).second;
      launch(seqs, it->slot);
      rec.host_enqueued_s = since(t0);
      rec.slowest_enqueues = eng.slowest_enqueues();
      rec.compile_s = eng.last_compile_s();
      rec_of_slot[size_t(it->slot)] = rec;
      flying.push_back(Flight{std::move(*it), it->slot});
      launched = true;
      ++iterations;
    }
    if (flying.empty()) {
      if (next_arrival >= reqs.size())
        throw RuntimeError(fmt::format("executor: the scheduler formed no iteration with {} of {} requests finished "
                                       "and none left to arrive",
                                       sched.finished(), reqs.size()));
      {
        const double wait = reqs[next_arrival].arrival_s - since(t0);
        if (wait > 0.0005) std::this_thread::sleep_for(std::chrono::duration<double>(wait - 0.0003));
      }
      continue;
    }
    (void)launched;
    // Complete the oldest in-flight iteration (they finish in launch order on each pipeline).
    Flight& f = flying.front();
    eng.wait(f.slot);
    const double t_done = since(t0);
    {
      IterationRecord& rec = rec_of_slot[size_t(f.slot)];
      std::tie(rec.gpu_start_s, rec.gpu_end_s) = eng.gpu_span(f.slot);
      rec.host_done_s = t_done;
      res.iterations.push_back(rec);
    }
    for (const SchedulerEvent& ev : sched.complete_iteration(f.it)) {
      RequestTiming& rt = timing[index.at(ev.request_id)];
      if (ev.kind == SchedulerEvent::Kind::FirstToken) rt.first_token_s = t_done;
      if (ev.kind == SchedulerEvent::Kind::Finished) {
        if (rt.first_token_s < 0) rt.first_token_s = t_done;
        rt.finish_s = t_done;
        auto sl = slot_of.find(ev.request_id);
        if (sl != slot_of.end()) {
          free_slots.push_back(sl->second);
          slot_of.erase(sl);
        }
      }
    }
    flying.erase(flying.begin());
  }

  for (const Request& r : reqs) {
    auto f = first_scheduled.find(r.id);
    res.first_scheduled.emplace_back(r.id, f == first_scheduled.end() ? -1.0 : f->second);
  }
  Slo slo{workload.slo_ttft_s, workload.slo_tpot_s, workload.slo_e2e_p99_s};
  res.measured = compute_metrics(timing, slo);
  res.measured.kind = "measured";
  res.measured.plan = plan.name;
  res.measured.model = cfg.name;
  res.measured.machine = machine.name;
  res.measured.workload = workload.name;
  res.measured.iterations = iterations;

  // Op classes on two representative iterations of this run (median decode, median prefill),
  // each op bracketed by CUDA events.
  auto median_shape = [](std::vector<BatchShape> v, bool prefill) {
    std::sort(v.begin(), v.end(), [&](const BatchShape& a, const BatchShape& b) {
      return prefill ? a.prefill_tokens < b.prefill_tokens : a.decode_seqs < b.decode_seqs;
    });
    return v[v.size() / 2];
  };
  auto time_shape = [&](const BatchShape& sh, const std::string& label) {
    std::vector<SeqRun> seqs;
    int slot = 0;
    if (sh.prefill_seqs) {
      const int64_t per = sh.prefill_tokens / sh.prefill_seqs;
      for (int64_t i = 0; i < sh.prefill_seqs; ++i)
        seqs.push_back(SeqRun{slot++ % int(slots), int(per), int(std::max(per, sh.prefill_context)), true});
    }
    for (int64_t i = 0; i < sh.decode_seqs; ++i)
      seqs.push_back(SeqRun{slot++ % int(slots), 1, int(sh.decode_context), false});
    OpGraph g;
    if (bus) bus->post(ExecMessage{ExecCommand::TimeOps, 0, 0, 0, seqs});
    std::vector<double> t = eng.time_ops(seqs, &g);
    if (bus) t = bus->sum_on_root(t);  // each op timed by the rank owning its first GPU
    std::map<std::string, double> by;
    for (const Op& op : g.ops) by[op_class(op.kind)] += t[size_t(op.id)];
    for (auto& [cls, sec] : by) res.op_classes.push_back(OpClassTime{cls, label, 0, sec});
    res.class_shapes.push_back(g.shape);
  };
  if (!decode_shapes.empty()) {
    BatchShape sh = median_shape(decode_shapes, false);
    time_shape(sh, fmt::format("decode b={} ctx={}", sh.decode_seqs, sh.decode_context));
  }
  if (!prefill_shapes.empty()) {
    BatchShape sh = median_shape(prefill_shapes, true);
    time_shape(sh, fmt::format("prefill {}x{}", sh.prefill_seqs, sh.prefill_tokens));
  }
  if (bus) bus->post(ExecMessage{ExecCommand::Stop, 0, 0, 0, {}});
  res.provenance.update(profiler::host_context());
  if (bus) {
    res.provenance["launcher"] = fmt::format("MPI, {} ranks, one GPU each; iterations posted by rank 0", bus->ranks());
    res.provenance["in_flight"] = in_flight;
  }
  res.provenance["cuda_graphs"] = opt.cuda_graphs && eng.graph_failure().empty();
  res.provenance["graphs_captured"] = eng.graphs_captured();
  if (!eng.graph_failure().empty()) res.provenance["graph_failure"] = eng.graph_failure();
  res.provenance["p2p"] = opt.p2p;
  res.provenance["kv_slots"] = slots;
  res.provenance["max_ctx"] = max_ctx;
  res.provenance["weights"] = "synthetic random bf16, the plan's exact shard shapes";
  res.measured.provenance = res.provenance;
  return res;
}

}  // namespace peerplan::exec
