#include "planner/topology/transfer_curves.hpp"

namespace peerplan {

const char* measurement_mode(TransferMode m) {
  switch (m) {
    case TransferMode::PeerCopyEngine: return "p2p_ce";
    case TransferMode::PeerKernel: return "p2p_sm_write";
    case TransferMode::RuntimeNoP2P: return "nop2p_runtime";
    case TransferMode::HostStaged: return "host_staged";
  }
  return "?";
}

const TransferCurve* find_network_curve(const Topology& topo, const Measurements* meas, int src, int dst) {
  if (!meas) return nullptr;
  if (const TransferCurve* c = meas->find_transfer(src, dst, "net_nccl"); c && !c->points.empty()) return c;
  for (const TransferCurve& t : meas->transfers)
    if (t.mode == "net_nccl" && !t.points.empty() && t.src >= 0 && t.dst >= 0 && t.src < topo.gpu_count() &&
        t.dst < topo.gpu_count() && topo.host_of(t.src) == topo.host_of(src) && topo.host_of(t.dst) == topo.host_of(dst))
      return &t;
  return nullptr;
}

const TransferCurve* pair_transfer_curve(const Topology& topo, int src, int dst, TransferMode mode) {
  const auto& meas = topo.machine().measurements;
  if (!meas) return nullptr;
  if (topo.host_of(src) != topo.host_of(dst)) return find_network_curve(topo, &*meas, src, dst);
  if (mode == TransferMode::HostStaged)
    if (const TransferCurve* c = meas->find_transfer(src, dst, "host_staged", "numa_local")) return c;
  return meas->find_transfer(src, dst, measurement_mode(mode));
}

}  // namespace peerplan
