// peerplan's entry point: the only code that sees both halves. The planner's commands
// (planner/cli) declare the GPU backend they need (planner/validate/gpu_backend.hpp); the profiler
// implements it (profiler/exec/backend.hpp). A build without CUDA passes no backend, and the GPU
// commands then refuse with the reason (exit 2).
#include <memory>

#include <CLI/CLI.hpp>

#include "planner/cli/commands.hpp"
#include "planner/validate/gpu_backend.hpp"
#include "profiler/app/app.hpp"
#ifdef PEERPLAN_WITH_CUDA
#include "profiler/exec/backend.hpp"
#endif

int main(int argc, char** argv) {
  namespace cli = peerplan::cli;
  std::unique_ptr<peerplan::GpuBackend> backend;
#ifdef PEERPLAN_WITH_CUDA
  backend = peerplan::exec::make_cuda_backend();  // touches no GPU until a command uses it
#endif
  cli::Executable exe;
  exe.gpu = backend.get();
#ifdef PEERPLAN_WITH_MPI
  exe.built_with_mpi = true;
#endif

  CLI::App app{cli::app_description(), "peerplan"};
  app.set_version_flag("--version", cli::version_string(exe.gpu != nullptr));
  app.require_subcommand(1);
  app.fallthrough();
  cli::add_model_command(app);
  cli::add_topo_command(app);
  peerplan::app::add_profile_command(app, exe.built_with_mpi);
  cli::add_strategies_command(app);
  cli::add_plans_command(app);
  cli::add_simulate_command(app);
  cli::add_plan_command(app, exe);
  cli::add_validate_command(app, exe);
  cli::add_export_command(app);
  return cli::run_app(app, argc, argv);
}
