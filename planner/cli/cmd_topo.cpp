// `peerplan topo`: show a machine (hypothetical, measured profile, or NCCL topology XML) as
// nvidia-smi-style matrices, JSON or Graphviz DOT.
#include <iostream>
#include <memory>

#include "planner/cli/commands.hpp"
#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/topology/gpu_catalog.hpp"
#include "planner/topology/nvidia_smi_topo.hpp"
#include "planner/topology/render.hpp"

namespace peerplan::cli {

namespace {

struct TopoOptions {
  std::string machine;
  std::string nvidia_smi;  // `nvidia-smi topo -m` text file
  std::string gpu;
  std::string p2p = "same_switch";
  std::string format = "matrix";
  std::string out;
};

Machine load(const TopoOptions& o) {
  if (!o.machine.empty() && !o.nvidia_smi.empty())
    throw InputError("", "--from-nvidia-smi", "either --machine or --from-nvidia-smi, not both");
  if (o.nvidia_smi.empty()) {
    if (o.machine.empty()) throw InputError("", "--machine", "a machine file or shipped machine name (or --from-nvidia-smi FILE)");
    if (!o.gpu.empty()) throw InputError("", "--gpu", "only with --from-nvidia-smi (a machine file names its GPUs)");
    return load_machine(resolve_machine_path(o.machine));
  }
  return parse_nvidia_smi_topo(read_input_file(o.nvidia_smi, file_kind::kMachine), o.nvidia_smi,
                               NvidiaSmiTopoOptions{o.gpu, o.p2p});
}

void run_topo(const TopoOptions& o) {
  Machine m = load(o);
  // What the loader skipped (NCCL XML: self-targeted or dangling NVLinks) goes to stderr whatever the format.
  if (m.meta.contains("warnings") && m.meta["warnings"].is_array())
    for (const auto& w : m.meta["warnings"])
      if (w.is_string()) std::cerr << "peerplan: warning: " << m.source_file << ": " << w.get<std::string>() << "\n";
  if (o.format == "machine") {
    std::string text = machine_to_json(m).dump(2) + "\n";
    if (o.out.empty()) std::cout << text;
    else write_file_atomic(o.out, text);
    return;
  }
  Topology t(m);
  if (o.format == "json" && o.out.empty()) {  // 1024 GPUs: ~400 MB, streamed rather than held
    render_json_text(t, [](std::string_view part) { std::cout << part; });
    std::cout << "\n";
    return;
  }
  std::string text;
  if (o.format == "matrix") text = render_matrix(t);
  else if (o.format == "json") text = render_json_text(t) + "\n";
  else if (o.format == "dot") text = render_dot(t);
  else throw InputError("", "--format", "expected matrix, json, dot or machine, found \"" + o.format + "\"");
  if (o.out.empty()) std::cout << text;
  else write_file_atomic(o.out, text);
}

}  // namespace

void add_topo_command(CLI::App& app) {
  auto opts = std::make_shared<TopoOptions>();
  auto* sub = app.add_subcommand("topo", "Show a machine's GPU topology: path types, bandwidths, P2P, groups");
  sub->footer(
      "MACHINE is a machine JSON (docs/schema.md), a profile written by `peerplan profile`, an NCCL topology\n"
      "XML (what NCCL_TOPO_DUMP_FILE=topo.xml writes, or an NCCL_TOPO_FILE skeleton a cloud image ships), or\n"
      "the name of a shipped machine (models/hardware/; an unknown name lists them).\n"
      "\n"
      "--from-nvidia-smi FILE reads the `nvidia-smi topo -m` text instead (as pasted into an issue): path\n"
      "types become a PCIe tree per socket plus NVLinks, link rates nominal by link type. The text names no\n"
      "GPU model: give --gpu (h100-sxm, h200, h20, a100-sxm4-80gb, l40s, rtx-4090, rtx-3090, ...) for memory\n"
      "and compute figures, and --p2p none for GPUs without peer access (GeForce). Every such reading is\n"
      "printed as an assumption; --format machine writes the machine JSON to edit and plan with.\n"
      "\n"
      "The matrix view reads like `nvidia-smi topo -m`, followed by per-pair bandwidth (GB/s per direction),\n"
      "host-staged bandwidth, latency and P2P capability. Figures marked m are measured (a profile), n nominal.\n"
      "\n"
      "Examples:\n"
      "  peerplan topo --machine hgx-h100x8\n"
      "  peerplan topo --machine my-host.json --format json > topo.json\n"
      "  peerplan topo --machine pcie-gen5x8-2socket --format dot | dot -Tsvg > topo.svg\n"
      "  peerplan topo --machine /opt/microsoft/ndv5-topo.xml\n"
      "  nvidia-smi topo -m > topo.txt; peerplan topo --from-nvidia-smi topo.txt --gpu h100-sxm \\\n"
      "      --format machine -o my-host.json && peerplan plan --machine my-host.json --model llama-3.1-70b");
  sub->add_option("--machine,-m", opts->machine, "Machine file (JSON or NCCL XML) or shipped machine name");
  sub->add_option("--from-nvidia-smi", opts->nvidia_smi, "Read the `nvidia-smi topo -m` text in this file instead");
  sub->add_option("--gpu", opts->gpu, "With --from-nvidia-smi: the GPU model (" + gpu_catalog_keys() + ")");
  sub->add_option("--p2p", opts->p2p, "With --from-nvidia-smi: peer-access policy (default same_switch)")
      ->check(CLI::IsMember({"all", "nvlink_only", "same_switch", "none"}));
  sub->add_option("--format,-f", opts->format, "Output: matrix (default), json, dot, machine (the machine JSON)")
      ->check(CLI::IsMember({"matrix", "json", "dot", "machine"}));
  sub->add_option("--out,-o", opts->out, "Write to this file (atomically) instead of stdout");
  sub->callback([opts] { run_topo(*opts); });
}

}  // namespace peerplan::cli
