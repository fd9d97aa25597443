#pragma once
// Each subcommand lives in its own cmd_<name>.cpp and registers itself on the app here.
// Callbacks throw peerplan::InputError (exit 2) or RuntimeError (exit 1); main maps them.
#include <CLI/CLI.hpp>

namespace peerplan::cli {

void add_model_command(CLI::App& app);
void add_topo_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_strategies_command(CLI::App& app);
void add_plans_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_validate_command(CLI::App& app);

}  // namespace peerplan::cli
