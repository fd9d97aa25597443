// Placeholder registration: replaced by the real command (see issues). Refuses to run.
#include "planner/cli/commands.hpp"
#include "planner/core/error.hpp"

namespace peerplan::cli {

void add_profile_command(CLI::App& app) {
  auto* sub = app.add_subcommand("profile", "(not built yet)");
  sub->allow_extras();
  sub->callback([] { throw RuntimeError("'profile' is not implemented in this build yet"); });
}

}  // namespace peerplan::cli
