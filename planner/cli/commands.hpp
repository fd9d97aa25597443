#pragma once
// Each subcommand lives in its own cmd_<name>.cpp and registers itself on the app here: it parses
// options and calls library functions. Callbacks throw peerplan::InputError (exit 2) or
// RuntimeError (exit 1); the entry point maps them.
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "planner/export/engine_export.hpp"

namespace peerplan {
class GpuBackend;
}

namespace peerplan::cli {

// What the executable offers the commands that run on GPUs. The entry point
// (profiler/app/main.cpp) fills it; the planner never includes the profiler.
struct Executable {
  GpuBackend* gpu = nullptr;     // the CUDA executor; nullptr: built without CUDA (planner only)
  bool built_with_mpi = false;   // `--mpi` can run (then gpu->run_ranks starts the MPI session)
};

// The profiler registers `profile` itself (profiler/app/cmd_profile.cpp), between topo and strategies.
void add_model_command(CLI::App& app);
void add_topo_command(CLI::App& app);
void add_strategies_command(CLI::App& app);
void add_plans_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_plan_command(CLI::App& app, const Executable& exe);
void add_validate_command(CLI::App& app, const Executable& exe);
void add_export_command(CLI::App& app);

// `export` and `plan --export` (cmd_export.cpp): the engine named by --engine / --export, a plan
// file's JSON (one plan of a {"plans": [...]} file), and the export printed or written to `out`.
Engine parse_export_engine(const std::string& key);
nlohmann::json load_plan_json(const std::string& path);
void emit_export(Engine e, const ExportRequest& r, bool json, const std::string& out);

// The executor, or InputError (exit 2) naming `option` when this peerplan was built without CUDA.
GpuBackend& require_executor(const Executable& exe, const std::string& option);

// The application's description, version flag and exit codes, shared by every entry point:
// runs `app` on argv and returns the exit status (0 ok, 1 runtime failure, 2 bad usage or input).
int run_app(CLI::App& app, int argc, char** argv);
std::string app_description();
std::string version_string(bool with_cuda);

// Help of --model, one rule for every command (resolve_model_path, planner/model/model_paths.cpp).
inline constexpr const char* kModelHelp =
    "Model: a shipped name (models/llm/<name>), a config.json or its directory, an HF id (org/name) in the "
    "local HuggingFace cache, or a .gguf file";

// Help of the workload overrides, one rule for every command (planner/model/workload.hpp).
inline constexpr const char* kRateHelp =
    "Poisson arrivals at this rate (requests/s), replacing the workload's arrival process; with a trace "
    "workload its timestamps are dropped and its recorded lengths kept (default: the workload's arrivals)";
inline constexpr const char* kRequestsHelp =
    "Number of requests (default: the workload's; with a trace workload, at most the trace's length)";

}  // namespace peerplan::cli
