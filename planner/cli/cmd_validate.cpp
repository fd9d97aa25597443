// `peerplan validate`: predict (simulator) + measure (executor on this host's GPUs) + compare.
// Also `--self-test` (every executor kernel against a CPU reference), `--bench-steps` (decode and
// prefill step times of a plan) and `--compare PRED MEAS` (two metrics files, no GPU). The work is
// in planner/validate (host_validation.hpp); the GPU part is the backend the executable passes.
#include <iostream>
#include <random>

#include <fmt/format.h>

#include "planner/cli/commands.hpp"
#include "planner/cli/moe_routing_option.hpp"
#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "planner/model/workload.hpp"
#include "planner/plan/p2p_off.hpp"
#include "planner/plan/plan.hpp"
#include "planner/validate/compare.hpp"
#include "planner/validate/gpu_backend.hpp"
#include "planner/validate/gpu_reports.hpp"
#include "planner/validate/host_validation.hpp"
#include "planner/cli/option_checks.hpp"
#include "planner/cli/trace_options.hpp"
#include "planner/validate/launch.hpp"

namespace peerplan::cli {

namespace {

struct ValidateOptions {
  std::string plan, model, workload, machine, out, p2p = "on";
  std::string moe_routing;  // --moe-routing ("": the workload's)
  std::vector<std::string> compare;
  std::string reprice;  // --reprice STEPS.json
  bool self_test = false, bench_steps = false, no_graphs = false, allow_other_host = false, cold_start = false;
  bool mpi = false;
  bool no_measure_missing = false, update_machine = false;
  int64_t requests = 0;
  double rate = 0;
  TraceSliceOptions trace_slice;  // --trace-window, --trace-speedup
  std::vector<int64_t> batches{1, 8, 64};
  int64_t context = 1024, prefill = 2048;
  int device = 0;
  Precision precision;
};

void run_compare_files(const ValidateOptions& o) {
  auto [pred, meas] = load_metrics_pair(o.compare[0], o.compare[1]);  // refused unless they describe one run
  Comparison c = compare_metrics(pred, meas, {});
  std::cout << comparison_table(c);
  if (!o.out.empty()) write_validation_outputs(o.out, c, pred, meas);
}

void run_self_test(GpuBackend& gpu, int device) {
  bool ok = false;
  std::cout << self_test_table(gpu.self_test(device, uint64_t(std::random_device{}())), device, &ok);
  if (!ok) throw RuntimeError("kernel self-test failed (rows marked FAIL)");
  std::cout << "  all kernels match\n";
}

// `mpirun -np N peerplan validate --mpi ...`: one process per GPU (rank r owns GPU r on CUDA
// ordinal = its local rank). MPI starts the ranks and carries the iteration messages and NCCL ids;
// an error on one rank ends all of them with the rank and the reason.
void run_validate_mpi(GpuBackend& gpu, const Plan& plan, const ValidateOptions& o, const Workload& w,
                      HostValidationOptions ho) {
  gpu.run_ranks("validate --mpi", [&](RankGroup& ranks) {
    ranks.check_plan(plan.all_gpus(), o.plan);  // before any GPU is touched
    ranks.join_gpus();  // collective: refuses two ranks on one GPU, more ranks than GPUs
    ho.ranks = &ranks;
    validate_on_host(gpu, plan, o.plan, o.model, o.machine, w, ho);
    ranks.barrier();  // rank 0 has written its reports
  });
}

void run_validate(const Executable& exe, const ValidateOptions& o) {
  check_mpi_launch(o.mpi, exe.built_with_mpi, launcher_size_from_env());
  if (o.mpi && (!o.compare.empty() || o.self_test || o.bench_steps))
    throw InputError("", "--mpi",
                     "a serving validation (--plan --model --workload --machine): --compare, --self-test and "
                     "--bench-steps run in one process, without mpirun");
  if (!o.compare.empty()) return run_compare_files(o);
  if (!o.reprice.empty() && (o.bench_steps || o.self_test || !o.workload.empty()))
    throw InputError("", "--reprice", "alone with --plan --model --machine (it prices recorded steps, runs nothing)");
  if (o.self_test) return run_self_test(require_executor(exe, "--self-test"), o.device);
  if (o.bench_steps) require_executor(exe, "--bench-steps");
  if (o.plan.empty() || o.model.empty() || o.machine.empty())
    throw InputError("", "--plan/--model/--machine", "all three (and --workload unless --bench-steps or --reprice)");
  Plan plan = load_plan(o.plan);
  if (o.p2p == "off") plan = p2p_off_variant(plan);
  if (!o.reprice.empty()) return reprice_steps(o.reprice, plan, o.plan, o.model, o.machine, o.precision, o.out);
  if (o.bench_steps) {
    StepBenchOptions so;
    so.batches = o.batches;
    so.context = o.context;
    so.prefill = o.prefill;
    so.cuda_graphs = !o.no_graphs;
    so.allow_other_host = o.allow_other_host;
    so.out = o.out;
    if (!o.moe_routing.empty()) so.moe_routing = routing::parse_routing_arg(o.moe_routing);
    so.precision = o.precision;
    return bench_steps_on_host(*exe.gpu, plan, o.plan, o.model, o.machine, so);
  }
  if (o.workload.empty()) throw InputError("", "--workload", "a workload name or file (e.g. chat)");
  Workload w = load_workload(resolve_workload_path(o.workload));
  apply_overrides(w, workload_overrides(o.rate, o.requests, o.trace_slice));
  print_workload_notes(w);
  if (!o.moe_routing.empty()) w.moe_routing = routing::parse_routing_arg(o.moe_routing);
  HostValidationOptions ho;
  ho.cuda_graphs = !o.no_graphs;
  ho.warm_gemm_plans = !o.cold_start;
  ho.allow_other_host = o.allow_other_host;
  ho.out = o.out;
  ho.precision = o.precision;
  ho.measure_missing = !o.no_measure_missing;
  ho.update_machine = o.update_machine;
  if (o.update_machine && o.no_measure_missing)
    throw InputError("", "--update-machine", "not with --no-measure-missing (nothing is measured to write back)");
  GpuBackend& gpu = require_executor(exe, o.mpi ? "--mpi" : "validate");
  if (o.mpi) return run_validate_mpi(gpu, plan, o, w, ho);
  validate_on_host(gpu, plan, o.plan, o.model, o.machine, w, ho);
}

}  // namespace

void add_validate_command(CLI::App& app, const Executable& exe) {
  auto o = std::make_shared<ValidateOptions>();
  auto* sub = app.add_subcommand(
      "validate",
      "Run a plan on this host's GPUs and compare with the simulator's prediction.\n"
      "\n"
      "The executor allocates synthetic bf16 weights with the plan's exact shard shapes, runs the same\n"
      "kernels the profiler timed (cuBLASLt GEMMs, peerplan's attention kernels, NCCL collectives, peer or\n"
      "host-staged copies) under the same scheduler and request arrivals as the simulation, on real clocks,\n"
      "and prints predicted vs measured TTFT / TPOT / E2E (p50, p90, p99) and tokens/s with relative errors\n"
      "and the op class whose time differs most.\n"
      "\n"
      "Shapes of the plan the profile has no measured point of (a model it did not time: GEMMs, attention\n"
      "head configurations, grouped expert GEMMs) are measured first on this host's GPU, as `peerplan profile\n"
      "--add-model` does, so the prediction rests on measured points; --out keeps them in\n"
      "machine-extended.json, --update-machine writes them into the --machine file, --no-measure-missing\n"
      "predicts without them (from a fit or a roofline).\n"
      "\n"
      "Examples:\n"
      "  peerplan validate --self-test                           # kernels vs CPU reference\n"
      "  peerplan validate --bench-steps --plan tp2.json --model llama-3.1-8b --machine h200x2-nvlink\n"
      "  peerplan validate --plan tp2.json --model llama-3.1-8b --workload chat --machine h200x2-nvlink \\\n"
      "                    --requests 200 --out report/\n"
      "  peerplan validate --plan single.json --model ./Qwen2-7B/config.json --workload chat --machine my-host.json \\\n"
      "                    --out report/ --update-machine   # measures Qwen2's shapes first, keeps them\n"
      "  peerplan validate --compare predicted.json measured.json   # two metrics files, no GPU needed\n"
      "  peerplan validate --reprice run/steps.json --plan tp2.json --model llama-3.1-8b --machine other.json\n"
      "                    # a recorded --bench-steps run beside another profile's prices, no GPU needed\n"
      "  mpirun -np 2 peerplan validate --mpi --plan tp2.json --model llama-3.1-8b --workload chat \\\n"
      "                    --machine h200x2-nvlink --out report/   # one process per GPU");
  sub->add_option("--plan", o->plan, "Plan JSON (from `peerplan plans --json` or hand-written)");
  sub->add_option("--model", o->model, kModelHelp);
  add_precision_options(sub, o->precision);
  sub->add_option("--workload", o->workload, "Workload name (models/workloads/<name>) or file");
  sub->add_option("--machine", o->machine, "Profile of THIS host (from `peerplan profile`)");
  sub->add_option("--p2p", o->p2p, "on, or off: no peer access, NCCL_P2P_DISABLE=1, host-staged stage boundaries")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--out", o->out, "Directory for validation.json, validation.md, metrics files and the plot");
  sub->add_option("--requests", o->requests, kRequestsHelp)->check(CLI::PositiveNumber);
  add_moe_routing_option(sub, o->moe_routing);
  sub->add_option("--rate", o->rate, kRateHelp)->check(CLI::PositiveNumber);
  add_trace_slice_options(sub, o->trace_slice);
  sub->add_flag("--allow-other-host", o->allow_other_host, "Run even if the profile was measured on another host");
  sub->add_flag("--no-measure-missing", o->no_measure_missing,
                "Do not measure the plan's shapes the profile lacks before predicting (they are priced from a fit or "
                "a roofline)");
  sub->add_flag("--update-machine", o->update_machine,
                "Also write the shapes measured before predicting into the --machine file (atomically; its "
                "meta.added_shapes records them)");
  sub->add_flag("--no-graphs", o->no_graphs, "Launch decode iterations eagerly instead of as CUDA graphs");
  sub->add_flag("--cold-start", o->cold_start,
                "Skip the start-up look-up of every GEMM shape's cuBLASLt algorithm (measures its effect)");
  sub->add_flag("--mpi", o->mpi,
                "Run under mpirun, one process per GPU as serving engines run (rank r owns GPU r): rank 0 "
                "schedules and posts each iteration over MPI, every rank runs its GPU's ops; NCCL per plan group "
                "(docs/mpi.md, \"Executor under MPI\")");
  sub->add_flag("--self-test", o->self_test, "Check every executor kernel against a CPU reference; exit 1 on mismatch");
  sub->add_option("--device", o->device, "GPU for --self-test")->check(CLI::NonNegativeNumber);
  sub->add_flag("--bench-steps", o->bench_steps, "Print decode/prefill step times of the plan (no workload)");
  sub->add_option("--batches", o->batches, "--bench-steps: decode batch sizes")->delimiter(',');
  sub->add_option("--context", o->context, "--bench-steps: decode context (tokens)")->check(CLI::PositiveNumber);
  sub->add_option("--prefill", o->prefill, "--bench-steps: prefill tokens (0: none)")->check(CLI::NonNegativeNumber);
  sub->add_option("--reprice", o->reprice,
                  "STEPS.json: price a recorded --bench-steps run's steps (its steps.json) on --machine and print "
                  "them beside the measured times (no GPU; the same --plan, --model and --weights as the run)");
  sub->add_option("--compare", o->compare, "PREDICTED MEASURED: compare two metrics JSON files (no GPU)")->expected(2);
  sub->callback([o, exe] { run_validate(exe, *o); });
}

}  // namespace peerplan::cli
