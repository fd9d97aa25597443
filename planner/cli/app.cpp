// What every entry point of peerplan shares: the description, the version, the exit codes, and the
// refusal of GPU options in a build without CUDA.
#include <iostream>

#include "planner/cli/commands.hpp"
#include "planner/core/build_info.hpp"
#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/text.hpp"

namespace peerplan::cli {

namespace {
int run_app_unflushed(CLI::App& app, int argc, char** argv);
}

std::string app_description() {
  return "peerplan: how should this model be split across these GPUs, and will the split beat not splitting?\n"
         "\n"
         "Typical session:\n"
         "  peerplan profile --out my-host.json            # measure this host's GPU paths (needs CUDA)\n"
         "  peerplan topo --machine my-host.json           # look at the topology and measured figures\n"
         "  peerplan model models/llm/llama-3.1-8b/config.json\n"
         "  peerplan plan --model llama-3.1-8b --machine my-host.json --workload chat\n"
         "  peerplan validate --plan best.plan.json ...    # run the plan on the GPUs, compare";
}

std::string version_string(bool with_cuda) {
  return std::string("peerplan ") + build::version + (with_cuda ? " (with CUDA profiler)" : " (planner only, no CUDA)");
}

GpuBackend& require_executor(const Executable& exe, const std::string& option) {
  if (!exe.gpu)
    throw InputError("", option,
                     "a peerplan built with the CUDA executor; this one was built without CUDA (planner only). Build "
                     "on a host with the CUDA toolkit and NCCL (scripts/gpu/build.sh, or cmake -S . -B build-gpu "
                     "-DCMAKE_CUDA_ARCHITECTURES=90) and run it on the GPU host");
  return *exe.gpu;
}

int run_app(CLI::App& app, int argc, char** argv) {
  // Names from input files reach the terminal escaped (planner/core/text.hpp); a failed write to
  // standard output (`> /dev/full`) is an error, not a silent exit 0.
  EscapeStandardStreams escaped;
  int rc = run_app_unflushed(app, argc, argv);
  if (!flush_standard_output() && rc == 0) rc = 1;
  return rc;
}

namespace {

int run_app_unflushed(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const InputError& e) {
    std::cerr << "peerplan: error: " << e.what() << "\n";
    return 2;
  } catch (const RuntimeError& e) {
    std::cerr << "peerplan: failed: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "peerplan: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

}  // namespace peerplan::cli
