// `peerplan topo`: show a machine (hypothetical, measured profile, or NCCL topology XML) as
// nvidia-smi-style matrices, JSON or Graphviz DOT.
#include <iostream>
#include <memory>

#include "planner/cli/commands.hpp"
#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/topology/render.hpp"

namespace peerplan::cli {

namespace {

struct TopoOptions {
  std::string machine;
  std::string format = "matrix";
  std::string out;
};

void run_topo(const TopoOptions& o) {
  Machine m = load_machine(resolve_machine_path(o.machine));
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
  else throw InputError("", "--format", "expected matrix, json or dot, found \"" + o.format + "\"");
  if (o.out.empty()) std::cout << text;
  else write_file_atomic(o.out, text);
}

}  // namespace

void add_topo_command(CLI::App& app) {
  auto opts = std::make_shared<TopoOptions>();
  auto* sub = app.add_subcommand("topo", "Show a machine's GPU topology: path types, bandwidths, P2P, groups");
  sub->footer(
      "MACHINE is a machine JSON (docs/schema.md), a profile written by `peerplan profile`, an NCCL topology\n"
      "XML (NCCL_TOPO_DUMP_FILE=topo.xml while running any NCCL program), or the name of a shipped machine:\n"
      "hgx-h100x8, pcie-gen5x8-2socket, pcie-gen4x4-nop2p, h200x2-nvlink (models/hardware/).\n"
      "\n"
      "The matrix view reads like `nvidia-smi topo -m`, followed by per-pair bandwidth (GB/s per direction),\n"
      "host-staged bandwidth, latency and P2P capability. Figures marked m are measured (a profile), n nominal.\n"
      "\n"
      "Examples:\n"
      "  peerplan topo --machine hgx-h100x8\n"
      "  peerplan topo --machine my-host.json --format json > topo.json\n"
      "  peerplan topo --machine pcie-gen5x8-2socket --format dot | dot -Tsvg > topo.svg");
  sub->add_option("--machine,-m", opts->machine, "Machine file or shipped machine name")->required();
  sub->add_option("--format,-f", opts->format, "Output: matrix (default), json, dot")
      ->check(CLI::IsMember({"matrix", "json", "dot"}));
  sub->add_option("--out,-o", opts->out, "Write to this file (atomically) instead of stdout");
  sub->callback([opts] { run_topo(*opts); });
}

}  // namespace peerplan::cli
