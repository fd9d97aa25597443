#pragma once
// The profiler measures collectives by the planner's one definition of them (names, nccl-tests'
// size convention and bus-bandwidth factors, CollOp): planner/topology/collective.hpp. The
// profiler's code finds those names from namespace peerplan::profiler unqualified.
#include "planner/topology/collective.hpp"
