#include "planner/sim/serving.hpp"

#include <deque>
#include <map>

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
  std::map<int64_t, size_t> req_index;

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

  void arrive(size_t i) {
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
      RequestTiming& t = run.requests[req_index.at(e.request_id)];
      if (e.kind == SchedulerEvent::Kind::FirstToken) t.first_token_s = q.now();
      if (e.kind == SchedulerEvent::Kind::Finished) t.finish_s = q.now();
    }
    run.end_s = q.now();
    launch();
  }
};

}  // namespace

ServingRun run_serving(const std::vector<Request>& requests, Scheduler& sched, IterationPricer& pricer, int gpu_count,
                       int edge_count, size_t record_limit) {
  ServingSim s(requests, sched, pricer, record_limit);
  s.run.gpu.assign(size_t(std::max(gpu_count, 0)), TimeSplit{});
  s.run.edge_bytes.assign(size_t(std::max(edge_count, 0)), 0.0);
  s.run.edge_busy_s.assign(size_t(std::max(edge_count, 0)), 0.0);
  s.run.requests.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    s.req_index[r.id] = i;
    RequestTiming t;
    t.id = r.id;
    t.arrival_s = r.arrival_s;
    t.prompt_tokens = r.prompt_tokens;
    t.output_tokens = r.output_tokens;
    s.run.requests.push_back(t);
    s.q.schedule(r.arrival_s, ServingSim::dispatch, &s, (int64_t(i) << 1) | kArrival);
  }
  s.q.run();
  s.run.events = s.q.events_run();
  return std::move(s.run);
}

}  // namespace peerplan
