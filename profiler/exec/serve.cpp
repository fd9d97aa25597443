// The serving loop on real clocks, step benchmarks, the KV cache's size. The scheduler is the
// simulator's (planner/sim/scheduler.hpp), the router in front of a replicated plan's copies too
// (planner/sim/router.hpp through planner/validate/routed_inbox.hpp), the requests are
// Workload::generate's and the KV slots the planner's memory model's (planner/validate/kv_fit.hpp),
// so only the iteration times differ between prediction and measurement.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/model/quantization.hpp"
#include "planner/validate/kv_fit.hpp"
#include "planner/sim/router.hpp"
#include "planner/sim/scheduler.hpp"
#include "planner/validate/routed_inbox.hpp"
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

namespace {

// One copy of the plan on its own GPUs: its engine, its scheduler (the simulator's), its KV slots,
// serving what the inbox routes to it. A plan without replicas is one copy that every request is
// routed to; a replicated plan runs one per copy, each on its own host thread (serve below).
class CopyServer {
 public:
  CopyServer(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
             const Workload& workload, const ExecOptions& opt, int64_t slots, int64_t max_ctx, int64_t max_tokens,
             int in_flight)
      : opt_(opt),
        slots_(slots),
        max_ctx_(max_ctx),
        max_tokens_(max_tokens),
        in_flight_(in_flight),
        eng_(plan, cfg, fig, machine, opt, slots, max_ctx, max_tokens, in_flight),
        sc_(capped(SchedulerConfig::from_workload(workload, in_flight), slots)),
        sched_(sc_),
        rec_of_slot_(size_t(in_flight)) {
    for (int64_t s = slots - 1; s >= 0; --s) free_slots_.push_back(int(s));
  }

  // Outside the clock, as an engine does at start-up: the decode graphs of every padded batch the
  // run can use (cheap: a graph per size), one full prefill, every GEMM shape's algorithm.
  void warm_up(nlohmann::json& provenance) {
    if (opt_.cuda_graphs) {
      for (int64_t b = 1; b <= sc_.max_num_seqs; b = eng_.padded_batch(b) + 1) {
        std::vector<SeqRun> seqs;
        for (int64_t i = 0; i < b; ++i) seqs.push_back(SeqRun{int(i), 1, 2, false});
        launch(seqs, 0);
        eng_.wait(0);
        if (!eng_.graph_failure().empty()) break;
      }
    }
    {
      const int n = int(std::min<int64_t>(max_tokens_, max_ctx_ - 1));
      launch({SeqRun{0, n, n, true}}, 0);
      eng_.wait(0);
    }
    if (opt_.warm_gemm_plans) {
      const auto tw = Clock::now();
      if (opt_.bus) opt_.bus->post(ExecMessage{ExecCommand::WarmGemm, 0, max_tokens_, sc_.max_num_seqs, {}});
      const int64_t n = eng_.warm_gemm_plans(max_tokens_, sc_.max_num_seqs);
      provenance["gemm_shapes_warmed"] = n;
      provenance["gemm_kernels_warmed"] = eng_.warm_kernels();
      provenance["gemm_warm_up_s"] = since(tw);
      const auto ta = Clock::now();
      provenance["prefill_attention_graphs_warmed"] = eng_.warm_prefill_attention(max_tokens_, sc_.max_num_seqs);
      provenance["prefill_attention_warm_up_s"] = since(ta);
    }
  }

  // Serves copy `copy`'s requests on the run's clock (t0 = time 0 of the requests' arrivals) until
  // every request is routed and each of its own has finished.
  void run(RoutedInbox& inbox, int copy, Clock::time_point t0) {
    struct Flight {
      Iteration it;
      int slot;
    };
    std::vector<Flight> flying;
    std::set<int64_t> token_counts_seen;
    eng_.mark_epoch();  // GPU time 0 = this host time, on the run's clock:
    const double epoch = since(t0);
    int64_t received = 0;
    for (;;) {
      for (const Request& r : inbox.take(copy, since(t0))) {
        timing_[r.id] = RequestTiming{r.id, r.arrival_s, -1, -1, r.prompt_tokens, r.output_tokens};
        sched_.add_request(r);
        ++received;
      }
      while (int(flying.size()) < in_flight_) {
        std::optional<Iteration> it = sched_.next_iteration();
        if (!it) break;
        IterationRecord rec;
        rec.replica = copy;
        rec.host_begin_s = since(t0);
        std::vector<SeqRun> seqs;
        for (int pass = 0; pass < 2; ++pass)  // prefills first, then decodes (the kernels' token order)
          for (const SeqWork& w : it->seqs) {
            if (w.prefill != (pass == 0)) continue;
            auto sl = slot_of_.find(w.request_id);
            if (sl == slot_of_.end()) {
              if (free_slots_.empty()) throw RuntimeError("executor: more running sequences than KV-cache slots");
              sl = slot_of_.emplace(w.request_id, free_slots_.back()).first;
              free_slots_.pop_back();
            }
            seqs.push_back(SeqRun{sl->second, int(w.new_tokens), int(w.context), w.prefill});
            first_scheduled_.emplace(w.request_id, rec.host_begin_s);
          }
        BatchShape sh = Engine::shape_of(seqs);
        (sh.prefill_seqs ? prefill_shapes_ : decode_shapes_).push_back(sh);
        rec.index = it->index;
        rec.shape = it->shape;
        rec.graph = opt_.cuda_graphs && eng_.graph_failure().empty() && sh.prefill_seqs == 0;
        const int64_t m = rec.graph ? eng_.padded_batch(sh.tokens()) : sh.tokens();
        rec.new_tokens_count = token_counts_seen.insert(m).second;
        launch(seqs, it->slot);
        rec.host_enqueued_s = since(t0);
        rec.slowest_enqueues = eng_.slowest_enqueues();
        rec.compile_s = eng_.last_compile_s();
        rec_of_slot_[size_t(it->slot)] = rec;
        flying.push_back(Flight{std::move(*it), it->slot});
        ++iteration_count_;
      }
      if (flying.empty()) {
        if (inbox.drained(copy)) {
          if (sched_.finished() == received) break;
          throw RuntimeError(fmt::format("executor: the scheduler formed no iteration with {} of {} requests finished "
                                         "and none left to arrive",
                                         sched_.finished(), received));
        }
        // Idle: sleep until the next arrival (routed by whichever copy polls first), or poll at
        // once when requests already routed here wait to be taken.
        if (std::optional<double> next = inbox.next_arrival()) {
          const double wait = *next - since(t0);
          if (wait > 0.0005) std::this_thread::sleep_for(std::chrono::duration<double>(wait - 0.0003));
        }
        continue;
      }
      // Complete the oldest in-flight iteration (they finish in launch order on each pipeline).
      Flight& f = flying.front();
      eng_.wait(f.slot);
      const double t_done = since(t0);
      {
        IterationRecord& rec = rec_of_slot_[size_t(f.slot)];
        std::tie(rec.gpu_start_s, rec.gpu_end_s) = eng_.gpu_span(f.slot);
        rec.gpu_start_s += epoch;
        rec.gpu_end_s += epoch;
        rec.host_done_s = t_done;
        iterations_.push_back(rec);
      }
      for (const SchedulerEvent& ev : sched_.complete_iteration(f.it)) {
        RequestTiming& rt = timing_.at(ev.request_id);
        if (ev.kind == SchedulerEvent::Kind::FirstToken) rt.first_token_s = t_done;
        if (ev.kind == SchedulerEvent::Kind::Finished) {
          if (rt.first_token_s < 0) rt.first_token_s = t_done;
          rt.finish_s = t_done;
          inbox.finished(copy);
          auto sl = slot_of_.find(ev.request_id);
          if (sl != slot_of_.end()) {
            free_slots_.push_back(sl->second);
            slot_of_.erase(sl);
          }
        }
      }
      flying.erase(flying.begin());
    }
  }

  // Op classes on two representative iterations of this copy's run (median decode, median
  // prefill), each op bracketed by CUDA events.
  void time_classes(ServeResult& res) {
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
          seqs.push_back(SeqRun{slot++ % int(slots_), int(per), int(std::max(per, sh.prefill_context)), true});
      }
      for (int64_t i = 0; i < sh.decode_seqs; ++i)
        seqs.push_back(SeqRun{slot++ % int(slots_), 1, int(sh.decode_context), false});
      OpGraph g;
      if (opt_.bus) opt_.bus->post(ExecMessage{ExecCommand::TimeOps, 0, 0, 0, seqs});
      std::vector<double> t = eng_.time_ops(seqs, &g);
      if (opt_.bus) t = opt_.bus->sum_on_root(t);  // each op timed by the rank owning its first GPU
      std::map<std::string, double> by;
      for (const Op& op : g.ops) by[op_class(op.kind)] += t[size_t(op.id)];
      // PEERPLAN_OP_TIMES=FILE: every op of the timed shape, appended as CSV (label, op, class, rows,
      // cols, us), to find which op of a class the comparison above blames.
      if (const char* f = std::getenv("PEERPLAN_OP_TIMES"); f && *f) {
        if (std::FILE* out = std::fopen(f, "a")) {
          for (const Op& op : g.ops)
            std::fprintf(out, "%s,%s,%s,%lld,%lld,%.2f\n", label.c_str(), op.name.c_str(), op_class(op.kind),
                         (long long)op.ew_rows, (long long)op.ew_cols, 1e6 * t[size_t(op.id)]);
          std::fclose(out);
        }
      }
      for (auto& [cls, sec] : by) res.op_classes.push_back(OpClassTime{cls, label, 0, sec});
      res.class_shapes.push_back(g.shape);
    };
    if (!decode_shapes_.empty()) {
      BatchShape sh = median_shape(decode_shapes_, false);
      time_shape(sh, fmt::format("decode b={} ctx={}", sh.decode_seqs, sh.decode_context));
    }
    if (!prefill_shapes_.empty()) {
      BatchShape sh = median_shape(prefill_shapes_, true);
      time_shape(sh, fmt::format("prefill {}x{}", sh.prefill_seqs, sh.prefill_tokens));
    }
  }

  const Engine& engine() const { return eng_; }
  std::vector<IterationRecord> iterations_;
  std::unordered_map<int64_t, RequestTiming> timing_;    // this copy's requests, by id
  std::unordered_map<int64_t, double> first_scheduled_;  // request id -> host time its first iteration formed
  int64_t iteration_count_ = 0;

 private:
  static SchedulerConfig capped(SchedulerConfig sc, int64_t slots) {  // no more sequences than KV slots
    sc.max_num_seqs = std::min<int64_t>(sc.max_num_seqs, slots);
    return sc;
  }
  // Rank 0 (or the one process): every engine call is posted to the other ranks first.
  void launch(const std::vector<SeqRun>& seqs, int slot) {
    if (opt_.bus) opt_.bus->post(ExecMessage{ExecCommand::Launch, slot, 0, 0, seqs});
    eng_.launch(seqs, slot);
  }

  ExecOptions opt_;
  int64_t slots_, max_ctx_, max_tokens_;
  int in_flight_;
  Engine eng_;
  SchedulerConfig sc_;
  Scheduler sched_;
  std::vector<IterationRecord> rec_of_slot_;
  std::vector<int> free_slots_;
  std::unordered_map<int64_t, int> slot_of_;
  std::vector<BatchShape> decode_shapes_, prefill_shapes_;
};

// A replicated plan: one host thread per copy, as each engine replica is its own process behind a
// router. Every copy warms up first; the clock starts when all are ready, then each serves what the
// inbox routes to it. An error on one copy stops none of the others (they drain their own
// requests); the first error is rethrown once all have stopped.
std::vector<std::unique_ptr<CopyServer>> serve_copies(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig,
                                                      const Machine& machine, const Workload& workload,
                                                      const ExecOptions& opt, int64_t slots, int64_t max_ctx,
                                                      int64_t max_tokens, int in_flight, RoutedInbox& inbox,
                                                      nlohmann::json& provenance) {
  const int n = plan.replica_count();
  std::vector<std::unique_ptr<CopyServer>> copies(static_cast<size_t>(n));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<nlohmann::json> warm(static_cast<size_t>(n), nlohmann::json::object());
  std::latch ready(n);
  std::promise<Clock::time_point> start;
  std::shared_future<Clock::time_point> started = start.get_future().share();
  std::atomic<bool> abort{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < n; ++c)
    threads.emplace_back([&, c] {
      try {
        copies[size_t(c)] = std::make_unique<CopyServer>(n > 1 ? replica_plan(plan, c) : plan, cfg, fig, machine,
                                                         workload, opt, slots, max_ctx, max_tokens, in_flight);
        copies[size_t(c)]->warm_up(warm[size_t(c)]);
      } catch (...) {
        errors[size_t(c)] = std::current_exception();
      }
      ready.count_down();
      const Clock::time_point t0 = started.get();
      if (errors[size_t(c)] || abort.load()) return;
      try {
        copies[size_t(c)]->run(inbox, c, t0);
      } catch (...) {
        errors[size_t(c)] = std::current_exception();
      }
    });
  ready.wait();
  for (const auto& e : errors) abort = abort.load() || bool(e);
  start.set_value(Clock::now());
  for (std::thread& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  provenance.update(warm[0]);
  return copies;
}

}  // namespace

ServeResult serve(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                  const Workload& workload, const ExecOptions& opt) {
  ServeResult res;
  const int64_t max_ctx = opt.max_ctx > 0 ? opt.max_ctx : workload.max_context() + 1;
  const int64_t max_tokens = std::max<int64_t>(workload.max_batched_tokens, 1);
  int64_t slots = opt.kv_slots > 0 ? opt.kv_slots : workload.max_num_seqs;
  res.kv_slots = slots;
  res.max_ctx = max_ctx;
  const int in_flight = plan.stages.size() > 1 ? std::max(1, plan.micro_batches) : 1;  // as the simulator
  RankBus* bus = opt.bus;
  if (bus && plan.replica_count() > 1)
    throw InputError("plan", "replicas", "a plan of one copy under --mpi (one rank per GPU of one copy); run a "
                                         "replicated plan without --mpi, its copies on this host's GPUs");
  if (bus && bus->rank() != 0) {
    // MPI, ranks > 0: do what rank 0 says, in its order, on this rank's GPU.
    Engine eng(plan, cfg, fig, machine, opt, slots, max_ctx, max_tokens, in_flight);
    for (;;) {
      ExecMessage m = bus->receive();
      if (m.cmd == ExecCommand::Stop) break;
      if (m.cmd == ExecCommand::Launch) eng.launch(m.seqs, int(m.slot));
      else if (m.cmd == ExecCommand::WarmGemm) {
        eng.warm_gemm_plans(m.a, m.b);
        eng.warm_prefill_attention(m.a, m.b);
      }
      else if (m.cmd == ExecCommand::TimeOps) bus->sum_on_root(eng.time_ops(m.seqs, nullptr));
    }
    return res;  // ~Engine waits for this GPU's last work
  }

  // The requests reach the copies through the simulator's router on the run's clock (one copy:
  // every request to it, in arrival order).
  std::vector<Request> reqs = workload.generate();
  RoutedInbox inbox(reqs, router_policy(plan.router.empty() ? "round_robin" : plan.router), plan.replica_count());
  std::vector<std::unique_ptr<CopyServer>> copies;
  if (plan.replica_count() > 1) {
    copies = serve_copies(plan, cfg, fig, machine, workload, opt, slots, max_ctx, max_tokens, in_flight, inbox,
                          res.provenance);
  } else {  // on this thread: under MPI, rank 0's messages go out in this order
    copies.push_back(std::make_unique<CopyServer>(plan, cfg, fig, machine, workload, opt, slots, max_ctx, max_tokens,
                                                  in_flight));
    copies[0]->warm_up(res.provenance);
    copies[0]->run(inbox, 0, Clock::now());
  }

  std::vector<RequestTiming> timing;
  int64_t iterations = 0;
  nlohmann::json routed = nlohmann::json::array();
  for (auto& c : copies) {
    res.iterations.insert(res.iterations.end(), c->iterations_.begin(), c->iterations_.end());
    for (const auto& [id, t] : c->timing_) timing.push_back(t);
    iterations += c->iteration_count_;
    routed.push_back(int64_t(c->timing_.size()));
  }
  std::sort(timing.begin(), timing.end(), [](const RequestTiming& a, const RequestTiming& b) {
    return a.arrival_s < b.arrival_s || (a.arrival_s == b.arrival_s && a.id < b.id);
  });
  if (timing.size() != reqs.size())
    throw RuntimeError(fmt::format("executor: {} of {} requests were served", timing.size(), reqs.size()));
  for (const RequestTiming& t : timing) {
    double first = -1.0;
    for (auto& c : copies)
      if (auto f = c->first_scheduled_.find(t.id); f != c->first_scheduled_.end()) first = f->second;
    res.first_scheduled.emplace_back(t.id, first);
  }
  Slo slo{workload.slo_ttft_s, workload.slo_tpot_s, workload.slo_e2e_p99_s};
  res.measured = compute_metrics(timing, slo);
  res.measured.kind = "measured";
  res.measured.plan = plan.name;
  res.measured.model = cfg.name;
  res.measured.machine = machine.name;
  res.measured.workload = workload.name;
  res.measured.iterations = iterations;

  // Op classes on copy 0 (every copy runs the same shapes on its own GPUs).
  copies[0]->time_classes(res);
  if (bus) bus->post(ExecMessage{ExecCommand::Stop, 0, 0, 0, {}});
  const Engine& eng = copies[0]->engine();
  res.provenance.update(profiler::host_context());
  if (bus) {
    res.provenance["launcher"] = fmt::format("MPI, {} ranks, one GPU each; iterations posted by rank 0", bus->ranks());
    res.provenance["in_flight"] = in_flight;
  }
  if (plan.replica_count() > 1) {
    res.provenance["replicas"] = plan.replica_count();
    res.provenance["router"] = plan.router;
    res.provenance["routed_per_copy"] = routed;
    res.provenance["copies"] = "one host thread and one engine per copy, the clock started when every copy had warmed up";
  }
  res.provenance["cuda_graphs"] = opt.cuda_graphs && eng.graph_failure().empty();
  res.provenance["graphs_captured"] = eng.graphs_captured();
  if (!eng.graph_failure().empty()) res.provenance["graph_failure"] = eng.graph_failure();
  res.provenance["p2p"] = opt.p2p;
  res.provenance["kv_slots"] = slots;
  res.provenance["max_ctx"] = max_ctx;
  // The stored formats the executor allocated (engine_quant.cpp, engine_moe.cpp), not only bf16: the
  // model's quantized matrices run in the executor's own scale layout of that format.
  res.provenance["weights"] =
      cfg.quant.quantized()
          ? fmt::format("synthetic random, the plan's exact shard shapes; the model's quantized matrices ({}, {}) as "
                        "the executor stores that format (FP8: per-tensor scales for dense GEMMs, per-channel for routed "
                        "experts; INT8 per-channel; INT4 group-128 scales; MXFP4 e8m0 scales per 32), embeddings, "
                        "routers and norms {}",
                        describe(cfg.quant.linear), cfg.quant.source, dtype_name(cfg.dense_dtype()))
          : "synthetic random bf16, the plan's exact shard shapes";
  // What the executor times as its plain counterpart (no bytes, the same kernels; docs/quantization.md, "MXFP4
  // routed experts"), said with the run so nobody reads the figures as gpt-oss's exact arithmetic.
  if (cfg.attention_sinks || cfg.expert_bias)
    res.provenance["timed_as_plain"] =
        "attention sinks (a logit per head in each softmax denominator), expert and attention biases and the clamped "
        "SwiGLU run as plain softmax, no bias and SiLU x up: the same bytes and kernels";
  res.measured.provenance = res.provenance;
  return res;
}

}  // namespace peerplan::exec
