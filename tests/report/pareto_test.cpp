// The Pareto front of tokens/s per GPU against tokens/s per user (planner/report/pareto.hpp): known
// answers with a dominated point, ties, duplicates and non-finite figures.
#include "planner/report/pareto.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

using namespace peerplan;

TEST(Pareto, DominatedPointsLeaveTheFront) {
  // (per GPU, per user): C is beaten by B in both; D is beaten by A in per-user at the same per-GPU.
  const std::vector<ParetoPoint> p = {{100, 10}, {60, 40}, {50, 30}, {100, 8}, {20, 80}};
  EXPECT_EQ(pareto_front(p), (std::vector<size_t>{0, 1, 4})) << "highest tokens/s per GPU first";
}

TEST(Pareto, TiesAndDuplicates) {
  // Equal in one figure and worse in the other: dominated. Identical points: both kept.
  EXPECT_EQ(pareto_front({{50, 20}, {50, 30}}), (std::vector<size_t>{1}));
  EXPECT_EQ(pareto_front({{70, 20}, {50, 20}}), (std::vector<size_t>{0}));
  EXPECT_EQ(pareto_front({{50, 20}, {50, 20}, {10, 5}}), (std::vector<size_t>{0, 1}));
  // A single point and no points.
  EXPECT_EQ(pareto_front({{1, 1}}), (std::vector<size_t>{0}));
  EXPECT_TRUE(pareto_front({}).empty());
}

TEST(Pareto, EveryPointOnAStrictTradeOff) {
  // Strictly decreasing per-user as per-GPU grows: nothing dominates anything.
  const std::vector<ParetoPoint> p = {{10, 90}, {40, 60}, {30, 70}, {90, 5}};
  EXPECT_EQ(pareto_front(p), (std::vector<size_t>{3, 1, 2, 0}));
}

TEST(Pareto, NonFiniteFiguresAreLeftOut) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  EXPECT_EQ(pareto_front({{inf, 1}, {5, 5}, {nan, 100}, {4, 6}}), (std::vector<size_t>{1, 3}));
}
