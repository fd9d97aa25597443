#include "planner/sim/engine.hpp"

#include <gtest/gtest.h>

#include "planner/core/error.hpp"

using namespace peerplan;

namespace {
struct Log {
  std::vector<int64_t> order;
  EventQueue* q = nullptr;
};
void record(void* ctx, int64_t arg) { static_cast<Log*>(ctx)->order.push_back(arg); }

SimTask flow(double bytes, std::vector<int> edges) {
  SimTask t;
  t.flow = true;
  t.bytes = bytes;
  t.edges = std::move(edges);
  t.category = TaskCategory::Communication;
  return t;
}
SimTask kernel(int stream, double d, std::vector<int> deps = {}) {
  SimTask t;
  t.streams = {stream};
  t.duration = d;
  t.deps = std::move(deps);
  t.gpus = {stream};
  return t;
}
}  // namespace

TEST(EventQueue, RunsInTimeOrderAndEqualTimesInScheduleOrder) {
  EventQueue q;
  Log log;
  q.schedule(2.0, record, &log, 3);
  q.schedule(1.0, record, &log, 1);
  q.schedule(1.0, record, &log, 2);
  q.run();
  EXPECT_EQ(log.order, (std::vector<int64_t>{1, 2, 3})) << "ties keep scheduling order: deterministic";
  EXPECT_DOUBLE_EQ(q.now(), 2.0);
  EXPECT_EQ(q.events_run(), 3u);
}

TEST(TaskEngine, TwoFlowsOnOneEdgeEachGetHalf) {
  // Two 100 MB flows on one 100 GB/s edge start together: each gets 50 GB/s (max-min fair), so
  // both finish at 2 ms instead of 1 ms.
  std::vector<SimTask> t = {flow(100e6, {0}), flow(100e6, {0})};
  TaskRun r = run_tasks(t, 0, {100e9});
  EXPECT_NEAR(r.timing[0].end, 2e-3, 1e-12);
  EXPECT_NEAR(r.timing[1].end, 2e-3, 1e-12);
  EXPECT_NEAR(r.edge_bytes[0], 200e6, 1e-3);
  EXPECT_NEAR(r.edge_busy[0], 2e-3, 1e-12);
}

TEST(TaskEngine, FlowsAreReRatedWhenOneFinishes) {
  // 50 MB and 150 MB on 100 GB/s: both at 50 GB/s until the small one ends at 1 ms (the big one has
  // 100 MB left), then the big one alone at 100 GB/s: ends at 2 ms.
  std::vector<SimTask> t = {flow(50e6, {0}), flow(150e6, {0})};
  TaskRun r = run_tasks(t, 0, {100e9});
  EXPECT_NEAR(r.timing[0].end, 1e-3, 1e-12);
  EXPECT_NEAR(r.timing[1].end, 2e-3, 1e-12);
}

TEST(TaskEngine, RateCapAndAlphaReproduceALoneTransfer) {
  SimTask f = flow(10e6, {0});
  f.alpha = 5e-6;
  f.rate_cap = 10e9;
  TaskRun r = run_tasks({f}, 0, {100e9});
  EXPECT_NEAR(r.timing[0].end, 5e-6 + 1e-3, 1e-12) << "alpha + bytes / cap on an idle edge";
}

TEST(TaskEngine, AStreamRunsOneKernelAtATimeAndDependenciesHold) {
  // Two kernels on stream 0 serialise; a third on stream 1 waits for the first.
  std::vector<SimTask> t = {kernel(0, 1.0), kernel(0, 2.0), kernel(1, 0.5, {0})};
  t[0].gap = 0.25;
  TaskRun r = run_tasks(t, 2, {});
  EXPECT_DOUBLE_EQ(r.timing[0].end, 1.25);
  EXPECT_DOUBLE_EQ(r.timing[1].start, 1.25);
  EXPECT_DOUBLE_EQ(r.timing[1].end, 3.25);
  EXPECT_DOUBLE_EQ(r.timing[2].start, 1.25);
  EXPECT_DOUBLE_EQ(r.makespan, 3.25);
  auto split = split_time(t, r, 2, 0, r.makespan);
  EXPECT_DOUBLE_EQ(split[0].compute, 3.0);
  EXPECT_DOUBLE_EQ(split[0].sync, 0.25) << "the launch gap";
  EXPECT_DOUBLE_EQ(split[1].idle, 3.25 - 0.5);
}

TEST(TaskEngine, CollectiveHoldsEveryStreamOfItsGroup) {
  SimTask ar;
  ar.streams = {0, 1};
  ar.duration = 1.0;
  ar.category = TaskCategory::Communication;
  ar.gpus = {0, 1};
  std::vector<SimTask> t = {kernel(0, 2.0), ar};
  TaskRun r = run_tasks(t, 2, {});
  EXPECT_DOUBLE_EQ(r.timing[1].start, 2.0) << "waits for GPU 0's stream although GPU 1 is free";
  auto split = split_time(t, r, 2, 0, 3.0);
  EXPECT_DOUBLE_EQ(split[1].communication, 1.0);
  EXPECT_DOUBLE_EQ(split[1].idle, 2.0);
}

TEST(TaskEngine, ACycleIsReported) {
  std::vector<SimTask> t = {kernel(0, 1.0, {1}), kernel(0, 1.0, {0})};
  EXPECT_THROW(run_tasks(t, 1, {}), RuntimeError);
}

TEST(TaskEngine, SameInputsGiveBitIdenticalTimes) {
  std::vector<SimTask> t;
  for (int i = 0; i < 50; ++i) {
    SimTask f = flow(1e6 * (i % 7 + 1), {i % 3, (i + 1) % 3});
    f.alpha = 1e-6 * (i % 5);
    if (i > 3) f.deps = {i - 3};
    t.push_back(f);
  }
  TaskRun a = run_tasks(t, 0, {10e9, 20e9, 30e9});
  TaskRun b = run_tasks(t, 0, {10e9, 20e9, 30e9});
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(a.timing[i].end, b.timing[i].end);
}
