// The event engine guarantees progress (issue 21, class 4): no input can livelock it.
#include <string>

#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/sim/engine.hpp"

using namespace peerplan;

namespace {

// A handler that schedules itself again at the same instant, forever.
void again(void* ctx, int64_t) {
  auto* q = static_cast<EventQueue*>(ctx);
  q->schedule(q->now(), again, q, 0);
}

}  // namespace

TEST(EngineProgress, EventsThatNeverAdvanceTimeStopWithAnErrorNamingTheState) {
  // Before: run() never returned. Now: past the bound of events at one instant, a RuntimeError
  // (exit 1, an internal error) that says when and how many events ran.
  EventQueue q;
  q.set_instant_limit(1000);
  q.schedule(2.5, again, &q, 0);
  try {
    q.run();
    FAIL() << "a livelocked queue must stop";
  } catch (const RuntimeError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("no progress"), std::string::npos) << m;
    EXPECT_NE(m.find("1001 events at t = 2.5"), std::string::npos) << m;
  }
}

TEST(EngineProgress, ManyEventsAtOneInstantBelowTheBoundAreFine) {
  EventQueue q;
  q.set_instant_limit(1000);
  int ran = 0;
  struct Ctx {
    int* ran;
  } ctx{&ran};
  for (int i = 0; i < 1000; ++i)
    q.schedule(1.0, [](void* c, int64_t) { ++*static_cast<Ctx*>(c)->ran; }, &ctx, i);
  q.run();
  EXPECT_EQ(ran, 1000);
}

TEST(EngineProgress, AFlowTooFastForTheClockStillFinishes) {
  // A kernel of 1 s, then 1 GB over an edge of 1e25 B/s: 1e-16 s of transfer, which 1.0 + 1e-16
  // cannot represent. The flow never advanced and the engine re-rated it at t = 1 forever; now it
  // completes at t = 1.
  std::vector<SimTask> tasks(2);
  tasks[0].streams = {0};
  tasks[0].duration = 1.0;
  tasks[1].flow = true;
  tasks[1].bytes = 1e9;
  tasks[1].edges = {0};
  tasks[1].deps = {0};
  TaskRun r = run_tasks(tasks, 1, {1e25});
  EXPECT_DOUBLE_EQ(r.makespan, 1.0);
  EXPECT_DOUBLE_EQ(r.timing[1].end, 1.0);
}

TEST(EngineProgress, ScheduleFirstRunsBeforeEqualTimeEvents) {
  // Arrivals fed one at a time must keep the order scheduling all of them up front gave.
  EventQueue q;
  std::vector<int64_t> order;
  auto rec = [](void* c, int64_t a) { static_cast<std::vector<int64_t>*>(c)->push_back(a); };
  q.schedule(1.0, rec, &order, 10);
  q.schedule_first(1.0, rec, &order, 1);
  q.schedule_first(1.0, rec, &order, 2);
  q.schedule(0.5, rec, &order, 0);
  q.run();
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 10}));
}
