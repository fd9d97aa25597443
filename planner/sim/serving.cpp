#include "planner/sim/serving.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <numeric>
#include <unordered_map>

#include <unistd.h>

namespace peerplan {

namespace {

constexpr int64_t kArrival = 0, kStageDone = 1;

struct ServingSim {
  const std::vector<Request>& reqs;
  Scheduler& sched;
  IterationPricer& pricer;
  size_t record_limit;
  EventQueue q;
  ServingRun run;
  struct InFlight {
    Iteration it;
    const IterationCost* cost = nullptr;
  };
  std::map<int64_t, InFlight> flight;   // ordered: deterministic
  std::vector<char> stage_busy;
  std::vector<std::deque<int64_t>> stage_queue;
  std::vector<double> stage_start;
  // Request id -> index: ids 0..N-1 in order (what Workload::generate gives) need no table.
  bool dense_ids = true;
  std::map<int64_t, size_t> req_index;
  // Arrivals are fed to the queue one at a time (schedule_first keeps the order scheduling all of
  // them up front gave), so the queue holds the requests in flight, not all of them.
  std::vector<size_t> arrival_order;  // empty: the requests are already in arrival order
  size_t next_arrival = 0;
  int64_t finished = 0;
  // Streaming (stream != nullptr): only the requests in flight are held, index -> first token
  // time (-1 until it comes); each goes to the accumulator when it finishes.
  MetricsAccumulator* stream = nullptr;
  std::unordered_map<size_t, double> live;

  ServingSim(const std::vector<Request>& r, Scheduler& s, IterationPricer& p, size_t lim)
      : reqs(r), sched(s), pricer(p), record_limit(lim) {
    int S = std::max(1, p.num_stages());
    stage_busy.assign(size_t(S), 0);
    stage_queue.resize(size_t(S));
    stage_start.assign(size_t(S), 0);
  }

  static void dispatch(void* ctx, int64_t arg) {
    auto* s = static_cast<ServingSim*>(ctx);
    int64_t kind = arg & 1, v = arg >> 1;
    if (kind == kArrival) s->arrive(size_t(v));
    else s->stage_done(int(v & 255), v >> 8);
  }

  size_t index_of(int64_t id) const { return dense_ids ? size_t(id) : req_index.at(id); }
  void schedule_next_arrival() {
    if (next_arrival >= reqs.size()) return;
    size_t i = arrival_order.empty() ? next_arrival : arrival_order[next_arrival];
    ++next_arrival;
    q.schedule_first(reqs[i].arrival_s, dispatch, this, (int64_t(i) << 1) | kArrival);
  }
  void arrive(size_t i) {
    schedule_next_arrival();
    if (stream) live.emplace(i, -1.0);
    sched.add_request(reqs[i]);
    launch();
  }
  void launch() {
    while (auto it = sched.next_iteration()) {
      int64_t idx = it->index;
      InFlight f{std::move(*it), nullptr};
      f.cost = &pricer.price(f.it.shape);
      flight.emplace(idx, std::move(f));
      enqueue(0, idx);
    }
  }
  void enqueue(int stage, int64_t idx) {
    stage_queue[size_t(stage)].push_back(idx);
    pump(stage);
  }
  void pump(int stage) {
    if (stage_busy[size_t(stage)] || stage_queue[size_t(stage)].empty()) return;
    int64_t idx = stage_queue[size_t(stage)].front();
    stage_queue[size_t(stage)].pop_front();
    stage_busy[size_t(stage)] = 1;
    stage_start[size_t(stage)] = q.now();
    const IterationCost& c = *flight.at(idx).cost;
    q.schedule(q.now() + c.stage_s.at(size_t(stage)), dispatch, this, (((idx << 8) | stage) << 1) | kStageDone);
  }
  void stage_done(int stage, int64_t idx) {
    stage_busy[size_t(stage)] = 0;
    InFlight& f = flight.at(idx);
    if (run.records.size() < record_limit)
      run.records.push_back({idx, stage, stage_start[size_t(stage)], q.now(), f.it.shape});
    if (size_t(stage) + 1 < stage_busy.size()) {
      enqueue(stage + 1, idx);
    } else {
      complete(idx);
    }
    pump(stage);
  }
  void complete(int64_t idx) {
    InFlight f = std::move(flight.at(idx));
    flight.erase(idx);
    ++run.iterations;
    const IterationCost& c = *f.cost;
    for (size_t g = 0; g < run.gpu.size() && g < c.gpu.size(); ++g) {
      run.gpu[g].compute += c.gpu[g].compute;
      run.gpu[g].communication += c.gpu[g].communication;
      run.gpu[g].sync += c.gpu[g].sync;
    }
    for (size_t e = 0; e < run.edge_bytes.size() && e < c.edge_bytes.size(); ++e) {
      run.edge_bytes[e] += c.edge_bytes[e];
      run.edge_busy_s[e] += c.edge_busy_s[e];
    }
    for (int k = 0; k < kCostSourceCount; ++k) {
      run.ops_by_source[size_t(k)] += c.ops_by_source[size_t(k)];
      run.seconds_by_source[size_t(k)] += c.seconds_by_source[size_t(k)];
    }
    for (const SchedulerEvent& e : sched.complete_iteration(f.it)) {
      if (stream) {
        stream_event(e);
        continue;
      }
      RequestTiming& t = run.requests[index_of(e.request_id)];
      if (e.kind == SchedulerEvent::Kind::FirstToken) t.first_token_s = q.now();
      if (e.kind == SchedulerEvent::Kind::Finished) {
        t.finish_s = q.now();
        ++finished;
      }
    }
    run.end_s = q.now();
    launch();
  }
  static RequestTiming timing_of(const Request& r, double first_token_s, double finish_s) {
    return {r.id, r.arrival_s, first_token_s, finish_s, r.prompt_tokens, r.output_tokens};
  }
  void stream_event(const SchedulerEvent& e) {
    if (e.kind == SchedulerEvent::Kind::Token) return;
    size_t i = index_of(e.request_id);
    auto it = live.find(i);
    if (it == live.end()) return;
    if (e.kind == SchedulerEvent::Kind::FirstToken) it->second = q.now();
    if (e.kind == SchedulerEvent::Kind::Finished) {
      stream->add(timing_of(reqs[i], it->second, q.now()));
      live.erase(it);
      ++finished;
    }
  }
  void stream_unfinished() {  // in request order, so the result does not depend on the hash table
    std::vector<std::pair<size_t, double>> left(live.begin(), live.end());
    std::sort(left.begin(), left.end());
    for (const auto& [i, first] : left) stream->add(timing_of(reqs[i], first, -1));
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

ServingRun run_serving(const std::vector<Request>& requests, Scheduler& sched, IterationPricer& pricer, int gpu_count,
                       int edge_count, size_t record_limit, bool progress, MetricsAccumulator* stream) {
  ServingSim s(requests, sched, pricer, record_limit);
  s.stream = stream;
  s.run.gpu.assign(size_t(std::max(gpu_count, 0)), TimeSplit{});
  s.run.edge_bytes.assign(size_t(std::max(edge_count, 0)), 0.0);
  s.run.edge_busy_s.assign(size_t(std::max(edge_count, 0)), 0.0);
  if (!stream) s.run.requests.reserve(requests.size());
  bool ordered = true;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    s.dense_ids = s.dense_ids && r.id == int64_t(i);
    ordered = ordered && (i == 0 || requests[i - 1].arrival_s <= r.arrival_s);
    if (stream) continue;
    RequestTiming t;
    t.id = r.id;
    t.arrival_s = r.arrival_s;
    t.prompt_tokens = r.prompt_tokens;
    t.output_tokens = r.output_tokens;
    s.run.requests.push_back(t);
  }
  if (!s.dense_ids)
    for (size_t i = 0; i < requests.size(); ++i) s.req_index[requests[i].id] = i;
  if (!ordered) {  // the queue would run them by (time, index): the same order, stably sorted
    s.arrival_order.resize(requests.size());
    std::iota(s.arrival_order.begin(), s.arrival_order.end(), size_t(0));
    std::stable_sort(s.arrival_order.begin(), s.arrival_order.end(),
                     [&](size_t a, size_t b) { return requests[a].arrival_s < requests[b].arrival_s; });
  }
  s.schedule_next_arrival();
  Progress shown(progress);
  for (uint64_t n = 0; s.q.step(); ++n)
    if ((n & 4095) == 0) shown.tick(s.finished, requests.size(), s.q.now());
  if (stream) s.stream_unfinished();
  s.run.events = s.q.events_run();
  return std::move(s.run);
}

}  // namespace peerplan
