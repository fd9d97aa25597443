// Placeholder registration: replaced by the real command (see issues). Refuses to run.
#include "planner/cli/commands.hpp"
#include "planner/core/error.hpp"

namespace peerplan::cli {

void add_topo_command(CLI::App& app) {
  auto* sub = app.add_subcommand("topo", "(not built yet)");
  sub->allow_extras();
  sub->callback([] { throw RuntimeError("'topo' is not implemented in this build yet"); });
}

}  // namespace peerplan::cli
