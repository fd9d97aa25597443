#pragma once
// Fuzz targets "machine" (machine / profile JSON) and "nccl_xml" (NCCL_TOPO_DUMP_FILE). An
// accepted machine must build a Topology, answer routes, path types and groups for every GPU pair,
// and survive a round trip: what machine_to_json writes, parse_machine_json must read back
// (a profile the tool writes but cannot read is a lost measurement). The one exception is by
// design: NCCL's XML carries no GPU memory, so an imported GPU of a model the importer does not
// know keeps memory_bytes = 0 ("unknown") and its JSON asks the user to fill it in.
#include <string>

#include "planner/topology/machine.hpp"
#include "planner/topology/topology.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace peerplan::fuzz {

inline void exercise_machine(const Machine& m, const std::string& origin, bool from_nccl_xml = false) {
  FUZZ_CHECK(!m.gpus.empty(), "accepted a machine without GPUs");
  bool memory_unknown = false;
  for (size_t i = 0; i < m.gpus.size(); ++i) {
    FUZZ_CHECK(m.gpus[i].id == int(i), "GPU ids must be dense 0..N-1");
    FUZZ_CHECK(m.gpus[i].memory_bytes > 0 || (from_nccl_xml && m.gpus[i].memory_bytes == 0),
               "accepted a GPU with no memory");
    memory_unknown = memory_unknown || m.gpus[i].memory_bytes == 0;
  }
  for (const auto& l : m.links) {
    FUZZ_CHECK(l.a != l.b, "accepted a self-loop " + l.a);
    FUZZ_CHECK(link_capacity_gbps(l) > 0, "accepted a link " + l.a + "-" + l.b + " with no capacity");
  }
  Topology topo(m);
  const int n = topo.gpu_count();
  if (n <= 16) {
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        (void)topo.path_type(a, b);
        if (a == b) continue;
        for (auto mode : {TransferMode::PeerCopyEngine, TransferMode::PeerKernel, TransferMode::RuntimeNoP2P,
                          TransferMode::HostStaged}) {
          Route r = topo.route(a, b, mode);
          if (r.valid) FUZZ_CHECK(r.bottleneck_Bps > 0 && !r.edges.empty(), "a valid route with no capacity: " + r.describe);
          else FUZZ_CHECK(!r.why_invalid.empty(), "an invalid route must say why");
        }
      }
    (void)topo.nvlink_islands();
    (void)topo.switch_groups();
    (void)topo.socket_groups();
    (void)topo.symmetry_classes();
  }
  if (memory_unknown) return;  // its JSON is incomplete on purpose (see above)
  const std::string text = machine_to_json(m).dump();
  bool reread = accepts(origin, [&] { (void)parse_machine_json(text, origin); });
  FUZZ_CHECK(reread, "machine_to_json wrote a machine that parse_machine_json rejects:\n" + text.substr(0, 2000));
}

inline bool fuzz_machine(const std::string& data) {
  const std::string origin = "fuzz/machine.json";
  return accepts(origin, [&] { exercise_machine(parse_machine_json(data, origin), origin); });
}

inline bool fuzz_nccl_xml(const std::string& data) {
  const std::string origin = "fuzz/topo.xml";
  return accepts(origin, [&] { exercise_machine(parse_nccl_xml(data, origin), origin, true); });
}

}  // namespace peerplan::fuzz
