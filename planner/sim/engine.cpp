#include "planner/sim/engine.hpp"

#include <algorithm>
#include <limits>
#include <tuple>
#include <string>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/topology/topology.hpp"

namespace peerplan {

void EventQueue::schedule(SimTime at, Handler fn, void* ctx, int64_t arg) {
  heap_.push_back({at < now_ ? now_ : at, seq_++, fn, ctx, arg});
  std::push_heap(heap_.begin(), heap_.end(), later);
}

void EventQueue::schedule_first(SimTime at, Handler fn, void* ctx, int64_t arg) {
  heap_.push_back({at < now_ ? now_ : at, first_seq_++, fn, ctx, arg});
  std::push_heap(heap_.begin(), heap_.end(), later);
}

bool EventQueue::step() {
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), later);
  Event e = heap_.back();
  heap_.pop_back();
  at_instant_ = e.at == now_ ? at_instant_ + 1 : 1;
  now_ = e.at;
  ++events_run_;
  if (at_instant_ > instant_limit_)
    throw RuntimeError(fmt::format("internal error: the event engine made no progress: {} events at t = {:.9g} s "
                                   "({} events run, {} pending); a figure of the machine or workload may be out of range",
                                   at_instant_, now_, events_run_, heap_.size()));
  e.fn(e.ctx, e.arg);
  return true;
}

void EventQueue::run() {
  while (step()) {
  }
}

void EventQueue::reset() {
  heap_.clear();
  now_ = 0;
  seq_ = kLateSeq;
  first_seq_ = 0;
  events_run_ = 0;
  at_instant_ = 0;
}

namespace {

constexpr int64_t kFinish = 0, kActivate = 1, kCheck = 2;

struct TaskEngine {
  std::span<const SimTask> tasks;
  const std::vector<double>& cap;
  EventQueue q;
  TaskRun run;
  std::vector<int> pending;
  // Each task's dependents, in the order they were found (CSR: dep_of[dep_at[t] .. dep_at[t+1])).
  std::vector<int> dep_at, dep_of;
  // Each stream's FIFO of ready tasks: queue[s][head[s]..] (a vector per stream, allocated only
  // when the stream is used: a 64-GPU machine has 128 streams and a segment uses a few).
  std::vector<std::vector<int>> queue;
  std::vector<size_t> head;
  std::vector<char> busy;
  std::vector<int> active;            // flows streaming now, in activation order
  std::vector<double> remaining, rate;
  std::vector<uint32_t> edge_stamp;
  uint32_t stamp = 0;
  SimTime last = 0;
  int64_t gen = 0;
  size_t done = 0;

  TaskEngine(std::span<const SimTask> t, int streams, const std::vector<double>& c)
      : tasks(t), cap(c), pending(t.size()), dep_at(t.size() + 1, 0), queue(size_t(streams)), head(size_t(streams), 0),
        busy(size_t(streams), 0), remaining(t.size(), 0), rate(t.size(), 0), edge_stamp(c.size(), 0) {
    run.timing.resize(t.size());
    run.edge_bytes.assign(c.size(), 0);
    run.edge_busy.assign(c.size(), 0);
  }

  static void dispatch(void* ctx, int64_t arg) {
    auto* e = static_cast<TaskEngine*>(ctx);
    int64_t kind = arg & 3, v = arg >> 2;
    if (kind == kFinish) e->finish(int(v));
    else if (kind == kActivate) e->activate(int(v));
    else e->check(v);
  }
  void at(SimTime t, int64_t kind, int64_t v) { q.schedule(t, dispatch, this, (v << 2) | kind); }

  void ready(int t) {
    run.timing[size_t(t)].ready = q.now();
    const SimTask& k = tasks[size_t(t)];
    if (k.streams.empty()) return start(t);
    for (int s : k.streams) queue[size_t(s)].push_back(t);
    try_start(t);
  }
  bool queued(int s) const { return head[size_t(s)] < queue[size_t(s)].size(); }
  int front(int s) const { return queue[size_t(s)][head[size_t(s)]]; }
  void try_start(int t) {
    const SimTask& k = tasks[size_t(t)];
    for (int s : k.streams)
      if (busy[size_t(s)] || front(s) != t) return;
    for (int s : k.streams) {
      busy[size_t(s)] = 1;
      ++head[size_t(s)];
    }
    start(t);
  }
  void start(int t) {
    const SimTask& k = tasks[size_t(t)];
    run.timing[size_t(t)].start = q.now();
    if (k.flow) at(q.now() + k.gap + k.alpha, kActivate, t);
    else at(q.now() + k.gap + k.duration, kFinish, t);
  }
  void finish(int t) {
    run.timing[size_t(t)].end = q.now();
    run.makespan = std::max(run.makespan, q.now());
    ++done;
    const SimTask& k = tasks[size_t(t)];
    for (int s : k.streams) busy[size_t(s)] = 0;
    for (int i = dep_at[size_t(t)]; i < dep_at[size_t(t) + 1]; ++i)
      if (--pending[size_t(dep_of[size_t(i)])] == 0) ready(dep_of[size_t(i)]);
    for (int s : k.streams)
      if (!busy[size_t(s)] && queued(s)) try_start(front(s));
  }

  // Flows: advance every active flow to now at its current rate.
  void progress() {
    double dt = q.now() - last;
    last = q.now();
    if (dt <= 0 || active.empty()) return;
    ++stamp;
    for (int f : active) {
      remaining[size_t(f)] -= rate[size_t(f)] * dt;
      for (int e : tasks[size_t(f)].edges)
        if (edge_stamp[size_t(e)] != stamp) {
          edge_stamp[size_t(e)] = stamp;
          run.edge_busy[size_t(e)] += dt;
        }
    }
  }
  void rerate() {
    ++gen;
    if (active.empty()) return;
    std::vector<std::vector<int>> fe;
    std::vector<std::vector<double>> fw;
    std::vector<double> demand;
    fe.reserve(active.size());
    demand.reserve(active.size());
    bool weighted = false;
    for (int f : active) {
      fe.push_back(tasks[size_t(f)].edges);
      demand.push_back(tasks[size_t(f)].rate_cap);
      weighted = weighted || !tasks[size_t(f)].edge_weights.empty();
    }
    if (weighted)
      for (int f : active) fw.push_back(tasks[size_t(f)].edge_weights);
    std::vector<double> r = max_min_rates(fe, cap, demand, fw);
    double next = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < active.size(); ++i) {
      int f = active[i];
      rate[size_t(f)] = r[i];
      double left = std::max(0.0, remaining[size_t(f)]);
      double dt = left <= 0 ? 0.0 : (r[i] > 0 ? left / r[i] : std::numeric_limits<double>::infinity());
      next = std::min(next, dt);
    }
    if (next == std::numeric_limits<double>::infinity())
      throw RuntimeError("simulator: a transfer has zero bandwidth (an edge of capacity 0 on its route)");
    at(q.now() + next, kCheck, gen);
  }
  void activate(int t) {
    progress();
    remaining[size_t(t)] = tasks[size_t(t)].bytes;
    active.push_back(t);
    rerate();
  }
  void check(int64_t g) {
    if (g != gen) return;  // superseded by a later re-rating
    progress();
    std::vector<int> fin;
    for (size_t i = 0; i < active.size();) {
      int f = active[i];
      const SimTask& k = tasks[size_t(f)];
      // Done, or so close that the time left is below the clock's resolution at now (the next
      // check would land at this same instant and the engine would never advance).
      bool unrepresentable = rate[size_t(f)] > 0 && q.now() + remaining[size_t(f)] / rate[size_t(f)] <= q.now();
      if (remaining[size_t(f)] <= 1e-9 * std::max(1.0, k.bytes) || unrepresentable) {
        fin.push_back(f);
        for (int e : k.edges) run.edge_bytes[size_t(e)] += k.bytes;
        active.erase(active.begin() + ptrdiff_t(i));
      } else {
        ++i;
      }
    }
    rerate();
    for (int f : fin) finish(f);
  }
};

}  // namespace

TaskRun run_tasks(const std::vector<SimTask>& tasks, int num_streams, const std::vector<double>& edge_capacity) {
  return run_tasks(std::span<const SimTask>(tasks), num_streams, edge_capacity);
}

TaskRun run_tasks(std::span<const SimTask> tasks, int num_streams, const std::vector<double>& edge_capacity) {
  TaskEngine e(tasks, num_streams, edge_capacity);
  const int n = int(tasks.size());
  // Each task schedules a start or activation, a finish and at most one re-rating check per flow
  // event: far fewer than this at one instant unless nothing advances.
  e.q.set_instant_limit(std::max<uint64_t>(EventQueue::kDefaultInstantLimit, 64 * uint64_t(n)));
  for (int t = 0; t < n; ++t) {
    const SimTask& k = tasks[size_t(t)];
    for (int s : k.streams)
      if (s < 0 || s >= num_streams)
        throw RuntimeError("simulator: task " + std::to_string(t) + " uses stream " + std::to_string(s) + " of " +
                           std::to_string(num_streams));
    for (int x : k.edges)
      if (x < 0 || size_t(x) >= edge_capacity.size())
        throw RuntimeError("simulator: task " + std::to_string(t) + " crosses unknown edge " + std::to_string(x));
    for (int d : k.deps) {
      if (d < 0 || d >= n || d == t)
        throw RuntimeError("simulator: task " + std::to_string(t) + " depends on invalid task " + std::to_string(d));
      ++e.dep_at[size_t(d) + 1];
      ++e.pending[size_t(t)];
    }
  }
  // Dependents listed by task in the order the loop above meets them (as push_back per task did).
  for (int t = 0; t < n; ++t) e.dep_at[size_t(t) + 1] += e.dep_at[size_t(t)];
  e.dep_of.resize(size_t(e.dep_at[size_t(n)]));
  {
    std::vector<int> fill(e.dep_at.begin(), e.dep_at.end() - 1);
    for (int t = 0; t < n; ++t)
      for (int d : tasks[size_t(t)].deps) e.dep_of[size_t(fill[size_t(d)]++)] = t;
  }
  for (int t = 0; t < n; ++t)
    if (e.pending[size_t(t)] == 0) e.ready(t);
  e.q.run();
  if (e.done != tasks.size())
    throw RuntimeError("simulator: " + std::to_string(tasks.size() - e.done) +
                       " tasks never ran (a dependency cycle in the op graph)");
  e.run.events = e.q.events_run();
  return std::move(e.run);
}

std::vector<TimeSplit> split_time(const std::vector<SimTask>& tasks, const TaskRun& run, int gpu_count, SimTime t0,
                                  SimTime t1) {
  return split_time(std::span<const SimTask>(tasks), run, gpu_count, t0, t1);
}

std::vector<TimeSplit> split_time(std::span<const SimTask> tasks, const TaskRun& run, int gpu_count, SimTime t0,
                                  SimTime t1) {
  std::vector<TimeSplit> out(size_t(std::max(gpu_count, 0)));
  // Per GPU: boundary points (time, category, +1/-1); sweep and give each slice to the highest-
  // priority category present. All GPUs' points in one vector sorted by (GPU, point): each GPU's
  // points in the order sorting them alone gives (one allocation, not one per GPU).
  struct Point {
    int gpu;
    double t;
    int cat, d;
    bool operator<(const Point& o) const { return std::tie(gpu, t, cat, d) < std::tie(o.gpu, o.t, o.cat, o.d); }
  };
  std::vector<Point> pts;
  auto add = [&](int gpu, double a, double b, int cat) {
    a = std::max(a, t0);
    b = std::min(b, t1);
    if (b <= a || gpu < 0 || gpu >= gpu_count) return;
    pts.push_back({gpu, a, cat, +1});
    pts.push_back({gpu, b, cat, -1});
  };
  for (size_t t = 0; t < tasks.size(); ++t) {
    const SimTask& k = tasks[t];
    const TaskTiming& w = run.timing[t];
    for (int g : k.gpus) {
      add(g, w.start, w.start + k.gap, 2);
      add(g, w.start + k.gap, w.end, int(k.category));
    }
  }
  std::sort(pts.begin(), pts.end());
  size_t i = 0;
  for (size_t g = 0; g < out.size(); ++g) {
    int count[3] = {0, 0, 0};
    double prev = t0, acc[3] = {0, 0, 0};
    for (; i < pts.size() && pts[i].gpu == int(g); ++i) {
      const Point& p = pts[i];
      if (p.t > prev) {
        for (int c = 0; c < 3; ++c)
          if (count[c] > 0) {
            acc[c] += p.t - prev;
            break;
          }
      }
      prev = p.t;
      count[p.cat] += p.d;
    }
    out[g].compute = acc[0];
    out[g].communication = acc[1];
    out[g].sync = acc[2];
    out[g].idle = std::max(0.0, (t1 - t0) - acc[0] - acc[1] - acc[2]);
  }
  return out;
}

}  // namespace peerplan
