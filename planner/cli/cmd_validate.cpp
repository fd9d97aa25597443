// `peerplan validate`: predict (simulator) + measure (executor on this host's GPUs) + compare.
// Also `--self-test` (every executor kernel against a CPU reference) and `--bench-steps` (decode
// and prefill step times of a plan), and `--compare PRED MEAS` (two metrics files, no GPU).
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "planner/cli/commands.hpp"
#include "planner/cli/validate_plan.hpp"
#include "planner/compile/compiler.hpp"
#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/plan/plan.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/topology.hpp"
#include "planner/validate/compare.hpp"
#include "planner/validate/preflight.hpp"
#include "profiler/common/exec_message.hpp"
#include "profiler/common/rank_layout.hpp"
#include "profiler/common/rank_preflight.hpp"
#ifdef PEERPLAN_WITH_CUDA
#include "profiler/exec/executor.hpp"
#endif
#ifdef PEERPLAN_WITH_MPI
#include "profiler/exec/mpi_bus.hpp"
#include "profiler/mpi/comm.hpp"
#endif

namespace peerplan::cli {

namespace {

struct ValidateOptions {
  std::string plan, model, workload, machine, out, p2p = "on";
  std::vector<std::string> compare;
  bool self_test = false, bench_steps = false, no_graphs = false, allow_other_host = false, cold_start = false;
  bool mpi = false;
  int64_t requests = 0;
  double rate = 0;
  std::vector<int64_t> batches{1, 8, 64};
  int64_t context = 1024, prefill = 2048;
  int device = 0;
};

[[noreturn]] void no_cuda(const std::string& what) {
  throw InputError("", what,
                   "a peerplan built with the CUDA executor; this one was built without CUDA (planner only). Build "
                   "on a host with the CUDA toolkit and NCCL (scripts/gpu/build.sh, or cmake -S . -B build-gpu "
                   "-DCMAKE_CUDA_ARCHITECTURES=90) and run it on the GPU host");
}

void write_outputs(const std::string& dir, const Comparison& c, const Metrics& pred, const Metrics& meas) {
  std::filesystem::create_directories(dir);
  nlohmann::json doc = comparison_to_json(c);
  write_file_atomic(dir + "/validation.json", doc.dump(2) + "\n");
  write_file_atomic(dir + "/predicted.metrics.json", metrics_to_json(pred).dump(2) + "\n");
  write_file_atomic(dir + "/measured.metrics.json", metrics_to_json(meas).dump(2) + "\n");
  write_file_atomic(dir + "/validation.md", "# peerplan validate\n\n" + comparison_markdown(c));
  // The plot (predicted vs measured per metric, latency CDFs): matplotlib, if this host has it.
  const std::string script = find_data_file("scripts/plot_validation.py");
  const std::string cmd = fmt::format("python3 '{}' '{}' >/dev/null 2>&1", script, dir);
  if (std::system(cmd.c_str()) != 0)
    std::cerr << "peerplan: note: no plot written (python3 with matplotlib not found); run: python3 " << script << " "
              << dir << "\n";
}

void run_compare_files(const ValidateOptions& o) {
  auto load = [](const std::string& f) { return parse_metrics_json(load_json_file(f), f); };
  Metrics pred = load(o.compare[0]), meas = load(o.compare[1]);
  Comparison c = compare_metrics(pred, meas, {});
  std::cout << comparison_table(c);
  if (!o.out.empty()) write_outputs(o.out, c, pred, meas);
}

void run_bench_steps(const ValidateOptions& o, const Plan& plan_in) {
#ifndef PEERPLAN_WITH_CUDA
  (void)o, (void)plan_in;
  no_cuda("--bench-steps");
#else
  Plan plan = plan_in;
  ModelConfig cfg = load_model_config(resolve_model_path(o.model));
  ModelFigures fig = derive_figures(cfg);
  const std::string machine_file = resolve_machine_path(o.machine);
  Machine machine = load_machine(machine_file);
  validate_plan(plan, cfg.layers, cfg.experts, machine.gpu_count(), o.plan);
  exec::ExecOptions eo;
  eo.p2p = plan.p2p;
  eo.cuda_graphs = !o.no_graphs;
  HostInfo host = exec::discover_host();
  MemoryOptions mo;
  mo.max_seqs = *std::max_element(o.batches.begin(), o.batches.end());
  mo.context = std::max(o.context, o.prefill) + 16;
  mo.max_batched_tokens = std::max<int64_t>(o.prefill, 256);
  MemoryReport mem = check_memory(plan, cfg, fig, machine, mo);
  PreflightOptions po{o.allow_other_host};
  for (auto& w : preflight(plan, o.plan, machine, machine_file, host, mem.fits, mem.why, po))
    std::cerr << "peerplan: warning: " << w << "\n";
  auto rows = exec::bench_steps(plan, cfg, fig, machine, o.batches, o.context, o.prefill, eo);
  std::cout << exec::bench_table(rows, fmt::format("step times: plan {} model {} (p2p {}, CUDA graphs {})", plan.name,
                                                   cfg.name, o.p2p, eo.cuda_graphs ? "on" : "off"));
  if (!o.out.empty()) {
    nlohmann::json j = nlohmann::json::array();
    for (auto& r : rows)
      j.push_back({{"step", r.what}, {"batch", r.batch}, {"context", r.context}, {"graph", r.graph},
                   {"median_us", r.step_s * 1e6}, {"min_us", r.min_s * 1e6}, {"max_us", r.max_s * 1e6}});
    std::filesystem::create_directories(o.out);
    write_file_atomic(o.out + "/steps.json",
                      nlohmann::json{{"plan", plan.name}, {"model", cfg.name}, {"context", exec::host_context()},
                                     {"steps", j}}
                              .dump(2) + "\n");
  }
#endif
}

}  // namespace

#if defined(PEERPLAN_WITH_MPI) && defined(PEERPLAN_WITH_CUDA)
profiler::RankInfo describe_rank_gpu(bool* share) {
  profiler::RankInfo me = exec::describe_mpi_rank();
  exec::describe_gpu(me.device, &me.device_count, &me.uuid);
  // Smoke-test mode for a one-GPU machine (as `profile --mpi`): ranks share the GPU, so the
  // message flow with real followers runs; a plan must then leave the sharing ranks idle
  // (NCCL refuses two ranks of one communicator on one GPU).
  const char* share_env = std::getenv("PEERPLAN_MPI_SHARE_GPU");
  *share = share_env && std::string(share_env) == "1";
  if (*share && me.device_count > 0 && me.device >= me.device_count) {
    me.device %= me.device_count;
    exec::describe_gpu(me.device, &me.device_count, &me.uuid);
  }
  // The GPU's memory travels with the rank's description, so the preflight can check a plan
  // whose GPUs are on other hosts (rank_preflight.hpp).
  const HostInfo here = exec::discover_host();
  if (me.device >= 0 && size_t(me.device) < here.gpus.size()) me.memory_bytes = here.gpus[size_t(me.device)].memory_bytes;
  return me;
}
#endif

namespace {

// `mpirun -np N peerplan validate --mpi ...`: one process per GPU (rank r owns GPU r on CUDA
// ordinal = its local rank). MPI starts the ranks and carries the iteration messages and NCCL ids;
// an error on one rank ends all of them (MPI_Abort) with the rank and the reason.
void run_validate_mpi(const Plan& plan, const ValidateOptions& o, const Workload& w, HostValidationOptions ho) {
#if defined(PEERPLAN_WITH_MPI) && defined(PEERPLAN_WITH_CUDA)
  mpi::Session session;
  try {
    exec::check_plan_ranks(plan.all_gpus(), session.size(), o.plan);  // before any GPU is touched
    bool share = false;
    const profiler::RankInfo me = describe_rank_gpu(&share);
    exec::MpiBus bus(me, share);  // collective: refuses two ranks on one GPU, more ranks than GPUs
    ho.bus = &bus;
    ho.ranks = bus.layout().ranks;  // every rank's (host, GPU UUID, memory), gathered over MPI
    validate_on_host(plan, o.plan, o.model, o.machine, w, ho);
    bus.barrier();  // rank 0 has written its reports
  } catch (const std::exception& e) {
    mpi::abort_others_on_error(session, "validate --mpi", e);
    throw;
  }
#else
  (void)plan, (void)o, (void)w, (void)ho;
  no_cuda("--mpi");
#endif
}

void run_validate(ValidateOptions o) {
#ifdef PEERPLAN_WITH_MPI
  profiler::check_mpi_launch(o.mpi, true, profiler::launcher_size_from_env());
#else
  profiler::check_mpi_launch(o.mpi, false, profiler::launcher_size_from_env());
#endif
  if (o.mpi && (!o.compare.empty() || o.self_test || o.bench_steps))
    throw InputError("", "--mpi",
                     "a serving validation (--plan --model --workload --machine): --compare, --self-test and "
                     "--bench-steps run in one process, without mpirun");
  if (!o.compare.empty()) return run_compare_files(o);
  if (o.p2p != "on" && o.p2p != "off") throw InputError("", "--p2p", "on or off");
#ifndef PEERPLAN_WITH_CUDA
  if (o.self_test) no_cuda("--self-test");
  if (o.bench_steps) no_cuda("--bench-steps");
#else
  if (o.self_test) {
    auto rows = exec::kernel_self_test(o.device, uint64_t(std::random_device{}()));
    bool ok = true;
    std::cout << fmt::format("kernel self-test on GPU {} (fp64 CPU reference, fresh random inputs, outputs poisoned)\n",
                             o.device);
    std::cout << fmt::format("  {:<22} {:<48} {:>10} {:>9}  {}\n", "kernel", "shape", "rel.error", "tolerance", "");
    for (const auto& r : rows) {
      ok = ok && r.pass();
      std::cout << fmt::format("  {:<22} {:<48} {:>10.2e} {:>9.0e}  {}{}\n", r.kernel, r.shape, r.rel_error,
                               r.tolerance, r.pass() ? "ok" : "FAIL", r.all_written ? "" : " (unwritten outputs)");
    }
    if (!ok) throw RuntimeError("kernel self-test failed (rows marked FAIL)");
    std::cout << "  all kernels match\n";
    return;
  }
#endif
  if (o.plan.empty() || o.model.empty() || o.machine.empty())
    throw InputError("", "--plan/--model/--machine", "all three (and --workload unless --bench-steps)");
  Plan plan = load_plan(o.plan);
  if (o.p2p == "off") {
    // The same plan without P2P: NCCL_P2P_DISABLE for collectives, host-staged boundaries.
    plan.p2p = false;
    for (auto& m : plan.boundary_modes) m = "host_staged";
    plan.name += " p2p-off";
  }
  if (o.bench_steps) return run_bench_steps(o, plan);
  if (o.workload.empty()) throw InputError("", "--workload", "a workload name or file (e.g. chat)");
  Workload w = load_workload(resolve_workload_path(o.workload));
  if (o.requests < 0 || o.requests > 10'000'000)  // a workload file's num_requests cap (robustness finding)
    throw InputError("", "--requests", fmt::format("a number of requests in [1, 10000000], got {}", o.requests));
  if (o.requests > 0) w.num_requests = o.requests;
  if (o.rate != 0 && !(o.rate >= 1e-6 && o.rate <= 1e9))  // NaN/inf/denormal passed before (robustness finding)
    throw InputError("", "--rate", fmt::format("a request rate in [1e-6, 1e9] requests/s, got {}", o.rate));
  if (o.rate > 0) w.rate_rps = o.rate;
  HostValidationOptions ho;
  ho.cuda_graphs = !o.no_graphs;
  ho.warm_gemm_plans = !o.cold_start;
  ho.allow_other_host = o.allow_other_host;
  ho.out = o.out;
  if (o.mpi) return run_validate_mpi(plan, o, w, ho);
  validate_on_host(plan, o.plan, o.model, o.machine, w, ho);
}

}  // namespace

bool have_executor() {
#ifdef PEERPLAN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

void require_executor(const std::string& option) {
  if (!have_executor()) no_cuda(option);
}

#ifdef PEERPLAN_WITH_CUDA
namespace {

// Per-iteration records (measured on CUDA events, on the run's clock) with the simulator's price
// of the same shape, and each request's queue wait: where TTFT goes, iteration by iteration.
nlohmann::json iteration_report(const exec::ServeResult& res, PlanPricer& pricer, std::string* table) {
  nlohmann::json its = nlohmann::json::array();
  struct Sum {
    int64_t n = 0;
    double gpu = 0, pred = 0, enqueue = 0, lag = 0, wake = 0;
  };
  std::map<std::string, Sum> by;
  double prev_done = 0;
  for (const exec::IterationRecord& r : res.iterations) {
    const IterationCost& c = pricer.price(r.shape);
    double pred = 0;
    for (double x : c.stage_s) pred += x;
    its.push_back({{"index", r.index},
                   {"prefill_seqs", r.shape.prefill_seqs},
                   {"prefill_tokens", r.shape.prefill_tokens},
                   {"prefill_context", r.shape.prefill_context},
                   {"decode_seqs", r.shape.decode_seqs},
                   {"decode_context", r.shape.decode_context},
                   {"graph", r.graph},
                   {"new_tokens_count", r.new_tokens_count},
                   {"host_begin_us", r.host_begin_s * 1e6},
                   {"host_enqueued_us", r.host_enqueued_s * 1e6},
                   {"gpu_start_us", r.gpu_start_s * 1e6},
                   {"gpu_end_us", r.gpu_end_s * 1e6},
                   {"host_done_us", r.host_done_s * 1e6},
                   {"predicted_us", pred * 1e6},
                   {"compile_us", r.compile_s * 1e6},
                   {"slowest_enqueues", r.slowest_enqueues}});
    const std::string kind = r.shape.prefill_seqs == 0 ? (r.graph ? "decode (graph)" : "decode (eager)")
                             : r.new_tokens_count    ? "prefill/mixed, new size"
                                                     : "prefill/mixed, size seen";
    Sum& s = by[kind];
    ++s.n;
    s.gpu += r.gpu_end_s - r.gpu_start_s;
    s.pred += pred;
    s.enqueue += r.host_enqueued_s - r.host_begin_s;
    s.lag += std::max(0.0, r.host_begin_s - prev_done);
    s.wake += r.host_done_s - r.gpu_end_s;
    prev_done = r.host_done_s;
  }
  std::string t = "\n  iterations: GPU span (CUDA events) vs the simulator's price of the same shape; host times per iteration\n";
  t += fmt::format("  {:<26} {:>5} {:>10} {:>10} {:>8} {:>11} {:>11} {:>11}\n", "kind", "n", "GPU mean", "predicted",
                   "GPU/pred", "enqueue", "sched gap", "wake-up");
  for (auto& [k, s] : by)
    t += fmt::format("  {:<26} {:>5} {:>7.3f} ms {:>7.3f} ms {:>8.3f} {:>8.3f} ms {:>8.3f} ms {:>8.3f} ms\n", k, s.n,
                     s.gpu / double(s.n) * 1e3, s.pred / double(s.n) * 1e3, s.pred > 0 ? s.gpu / s.pred : 0.0,
                     s.enqueue / double(s.n) * 1e3, s.lag / double(s.n) * 1e3, s.wake / double(s.n) * 1e3);
  // TTFT = queue wait (arrival -> its first iteration formed) + the rest (its prefill iterations).
  nlohmann::json reqs = nlohmann::json::array();
  std::vector<double> wait, rest;
  std::map<int64_t, const RequestTiming*> timing;
  for (const RequestTiming& rt : res.measured.per_request) timing[rt.id] = &rt;
  for (const auto& [id, sched] : res.first_scheduled) {
    auto f = timing.find(id);
    if (f == timing.end() || sched < 0 || f->second->first_token_s < 0) continue;
    const RequestTiming& rt = *f->second;
    reqs.push_back({{"id", id}, {"arrival_us", rt.arrival_s * 1e6}, {"scheduled_us", sched * 1e6},
                    {"first_token_us", rt.first_token_s * 1e6}, {"prompt_tokens", rt.prompt_tokens}});
    wait.push_back(sched - rt.arrival_s);
    rest.push_back(rt.first_token_s - sched);
  }
  if (!wait.empty()) {
    LatencyStats ws = latency_stats(wait), rs = latency_stats(rest);
    t += fmt::format("  measured TTFT = queue wait (mean {:.2f} ms, p50 {:.2f} ms) + first iteration formed -> first "
                     "token (mean {:.2f} ms, p50 {:.2f} ms)\n",
                     ws.mean * 1e3, ws.p50 * 1e3, rs.mean * 1e3, rs.p50 * 1e3);
  }
  if (table) *table = t;
  return {{"format", "peerplan.iterations"}, {"version", 1}, {"iterations", its}, {"requests", reqs}};
}

}  // namespace
#endif

Comparison validate_on_host(const Plan& plan_in, const std::string& plan_origin, const std::string& model,
                            const std::string& machine_name, Workload w, const HostValidationOptions& o) {
#ifndef PEERPLAN_WITH_CUDA
  (void)plan_in, (void)plan_origin, (void)model, (void)machine_name, (void)w, (void)o;
  no_cuda("validate");
#else
  Plan plan = plan_in;
  ModelConfig cfg = load_model_config(resolve_model_path(model));
  ModelFigures fig = derive_figures(cfg);
  const std::string machine_file = resolve_machine_path(machine_name);
  Machine machine = load_machine(machine_file);
  validate_plan(plan, cfg.layers, cfg.experts, machine.gpu_count(), plan_origin);
  const bool root = !o.bus || o.bus->rank() == 0;  // MPI: rank 0 predicts and reports
  if (o.bus) exec::check_plan_ranks(plan.all_gpus(), o.bus->ranks(), plan_origin);
  exec::ExecOptions eo;
  eo.p2p = plan.p2p;
  eo.cuda_graphs = o.cuda_graphs;
  eo.warm_gemm_plans = o.warm_gemm_plans;
  eo.bus = o.bus;

  // Refusals first: wrong host, too many GPUs, memory. Under MPI against the ranks' GPUs (every
  // rank checks the same gathered list, so all refuse alike), else against this host's.
  MemoryOptions mo;
  mo.max_seqs = 1;
  mo.context = w.max_context();
  mo.max_batched_tokens = w.max_batched_tokens;
  MemoryReport mem = check_memory(plan, cfg, fig, machine, mo);
  PreflightOptions po{o.allow_other_host};
  const std::vector<std::string> warnings =
      o.bus ? profiler::preflight_ranks(plan, plan_origin, machine, machine_file, o.ranks, mem, po)
            : preflight(plan, plan_origin, machine, machine_file, exec::discover_host(), mem.fits, mem.why, po);
  for (auto& warn : warnings)
    if (root) std::cerr << "peerplan: warning: " << warn << "\n";
  // The executor's KV cache decides how many sequences run at once; the simulator is told the same.
  const int64_t fit = exec::kv_slots_that_fit(plan, cfg, fig, w.max_context() + 1, w.max_batched_tokens, o.bus);
  if (fit < 1)
    throw InputError(plan_origin, "stages",
                     fmt::format("a plan whose weights leave room for one sequence of {} tokens on every GPU",
                                 w.max_context()));
  w.max_num_seqs = std::min(w.max_num_seqs, fit);
  eo.kv_slots = w.max_num_seqs;

  if (!root) {  // MPI, ranks > 0: execute this GPU's part of every iteration rank 0 posts
    exec::serve(plan, cfg, fig, machine, w, eo);
    return Comparison{};
  }
  // Prediction.
  Topology topo(machine);
  SimulateOptions so;
  Simulation sim = simulate_plan(plan, cfg, fig, topo, w, w.generate(), so);
  std::cerr << fmt::format("peerplan: predicted {} requests; executing on {} GPU(s){} (max {} sequences at once)...\n",
                           w.num_requests, plan.num_gpus(),
                           o.bus ? fmt::format(", {} MPI ranks", o.bus->ranks()) : std::string(), w.max_num_seqs);
  // Measurement.
  exec::ServeResult res = exec::serve(plan, cfg, fig, machine, w, eo);

  // Predicted op-class times on the iterations the executor timed.
  CostModel cost(topo, so.cost);
  std::map<std::pair<std::string, std::string>, double> pred_cls;
  for (size_t i = 0; i < res.class_shapes.size(); ++i) {
    const BatchShape& sh = res.class_shapes[i];
    OpGraph g = compile_iteration(plan, cfg, fig, machine, sh);
    const bool graph = eo.cuda_graphs && sh.prefill_seqs == 0;
    std::string label;
    for (const auto& c : res.op_classes)
      if (c.iteration.rfind(sh.prefill_seqs ? "prefill" : "decode", 0) == 0) label = c.iteration;
    for (const Op& op : g.ops) pred_cls[{label, op_class(op.kind)}] += cost.price(op, graph).seconds;
  }
  for (auto& c : res.op_classes) c.predicted_s = pred_cls[{c.iteration, c.op_class}];

  Comparison c = compare_metrics(sim.metrics, res.measured, res.op_classes);
  c.context = res.provenance;
  c.context["profile"] = machine_file;
  c.context["requests"] = w.num_requests;
  c.context["rate_rps"] = w.rate_rps;
  c.context["max_num_seqs"] = w.max_num_seqs;
  PlanPricer pricer(plan, cfg, fig, cost, so.pricer);
  std::string iter_table;
  nlohmann::json iters = iteration_report(res, pricer, &iter_table);
  std::cout << comparison_table(c) << iter_table;
  if (!o.out.empty()) {
    write_outputs(o.out, c, sim.metrics, res.measured);
    write_file_atomic(o.out + "/iterations.json", iters.dump(1) + "\n");
    std::cout << fmt::format("  written: {}/validation.json, validation.md, predicted/measured.metrics.json, "
                             "iterations.json\n",
                             o.out);
  }
  return c;
#endif
}

void add_validate_command(CLI::App& app) {
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
      "Examples:\n"
      "  peerplan validate --self-test                           # kernels vs CPU reference\n"
      "  peerplan validate --bench-steps --plan tp2.json --model llama-3.1-8b --machine h200x2-nvlink\n"
      "  peerplan validate --plan tp2.json --model llama-3.1-8b --workload chat --machine h200x2-nvlink \\\n"
      "                    --requests 200 --out report/\n"
      "  peerplan validate --compare predicted.json measured.json   # two metrics files, no GPU needed\n"
      "  mpirun -np 2 peerplan validate --mpi --plan tp2.json --model llama-3.1-8b --workload chat \\\n"
      "                    --machine h200x2-nvlink --out report/   # one process per GPU");
  sub->add_option("--plan", o->plan, "Plan JSON (from `peerplan plans --json` or hand-written)");
  sub->add_option("--model", o->model, "Model name (models/llm/<name>) or config.json path");
  sub->add_option("--workload", o->workload, "Workload name (models/workloads/<name>) or file");
  sub->add_option("--machine", o->machine, "Profile of THIS host (from `peerplan profile`)");
  sub->add_option("--p2p", o->p2p, "on, or off: no peer access, NCCL_P2P_DISABLE=1, host-staged stage boundaries")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--out", o->out, "Directory for validation.json, validation.md, metrics files and the plot");
  sub->add_option("--requests", o->requests, "Serve only the first N requests of the workload (default: all)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--rate", o->rate, "Override the workload's arrival rate (requests/s)")->check(CLI::PositiveNumber);
  sub->add_flag("--allow-other-host", o->allow_other_host, "Run even if the profile was measured on another host");
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
  sub->add_option("--compare", o->compare, "PREDICTED MEASURED: compare two metrics JSON files (no GPU)")->expected(2);
  sub->callback([o] { run_validate(*o); });
}

}  // namespace peerplan::cli
