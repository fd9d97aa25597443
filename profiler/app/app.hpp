#pragma once
// The executable's own parts (profiler/app): the entry point wires the planner's commands
// (planner/cli) to the profiler's GPU backend; `profile` is the profiler's command.
#include <CLI/CLI.hpp>

namespace peerplan::app {

// `peerplan profile` (cmd_profile.cpp). `built_with_mpi`: `--mpi` can run.
void add_profile_command(CLI::App& app, bool built_with_mpi);

}  // namespace peerplan::app
