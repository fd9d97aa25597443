#pragma once
// The P2P-off variant of a plan, one definition for the search (which simulates both variants)
// and `validate --p2p off` (which executes it): no peer access, collectives as with
// NCCL_P2P_DISABLE=1, every stage boundary staged through host memory.
#include <string>

#include "planner/plan/plan.hpp"

namespace peerplan {

inline constexpr const char* kP2pOffSuffix = " p2p-off";  // appended to the plan's name

Plan p2p_off_variant(const Plan& p);

// The plan's name without the P2P-off suffix ("tp2[0,1] p2p-off" -> "tp2[0,1]"); others unchanged.
std::string without_p2p_off_suffix(const std::string& name);

}  // namespace peerplan
