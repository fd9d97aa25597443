#pragma once
// Reads the `nvidia-smi topo -m` matrix text (as users paste it into issues) as a nominal machine:
// GPU rows and columns of path types (X, NV#, PIX, PXB, PHB, NODE, SYS; the old SOC = SYS), NIC rows
// and columns, CPU / NUMA affinity columns, the legends. The text records no link rates, GPU model
// or memory: those come from `gpu` (a gpu_catalog key) or stay unknown, and every such reading is
// listed in meta.assumptions. docs/topology.md describes the mapping.
#include <string>

#include "planner/topology/machine.hpp"

namespace peerplan {

struct NvidiaSmiTopoOptions {
  std::string gpu;                     // gpu_catalog key ("h100-sxm"); empty: model unknown
  std::string p2p = "same_switch";     // p2p policy (the matrix does not say; NCCL's default level)
};

// `origin` names the file in errors ("topo.txt: field 'line 4 (GPU1), column GPU3': ...").
Machine parse_nvidia_smi_topo(const std::string& text, const std::string& origin,
                              const NvidiaSmiTopoOptions& options = {});

}  // namespace peerplan
