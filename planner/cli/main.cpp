// peerplan: measure a multi-GPU host, script partitioning strategies, simulate serving, validate.
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>

#include "planner/core/build_info.hpp"
#include "planner/cli/commands.hpp"
#include "planner/core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "peerplan: how should this model be split across these GPUs, and will the split beat not splitting?\n"
      "\n"
      "Typical session:\n"
      "  peerplan profile --out my-host.json            # measure this host's GPU paths (needs CUDA)\n"
      "  peerplan topo --machine my-host.json           # look at the topology and measured figures\n"
      "  peerplan model models/llm/llama-3.1-8b/config.json\n"
      "  peerplan plan --model llama-3.1-8b --machine my-host.json --workload chat\n"
      "  peerplan validate --plan best.plan.json ...    # run the plan on the GPUs, compare",
      "peerplan"};
  app.set_version_flag("--version", std::string("peerplan ") + peerplan::build::version +
                                        (peerplan::build::with_cuda ? " (with CUDA profiler)" : " (planner only, no CUDA)"));
  app.require_subcommand(1);
  app.fallthrough();

  peerplan::cli::add_model_command(app);
  peerplan::cli::add_topo_command(app);
  peerplan::cli::add_profile_command(app);
  peerplan::cli::add_strategies_command(app);
  peerplan::cli::add_plans_command(app);
  peerplan::cli::add_simulate_command(app);
  peerplan::cli::add_plan_command(app);
  peerplan::cli::add_validate_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const peerplan::InputError& e) {
    std::cerr << "peerplan: error: " << e.what() << "\n";
    return 2;
  } catch (const peerplan::RuntimeError& e) {
    std::cerr << "peerplan: failed: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "peerplan: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
