#pragma once
// The discrete-event core: an event queue with named types and a tiny API (schedule, run, now),
// as in astra-sim's analytical backend, plus a task engine on top of it whose resources are GPU
// streams (compute stream, copy engine) and the topology's directed edges.
//
// Determinism: events at equal times run in the order they were scheduled (a sequence number
// breaks ties), and nothing depends on addresses or hash order, so the same inputs give
// bit-identical results.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace peerplan {

using SimTime = double;   // seconds
using Bytes = double;     // bytes (double: rates and partial progress are fractional)
using DeviceId = int;     // GPU ordinal

class EventQueue {
 public:
  // A handler is a plain function with a context and an argument: no allocation per event.
  using Handler = void (*)(void* ctx, int64_t arg);

  void schedule(SimTime at, Handler fn, void* ctx, int64_t arg);
  // As schedule, but the event runs before every event scheduled with schedule() at the same time;
  // among themselves, such events run in the order of these calls. For a stream of arrivals fed
  // one at a time: the order is the one scheduling them all up front would give.
  void schedule_first(SimTime at, Handler fn, void* ctx, int64_t arg);
  SimTime now() const { return now_; }
  bool empty() const { return heap_.empty(); }
  size_t pending() const { return heap_.size(); }
  uint64_t events_run() const { return events_run_; }
  bool step();       // runs the earliest event; false if none
  void run();        // until no events are left
  void reset();      // empty queue, time 0
  // Progress guarantee: more than `n` events at one instant means the model is livelocked (e.g.
  // rates so high that every next event lands at the same time); step() then throws a
  // RuntimeError naming the time, the events run and the events pending.
  void set_instant_limit(uint64_t n) { instant_limit_ = n; }
  static constexpr uint64_t kDefaultInstantLimit = 10'000'000;

 private:
  struct Event {
    SimTime at;
    uint64_t seq;
    Handler fn;
    void* ctx;
    int64_t arg;
  };
  static bool later(const Event& a, const Event& b) { return a.at > b.at || (a.at == b.at && a.seq > b.seq); }
  std::vector<Event> heap_;
  SimTime now_ = 0;
  static constexpr uint64_t kLateSeq = 1ull << 63;  // schedule()'s sequence numbers start here
  uint64_t seq_ = kLateSeq;
  uint64_t first_seq_ = 0;
  uint64_t events_run_ = 0;
  uint64_t at_instant_ = 0;  // events run at now_ so far
  uint64_t instant_limit_ = kDefaultInstantLimit;
};

enum class TaskCategory { Compute, Communication, Sync };

// One unit of work. A task starts when its dependencies are done and every stream it holds is
// free (streams serve tasks in the order they became ready, ties by task id). It then spends
// `gap` (launch/sync overhead, counted as Sync) and either `duration` (a kernel or a collective)
// or, for a flow, `alpha` latency followed by `bytes` over `edges` at its max-min fair share of
// the edges' capacity, capped at `rate_cap`. Concurrent flows are re-rated at every flow start
// and finish.
struct SimTask {
  std::vector<int> streams;   // held for the whole task (e.g. {compute stream of gpu 0})
  std::vector<int> deps;      // task indices that must finish first (any order)
  SimTime gap = 0;
  SimTime duration = 0;
  bool flow = false;
  Bytes bytes = 0;
  SimTime alpha = 0;
  double rate_cap = 0;        // bytes/s; <= 0: uncapped
  std::vector<int> edges;     // dense edge indices (an edge listed twice is crossed twice)
  std::vector<double> edge_weights;  // per edge: capacity used per byte/s of rate (empty: 1 each; max_min_rates)
  TaskCategory category = TaskCategory::Compute;
  std::vector<int> gpus;      // GPUs whose time this task occupies (for the time split)
};

struct TaskTiming {
  SimTime ready = 0, start = 0, end = 0;
};

struct TaskRun {
  SimTime makespan = 0;
  std::vector<TaskTiming> timing;
  std::vector<Bytes> edge_bytes;      // bytes carried per edge (x multiplicity)
  std::vector<SimTime> edge_busy;     // time with at least one flow on the edge
  uint64_t events = 0;
};

// Runs a task DAG to completion from time 0. `edge_capacity` is bytes/s per dense edge index.
// Throws RuntimeError for a dependency cycle or an out-of-range index.
TaskRun run_tasks(const std::vector<SimTask>& tasks, int num_streams, const std::vector<double>& edge_capacity);
TaskRun run_tasks(std::span<const SimTask> tasks, int num_streams, const std::vector<double>& edge_capacity);

// Where each GPU's time went between t0 and t1: intervals are attributed with priority
// compute > communication > sync; the rest is idle. Result [gpu] = {compute, comm, sync, idle}.
struct TimeSplit {
  double compute = 0, communication = 0, sync = 0, idle = 0;
};
std::vector<TimeSplit> split_time(const std::vector<SimTask>& tasks, const TaskRun& run, int gpu_count, SimTime t0,
                                  SimTime t1);
std::vector<TimeSplit> split_time(std::span<const SimTask> tasks, const TaskRun& run, int gpu_count, SimTime t0,
                                  SimTime t1);

}  // namespace peerplan
