#include "planner/sim/serving.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <numeric>
#include <unordered_map>

#include <unistd.h>

#include "planner/core/error.hpp"
#include "planner/sim/power_state.hpp"

namespace peerplan {

namespace {

constexpr int64_t kArrival = 0, kStageDone = 1;

// One replica's pipeline: its scheduler and pricer, the iterations it has in flight and its
// stages, each a resource serving one micro-batch at a time.
struct ReplicaState {
  Scheduler* sched = nullptr;
  IterationPricer* pricer = nullptr;
  struct InFlight {
    Iteration it;
    const IterationCost* cost = nullptr;
  };
  std::map<int64_t, InFlight> flight;   // ordered: deterministic
  std::vector<char> stage_busy;
  std::vector<std::deque<int64_t>> stage_queue;
  std::vector<double> stage_start;
  std::vector<PowerState> power;        // per stage, with a throttle (ReplicaServer::throttle)
  int64_t outstanding = 0;              // requests arrived here and not finished (the router reads it)
};

struct ServingSim {
  RequestStream& reqs;
  Router& router;
  size_t record_limit;
  EventQueue q;
  ServingRun run;
  std::vector<ReplicaState> reps;
  std::vector<int64_t> outstanding;     // per replica, for the router
  // Arrivals are drawn from the stream and fed to the queue one at a time, so the queue and the
  // requests held follow the requests in flight, not their total. `pending` has been scheduled
  // and not yet arrived; `arrived` counts arrivals (a request's slot: its index in arrival order).
  Request pending;
  bool has_pending = false;
  size_t arrived = 0;
  int64_t finished = 0;
  // Requests that arrived and have not finished, by id: the request (streamed runs report it
  // when it finishes), its slot in run.requests (kept runs), its first token time (-1 until then),
  // its replica.
  struct Live {
    Request r;
    size_t slot = 0;
    double first_token_s = -1;
    int replica = 0;
  };
  std::unordered_map<int64_t, Live> live;
  // Streaming (stream != nullptr): each request goes to the accumulator when it finishes and
  // run.requests stays empty.
  MetricsAccumulator* stream = nullptr;

  ServingSim(RequestStream& r, const std::vector<ReplicaServer>& servers, Router& rt, size_t lim)
      : reqs(r), router(rt), record_limit(lim) {
    for (const ReplicaServer& sv : servers) {
      ReplicaState st;
      st.sched = sv.sched;
      st.pricer = sv.pricer;
      int S = std::max(1, sv.pricer->num_stages());
      st.stage_busy.assign(size_t(S), 0);
      st.stage_queue.resize(size_t(S));
      st.stage_start.assign(size_t(S), 0);
      if (sv.throttle) st.power.assign(size_t(S), PowerState(*sv.throttle, sv.grouped));
      reps.push_back(std::move(st));
    }
    outstanding.assign(reps.size(), 0);
    run.routed.assign(reps.size(), 0);
  }

  // Event argument: bit 0 the kind; a stage completion carries (iteration, stage, replica).
  static int64_t stage_arg(int64_t idx, int stage, int replica) {
    return (((((idx << 8) | stage) << 8) | replica) << 1) | kStageDone;
  }
  static void dispatch(void* ctx, int64_t arg) {
    auto* s = static_cast<ServingSim*>(ctx);
    int64_t kind = arg & 1, v = arg >> 1;
    if (kind == kArrival) s->arrive();
    else s->stage_done(int(v & 255), int((v >> 8) & 255), v >> 16);
  }

  void schedule_next_arrival() {
    has_pending = reqs.next(pending);
    if (has_pending) q.schedule_first(pending.arrival_s, dispatch, this, (int64_t(arrived) << 1) | kArrival);
  }
  void arrive() {
    const Request r = pending;
    const size_t slot = arrived++;
    schedule_next_arrival();
    const int rep = reps.size() == 1 ? 0 : router.pick(r, outstanding);
    ++outstanding[size_t(rep)];
    ++run.routed[size_t(rep)];
    live.emplace(r.id, Live{r, slot, -1.0, rep});
    if (!stream) run.requests.push_back({r.id, r.arrival_s, -1, -1, r.prompt_tokens, r.output_tokens});
    reps[size_t(rep)].sched->add_request(r);
    launch(rep);
  }
  void launch(int rep) {
    ReplicaState& R = reps[size_t(rep)];
    while (auto it = R.sched->next_iteration()) {
      int64_t idx = it->index;
      ReplicaState::InFlight f{std::move(*it), nullptr};
      f.cost = &R.pricer->price(f.it.shape);
      R.flight.emplace(idx, std::move(f));
      enqueue(rep, 0, idx);
    }
  }
  void enqueue(int rep, int stage, int64_t idx) {
    reps[size_t(rep)].stage_queue[size_t(stage)].push_back(idx);
    pump(rep, stage);
  }
  void pump(int rep, int stage) {
    ReplicaState& R = reps[size_t(rep)];
    if (R.stage_busy[size_t(stage)] || R.stage_queue[size_t(stage)].empty()) return;
    int64_t idx = R.stage_queue[size_t(stage)].front();
    R.stage_queue[size_t(stage)].pop_front();
    R.stage_busy[size_t(stage)] = 1;
    R.stage_start[size_t(stage)] = q.now();
    const ReplicaState::InFlight& f = R.flight.at(idx);
    double d = f.cost->stage_s.at(size_t(stage));
    if (!R.power.empty()) {
      const auto& cls = f.cost->stage_class_s;  // empty in hand-made costs: the throttle's one factor
      d = R.power[size_t(stage)].run(q.now(), d, draws_power_cap(f.it.shape),
                                     size_t(stage) < cls.size() ? cls[size_t(stage)] : ClassSeconds{},
                                     f.it.shape.tokens());
    }
    q.schedule(q.now() + d, dispatch, this, stage_arg(idx, stage, rep));
  }
  void stage_done(int rep, int stage, int64_t idx) {
    ReplicaState& R = reps[size_t(rep)];
    R.stage_busy[size_t(stage)] = 0;
    ReplicaState::InFlight& f = R.flight.at(idx);
    if (run.records.size() < record_limit)
      run.records.push_back({idx, stage, R.stage_start[size_t(stage)], q.now(), f.it.shape, rep});
    if (size_t(stage) + 1 < R.stage_busy.size()) {
      enqueue(rep, stage + 1, idx);
    } else {
      complete(rep, idx);
    }
    pump(rep, stage);
  }
  void complete(int rep, int64_t idx) {
    ReplicaState& R = reps[size_t(rep)];
    ReplicaState::InFlight f = std::move(R.flight.at(idx));
    R.flight.erase(idx);
    ++run.iterations;
    const IterationCost& c = *f.cost;
    auto add_gpu = [&](size_t g) {
      if (g >= run.gpu.size() || g >= c.gpu.size()) return;
      run.gpu[g].compute += c.gpu[g].compute;
      run.gpu[g].communication += c.gpu[g].communication;
      run.gpu[g].sync += c.gpu[g].sync;
    };
    auto add_edge = [&](size_t e) {
      if (e >= run.edge_bytes.size() || e >= c.edge_bytes.size()) return;
      run.edge_bytes[e] += c.edge_bytes[e];
      run.edge_busy_s[e] += c.edge_busy_s[e];
    };
    if (c.indexed) {  // only the non-zero entries: the same sums (IterationCost::used_gpus)
      for (int g : c.used_gpus) add_gpu(size_t(g));
      for (int e : c.used_edges) add_edge(size_t(e));
    } else {
      for (size_t g = 0; g < run.gpu.size(); ++g) add_gpu(g);
      for (size_t e = 0; e < run.edge_bytes.size(); ++e) add_edge(e);
    }
    for (int k = 0; k < kCostSourceCount; ++k) {
      run.ops_by_source[size_t(k)] += c.ops_by_source[size_t(k)];
      run.seconds_by_source[size_t(k)] += c.seconds_by_source[size_t(k)];
    }
    for (const SchedulerEvent& e : R.sched->complete_iteration(f.it)) on_event(e);
    run.end_s = q.now();
    launch(rep);
  }
  static RequestTiming timing_of(const Request& r, double first_token_s, double finish_s) {
    return {r.id, r.arrival_s, first_token_s, finish_s, r.prompt_tokens, r.output_tokens};
  }
  void on_event(const SchedulerEvent& e) {
    if (e.kind == SchedulerEvent::Kind::Token) return;
    auto it = live.find(e.request_id);
    if (it == live.end()) return;
    Live& l = it->second;
    if (e.kind == SchedulerEvent::Kind::FirstToken) {
      l.first_token_s = q.now();
      if (!stream) run.requests[l.slot].first_token_s = q.now();
    }
    if (e.kind == SchedulerEvent::Kind::Finished) {
      if (stream) stream->add(timing_of(l.r, l.first_token_s, q.now()));
      else run.requests[l.slot].finish_s = q.now();
      --outstanding[size_t(l.replica)];
      live.erase(it);
      ++finished;
    }
  }
  void stream_unfinished() {  // in arrival order, so the result does not depend on the hash table
    std::vector<const Live*> left;
    for (const auto& [id, l] : live) left.push_back(&l);
    std::sort(left.begin(), left.end(), [](const Live* a, const Live* b) { return a->slot < b->slot; });
    for (const Live* l : left) stream->add(timing_of(l->r, l->first_token_s, -1));
    live.clear();
  }
};

}  // namespace

// Progress of a long run on stderr: after a few seconds, then every two (one line rewritten in
// place on a terminal, a line each otherwise), so a run of millions of requests is not silent.
class Progress {
 public:
  explicit Progress(bool on) : on_(on), tty_(on && isatty(STDERR_FILENO)), start_(Clock::now()), next_(start_ + kFirst) {}
  void tick(int64_t finished, size_t total, double sim_s) {
    if (!on_) return;
    auto now = Clock::now();
    if (now < next_) return;
    next_ = now + kEvery;
    shown_ = true;
    double wall = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "%ssimulate: %lld / %zu requests finished, %.1f s simulated, %.0f s elapsed%s", tty_ ? "\r" : "",
                 (long long)finished, total, sim_s, wall, tty_ ? "\033[K" : "\n");
    std::fflush(stderr);
  }
  ~Progress() {
    if (shown_ && tty_) std::fputs("\n", stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kFirst{3}, kEvery{2};
  bool on_, tty_, shown_ = false;
  Clock::time_point start_, next_;
};

ServingRun run_serving(RequestStream& requests, const std::vector<ReplicaServer>& replicas, Router& router,
                       int gpu_count, int edge_count, size_t record_limit, bool progress, MetricsAccumulator* stream) {
  if (replicas.empty() || replicas.size() > 255) throw RuntimeError("run_serving: 1 to 255 replicas");
  ServingSim s(requests, replicas, router, record_limit);
  s.stream = stream;
  s.run.gpu.assign(size_t(std::max(gpu_count, 0)), TimeSplit{});
  s.run.edge_bytes.assign(size_t(std::max(edge_count, 0)), 0.0);
  s.run.edge_busy_s.assign(size_t(std::max(edge_count, 0)), 0.0);
  const size_t total = size_t(std::max<int64_t>(requests.total(), 0));
  if (!stream) s.run.requests.reserve(total);
  s.schedule_next_arrival();
  Progress shown(progress);
  for (uint64_t n = 0; s.q.step(); ++n)
    if ((n & 4095) == 0) shown.tick(s.finished, total, s.q.now());
  if (stream) s.stream_unfinished();
  s.run.events = s.q.events_run();
  return std::move(s.run);
}

ServingRun run_serving(RequestStream& requests, Scheduler& sched, IterationPricer& pricer, int gpu_count,
                       int edge_count, size_t record_limit, bool progress, MetricsAccumulator* stream) {
  Router one(RouterPolicy::RoundRobin, 1);
  return run_serving(requests, {ReplicaServer{&sched, &pricer, nullptr, {}}}, one, gpu_count, edge_count, record_limit, progress,
                     stream);
}

ServingRun run_serving(const std::vector<Request>& requests, const std::vector<ReplicaServer>& replicas, Router& router,
                       int gpu_count, int edge_count, size_t record_limit, bool progress, MetricsAccumulator* stream) {
  bool ordered = true;
  for (size_t i = 1; i < requests.size() && ordered; ++i) ordered = requests[i - 1].arrival_s <= requests[i].arrival_s;
  if (ordered) {
    VectorStream in(requests);
    return run_serving(in, replicas, router, gpu_count, edge_count, record_limit, progress, stream);
  }
  // Out of order: served by arrival (ties in the order given), then reported in the order given.
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].arrival_s < requests[b].arrival_s; });
  std::vector<Request> sorted;
  sorted.reserve(requests.size());
  for (size_t i : order) sorted.push_back(requests[i]);
  VectorStream in(sorted);
  ServingRun run = run_serving(in, replicas, router, gpu_count, edge_count, record_limit, progress, stream);
  if (!run.requests.empty()) {
    std::vector<RequestTiming> given(run.requests.size());
    for (size_t k = 0; k < order.size(); ++k) given[order[k]] = run.requests[k];
    run.requests = std::move(given);
  }
  return run;
}

ServingRun run_serving(const std::vector<Request>& requests, Scheduler& sched, IterationPricer& pricer, int gpu_count,
                       int edge_count, size_t record_limit, bool progress, MetricsAccumulator* stream) {
  Router one(RouterPolicy::RoundRobin, 1);
  return run_serving(requests, {ReplicaServer{&sched, &pricer, nullptr, {}}}, one, gpu_count, edge_count, record_limit, progress,
                     stream);
}

}  // namespace peerplan
