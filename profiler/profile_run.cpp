// run_profile: discovery, functional P2P check, then the selected measurements in registry order,
// rewriting the profile (atomically) after each one so --resume can continue after a crash.

#include <chrono>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "profiler/common/checkpoint.hpp"
#include "profiler/common/child_process.hpp"
#include "profiler/common/registry.hpp"
#include "profiler/common/summary.hpp"
#include "profiler/discovery/discovery.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/common/profile_models.hpp"
#include "profiler/measure/context.hpp"
#include "profiler/measure/nccl_sweep.hpp"
#include "profiler/profile_api.hpp"

namespace peerplan::profiler {


namespace {


// The P2P-off NCCL child: no discovery output, just the sweep, written to opts.nccl_child_out.
void run_nccl_child(const ProfileOptions& opts, const SweepPlan& plan) {
  Machine m;
  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  for (int i = 0; i < n; ++i) { GpuSpec g; g.id = i; m.gpus.push_back(g); }
  Measurements ms;
  Progress progress(false, 1);
  Context ctx{opts, plan, m, ms, progress, ""};
  run_nccl_sweep(ctx, plan.nop2p_collective_sizes, false);
  write_file_atomic(opts.nccl_child_out, measurements_to_json(ms).dump());
}

}  // namespace

void run_profile(const ProfileOptions& opts) {
  // Never NVLink multicast (NVLS): on shared hosts it can take GPUs out of service. Set before
  // any NCCL call; children inherit it explicitly (nccl_nop2p.cpp).
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  auto t_start = std::chrono::steady_clock::now();
  SweepPlan plan = plan_sweep(opts);
  if (!opts.nccl_child_out.empty()) return run_nccl_child(opts, plan);

  auto selected = select_measurements(opts.only, opts.skip);
  // Load the models now, so a bad --model fails before minutes of measuring.
  for (const auto* m : selected)
    if (m->uses_models) { load_profile_models(opts.models); break; }

  Machine machine = discover_machine();
  if (!opts.name.empty()) machine.name = opts.name;
  check_p2p_functional(machine);
  Measurements ms;
  CheckpointState state;
  state.options = sweep_fingerprint(opts);
  if (!opts.resume.empty()) {
    Machine prev = load_machine(opts.resume);
    check_resume_compatible(prev, machine, state.options);
    if (prev.measurements) ms = *prev.measurements;
    state.completed = read_checkpoint_state(prev).completed;
    std::cerr << "profile: resuming " << opts.resume << ": " << state.completed.size() << " measurement(s) already done\n";
  }
  auto todo = remaining_after_resume(selected, state.completed);
  ms.meta["host"] = machine.host;
  ms.meta["date"] = machine.date;
  ms.meta["driver"] = machine.meta.value("driver", "unknown");
  ms.meta["cuda_runtime"] = machine.meta.value("cuda_runtime", "unknown");
  ms.meta["nccl"] = machine.meta.value("nccl", "unknown");
  ms.meta["method"] = "copies timed behind a spin kernel (nvbandwidth); NCCL as nccl-tests (ncclCommInitAll, group calls, "
                      "busBw formulas); medians of >= samples per point";
  ms.meta["samples_per_point"] = plan.samples;
  if (machine.gpu_count() < 2) ms.extra["p2p_unavailable"] = "one GPU: no peer pairs";
  else if (!machine.p2p.empty()) {
    bool any = false;
    for (int i = 0; i < machine.gpu_count(); ++i)
      for (int j = 0; j < machine.gpu_count(); ++j) any |= i != j && machine.p2p[size_t(i)][size_t(j)].usable();
    if (!any) ms.extra["p2p_unavailable"] = "no GPU pair has usable peer access (see the p2p matrix notes)";
  }

  double total_est = 0;
  for (const auto* m : todo) total_est += m->est_seconds * (opts.quick ? 0.2 : 1.0);
  Progress progress(opts.progress, total_est);
  Context ctx{opts, plan, machine, ms, progress, self_exe("the P2P-off NCCL child")};
  auto save = [&](bool complete) {
    state.complete = complete;
    machine.measurements = ms;
    write_checkpoint_state(machine, state);
    save_profile(machine, opts.out);
  };
  save(false);  // the discovery alone is already a valid machine file
  for (const auto* m : todo) {
    progress.begin(m->name, m->est_seconds * (opts.quick ? 0.2 : 1.0));
    auto t0 = std::chrono::steady_clock::now();
    measure_fn(*m)(ctx);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ms.extra["timing_s"][m->name] = dt;
    progress.end();
    state.completed.push_back(m->name);
    save(false);
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  ms.extra["wall_s"] = wall;
  save(true);
  progress.finish();
  std::cout << summary_table(machine);
  std::cout << fmt::format("\nWrote {} ({:.1f} s wall).\n", opts.out, wall);
}

}  // namespace peerplan::profiler
