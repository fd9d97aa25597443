#include "planner/validate/host_validation.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "planner/compile/compiler.hpp"
#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/cost/cost_model.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/sim/simulate.hpp"
#include "planner/topology/machine.hpp"
#include "planner/topology/topology.hpp"
#include "planner/validate/gpu_reports.hpp"
#include "planner/validate/missing_shapes.hpp"
#include "planner/validate/preflight.hpp"

namespace peerplan {

namespace {

struct Loaded {
  ModelConfig cfg;
  ModelFigures fig;
  std::string machine_file;
  Machine machine;
};

Loaded load_inputs(const Plan& plan, const std::string& plan_origin, const std::string& model,
                   const std::string& machine_name, const Precision& precision) {
  Loaded l;
  l.cfg = load_model_config(resolve_model_path(model));
  apply_precision(l.cfg, precision);
  l.fig = derive_figures(l.cfg);
  l.machine_file = resolve_machine_path(machine_name);
  l.machine = load_machine(l.machine_file);
  validate_plan(plan, l.cfg.layers, l.cfg.experts, l.machine.gpu_count(), plan_origin);
  return l;
}

// The cost model's time of each op class on the iterations the executor timed (res.op_classes
// carry the measured side; the predicted side is filled here).
void predict_op_classes(ServeResult& res, const Plan& plan, const Loaded& in, const CostModel& cost, bool cuda_graphs) {
  std::map<std::pair<std::string, std::string>, double> pred_cls;
  for (const BatchShape& sh : res.class_shapes) {
    OpGraph g = compile_iteration(plan, in.cfg, in.fig, in.machine, sh);
    const bool graph = cuda_graphs && sh.prefill_seqs == 0;
    std::string label;
    for (const auto& c : res.op_classes)
      if (c.iteration.rfind(sh.prefill_seqs ? "prefill" : "decode", 0) == 0) label = c.iteration;
    for (const Op& op : g.ops) pred_cls[{label, op_class(op.kind)}] += cost.price(op, graph).seconds;
  }
  for (auto& c : res.op_classes) c.predicted_s = pred_cls[{c.iteration, c.op_class}];
}

}  // namespace

void write_validation_outputs(const std::string& dir, const Comparison& c, const Metrics& pred, const Metrics& meas) {
  std::filesystem::create_directories(dir);
  nlohmann::json doc = comparison_to_json(c);
  OutputSet out;  // the four reports of one run: all or none
  out.add("--out", dir + "/validation.json", doc.dump(2) + "\n");
  out.add("--out", dir + "/predicted.metrics.json", metrics_to_json(pred).dump(2) + "\n");
  out.add("--out", dir + "/measured.metrics.json", metrics_to_json(meas).dump(2) + "\n");
  out.add("--out", dir + "/validation.md", "# peerplan validate\n\n" + comparison_markdown(c));
  out.commit();
  // The plot (predicted vs measured per metric, latency CDFs): matplotlib, if this host has it.
  const std::string script = find_data_file("scripts/plot_validation.py");
  const std::string cmd = fmt::format("python3 '{}' '{}' >/dev/null 2>&1", script, dir);
  if (std::system(cmd.c_str()) != 0)
    std::cerr << "peerplan: note: no plot written (python3 with matplotlib not found); run: python3 " << script << " "
              << dir << "\n";
}

Comparison validate_on_host(GpuBackend& gpu, const Plan& plan, const std::string& plan_origin,
                            const std::string& model, const std::string& machine_name, Workload w,
                            const HostValidationOptions& o) {
  Loaded in = load_inputs(plan, plan_origin, model, machine_name, o.precision);
  // A replicated plan runs as its copies behind the simulator's router, one engine per copy on this
  // host (profiler/exec/serve.cpp); under --mpi the ranks are one copy's GPUs.
  if (plan.replica_count() > 1 && o.ranks)
    throw InputError(plan_origin, "replicas",
                     fmt::format("a plan of one copy under --mpi: run the {} copies without --mpi (one process drives "
                                 "every copy on this host), or validate one copy (drop `replicas` and `router`) at "
                                 "1/{} of the rate",
                                 plan.replica_count(), plan.replica_count()));
  gpu.check_executable(in.cfg);  // a shape the executor cannot run: refused before any GPU work
  routing::check_routing_for_model(w.moe_routing, in.cfg.experts, in.cfg.name);
  in.cfg.moe_routing = w.moe_routing;  // MoE: simulator and executor route alike
  bind_model_context(w, in.cfg.max_context, in.cfg.name, w.drop_over_context);  // beyond the context: refused (or dropped as plan --drop-over-context asked)
  (void)requests_dropped_over_context(w);                         // now, before any GPU work
  const bool root = !o.ranks || o.ranks->rank() == 0;  // MPI: rank 0 predicts and reports
  ExecSettings es;
  es.p2p = plan.p2p;
  es.cuda_graphs = o.cuda_graphs;
  es.warm_gemm_plans = o.warm_gemm_plans;

  // Refusals first: wrong host, too many GPUs, memory. Under MPI against the ranks' GPUs (every
  // rank checks the same gathered list, so all refuse alike), else against this host's.
  if (o.ranks) o.ranks->check_plan(plan.all_gpus(), plan_origin);
  MemoryOptions mo;
  mo.max_seqs = 1;
  mo.context = w.max_context();
  mo.max_batched_tokens = w.max_batched_tokens;
  const MemoryReport mem = check_memory(plan, in.cfg, in.fig, in.machine, mo);
  const PreflightOptions po{o.allow_other_host, uses_w4a16(in.cfg), uses_w8_experts(in.cfg)};
  const std::vector<std::string> warnings =
      o.ranks ? o.ranks->preflight(plan, plan_origin, in.machine, in.machine_file, mem, po)
              : preflight(plan, plan_origin, in.machine, in.machine_file, gpu.describe_host(), mem.fits, mem.why, po);
  for (const auto& warn : warnings)
    if (root) std::cerr << "peerplan: warning: " << warn << "\n";
  // Shapes the profile lacks are measured now, on this host's GPU, so the prediction rests on
  // measured points rather than a fit or a roofline (issue 23).
  MissingShapesResult measured;
  std::string not_measured;
  if (o.measure_missing) {
    if (o.ranks) not_measured = "under --mpi";
    else if (!profile_host_mismatch(in.machine, gpu.describe_host()).empty()) not_measured = "the profile is another host's";
    else measured = measure_missing_shapes(gpu, plan, in.cfg, in.fig, in.machine, {o.out, o.update_machine, in.machine_file});
    if (!not_measured.empty() && root)
      if (const ShapeSet lacking = plan_missing_shapes(plan, in.cfg, in.fig, in.machine); !lacking.empty())
        std::cerr << fmt::format("peerplan: note: {}, the shapes the profile lacks are not measured ({}); the "
                                 "prediction prices them from a fit or a roofline. Measure them on the profiled host "
                                 "first with: {}\n",
                                 not_measured, describe_shapes(lacking), add_model_command(model, in.machine_file));
  }
  // The executor's KV cache decides how many sequences run at once; the simulator is told the same.
  const int64_t fit = gpu.kv_slots_that_fit(plan, in.cfg, in.fig, in.machine, w.max_context() + 1, w.max_batched_tokens);
  if (fit < 1)
    throw InputError(plan_origin, "stages",
                     fmt::format("a plan whose weights leave room for one sequence of {} tokens on every GPU",
                                 w.max_context()));
  w.max_num_seqs = std::min(w.max_num_seqs, fit);
  es.kv_slots = w.max_num_seqs;

  if (!root) {  // MPI, ranks > 0: execute this GPU's part of every iteration rank 0 posts
    gpu.serve(plan, in.cfg, in.fig, in.machine, w, es);
    return Comparison{};
  }
  // Prediction.
  Topology topo(in.machine);
  SimulateOptions so;
  Simulation sim = simulate_plan(plan, in.cfg, in.fig, topo, w, RequestSource(w), so);
  std::cerr << fmt::format("peerplan: predicted {} requests; executing on {} GPU(s){} (max {} sequences at once)...\n",
                           w.num_requests, plan.num_gpus(),
                           o.ranks ? fmt::format(", {} MPI ranks", o.ranks->size()) : std::string(), w.max_num_seqs);
  // Measurement.
  ServeResult res = gpu.serve(plan, in.cfg, in.fig, in.machine, w, es);
  CostModel cost(topo, so.cost);
  // The executor timed copy 0's op classes and iterations are priced as copy 0's (copies are the
  // same sub-plan on GPUs of the same kind).
  const Plan copy0 = plan.replica_count() > 1 ? replica_plan(plan, 0) : plan;
  predict_op_classes(res, copy0, in, cost, es.cuda_graphs);

  Comparison c = compare_metrics(sim.metrics, res.measured, res.op_classes);
  c.context = res.provenance;
  c.context["profile"] = in.machine_file;
  if (o.measure_missing && not_measured.empty()) c.context["missing_shapes_measured"] = measured.to_json();
  c.context["requests"] = w.num_requests;
  c.context["rate_rps"] = w.rate_rps;
  c.context["max_num_seqs"] = w.max_num_seqs;
  if (sim.metrics.provenance.contains("moe_routing")) c.context["moe_routing"] = sim.metrics.provenance["moe_routing"];
  if (sim.metrics.provenance.contains("power") && sim.metrics.provenance["power"].contains("moe_dispatch"))
    c.context["power_moe_dispatch"] = sim.metrics.provenance["power"]["moe_dispatch"];
  PlanPricer pricer(copy0, in.cfg, in.fig, cost, so.pricer);
  std::string iter_table;
  nlohmann::json iters = iteration_report(res, pricer, &iter_table);
  std::cout << comparison_table(c) << iter_table << measured.summary();
  if (c.context.contains("moe_routing"))
    std::cout << "  MoE routing assumed: " << routing::summary_text(c.context["moe_routing"]) << "\n";
  if (c.context.contains("power_moe_dispatch"))  // a paced profile: which throttle its experts were priced with
    std::cout << "  power, MoE experts: " << c.context["power_moe_dispatch"].get<std::string>() << "\n";
  if (!o.out.empty()) {
    write_validation_outputs(o.out, c, sim.metrics, res.measured);
    write_file_atomic(o.out + "/iterations.json", iters.dump(1) + "\n");
    std::cout << fmt::format("  written: {}/validation.json, validation.md, predicted/measured.metrics.json, "
                             "iterations.json\n",
                             o.out);
  }
  return c;
}

// Each step priced as the simulator prices the same iteration (the shape the executor's sequences
// sum to), so a step table says at once whether the machine file's figures hold on this GPU.
static void price_steps(std::vector<StepBench>& rows, const Plan& plan, const Loaded& in) {
  Topology topo(in.machine);
  SimulateOptions so;
  CostModel cost(topo, so.cost);
  PlanPricer pricer(plan, in.cfg, in.fig, cost, so.pricer);
  for (StepBench& r : rows) {
    BatchShapeSum sum;
    if (r.what == "prefill") sum.add_prefill(r.tokens, r.context);
    else for (int64_t i = 0; i < r.batch; ++i) sum.add_decode(r.context);
    r.priced_s = 0;
    if (!r.graph && r.what != "prefill") continue;  // eager decode: the simulator prices decode as graphs
    for (double x : pricer.price(sum.shape()).stage_s) r.priced_s += x;
  }
}

void bench_steps_on_host(GpuBackend& gpu, const Plan& plan, const std::string& plan_origin, const std::string& model,
                         const std::string& machine_name, const StepBenchOptions& o) {
  Loaded in = load_inputs(plan, plan_origin, model, machine_name, o.precision);
  gpu.check_executable(in.cfg);
  routing::check_routing_for_model(o.moe_routing, in.cfg.experts, in.cfg.name);
  in.cfg.moe_routing = o.moe_routing;
  ExecSettings es;
  es.p2p = plan.p2p;
  es.cuda_graphs = o.cuda_graphs;
  MemoryOptions mo;
  mo.max_seqs = o.batches.empty() ? 1 : *std::max_element(o.batches.begin(), o.batches.end());
  mo.context = std::max(o.context, o.prefill) + 16;
  mo.max_batched_tokens = std::max<int64_t>(o.prefill, 256);
  const MemoryReport mem = check_memory(plan, in.cfg, in.fig, in.machine, mo);
  const PreflightOptions po{o.allow_other_host, uses_w4a16(in.cfg), uses_w8_experts(in.cfg)};
  for (const auto& warn :
       preflight(plan, plan_origin, in.machine, in.machine_file, gpu.describe_host(), mem.fits, mem.why, po))
    std::cerr << "peerplan: warning: " << warn << "\n";
  auto rows = gpu.bench_steps(plan, in.cfg, in.fig, in.machine, o.batches, o.context, o.prefill, es);
  price_steps(rows, plan, in);
  std::cout << bench_table(rows, fmt::format("step times: plan {} model {} (p2p {}, CUDA graphs {})", plan.name,
                                             in.cfg.name, plan.p2p ? "on" : "off", es.cuda_graphs ? "on" : "off"));
  if (!o.out.empty()) {
    std::filesystem::create_directories(o.out);
    write_file_atomic(o.out + "/steps.json", bench_json(rows, plan.name, in.cfg.name, gpu.host_context()).dump(2) + "\n");
  }
}

void reprice_steps(const std::string& steps_file, const Plan& plan, const std::string& plan_origin,
                   const std::string& model, const std::string& machine_name, const Precision& precision,
                   const std::string& out) {
  std::string rec_plan, rec_model;
  std::vector<StepBench> rows = bench_rows_from_json(steps_file, &rec_plan, &rec_model);
  // The model first: a plan of another model would be refused for its layers, which hides the real mistake.
  const std::string name = load_model_config(resolve_model_path(model)).name;
  if (!rec_model.empty() && rec_model != name)
    throw InputError(steps_file, "model", "the --model's name \"" + name + "\" (the steps were timed on \"" +
                                              rec_model + "\")");
  Loaded in = load_inputs(plan, plan_origin, model, machine_name, precision);
  price_steps(rows, plan, in);
  std::cout << bench_table(rows, fmt::format("step times from {}, re-priced on {} (plan {} model {})", steps_file,
                                             in.machine_file, plan.name, in.cfg.name));
  if (!out.empty()) {
    std::filesystem::create_directories(out);
    write_file_atomic(out + "/steps.json", bench_json(rows, plan.name, in.cfg.name, {{"repriced_from", steps_file},
                                                                                      {"machine", in.machine_file}})
                                               .dump(2) + "\n");
  }
}

}  // namespace peerplan
