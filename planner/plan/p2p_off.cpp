#include "planner/plan/p2p_off.hpp"

#include <cstring>

namespace peerplan {

Plan p2p_off_variant(const Plan& p) {
  Plan off = p;
  off.p2p = false;
  off.allreduce = ArSetting::Nccl;  // peer-memory kernels need P2P: every engine falls back to NCCL
  off.boundary_modes.assign(p.stages.empty() ? 0 : p.stages.size() - 1, "host_staged");
  off.name = p.name + kP2pOffSuffix;
  return off;
}

std::string without_p2p_off_suffix(const std::string& n) {
  const size_t k = std::strlen(kP2pOffSuffix);
  return n.size() > k && n.compare(n.size() - k, k, kP2pOffSuffix) == 0 ? n.substr(0, n.size() - k) : n;
}

}  // namespace peerplan
