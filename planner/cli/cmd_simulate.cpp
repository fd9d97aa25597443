// `peerplan simulate`: one given plan under a workload -> the metrics JSON (the same format the
// executor writes, so `peerplan validate` can compare them), a summary and optionally a trace.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "planner/cli/commands.hpp"
#include "planner/cli/moe_routing_option.hpp"
#include "planner/cli/option_checks.hpp"
#include "planner/cli/trace_options.hpp"
#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/cost/prediction_band.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/plan/p2p_off.hpp"
#include "planner/report/search_report.hpp"
#include "planner/report/trace.hpp"
#include "planner/sim/simulate.hpp"

namespace peerplan::cli {

namespace {

struct SimCmd {
  std::string plan, model, machine, workload = "chat", out, trace, p2p = "on";
  std::string moe_routing;  // --moe-routing ("": the workload's)
  double rate = 0;
  int64_t requests = 0;
  TraceSliceOptions trace_slice;  // --trace-window, --trace-speedup
  int per_octave = 16;
  int trace_records = 400;
  bool json = false;
  bool drop_over_context = false;
  bool per_request = false;
  Precision precision;
};

void write_trace(const SimCmd& o, const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Topology& topo,
                 const SimulateOptions& so, const Simulation& s) {
  CostModel cost(topo, so.cost);
  write_file_atomic(o.trace, chrome_trace(plan, cfg, fig, cost, s.run, so.pricer, s.metrics.provenance).dump() + "\n");
}

void run_simulate(const SimCmd& o) {
  ModelConfig cfg = load_model_config(resolve_model_path(o.model));
  apply_precision(cfg, o.precision);
  ModelFigures fig = derive_figures(cfg);
  Machine machine = load_machine(resolve_machine_path(o.machine));
  Topology topo(machine);
  Workload w = load_workload(resolve_workload_path(o.workload));
  apply_overrides(w, workload_overrides(o.rate, o.requests, o.trace_slice));
  print_workload_notes(w);
  bind_model_context(w, cfg.max_context, cfg.name, o.drop_over_context);
  bind_moe_routing(o.moe_routing, w, cfg);
  if (std::string note = over_context_note(w); !note.empty()) std::cerr << "peerplan: note: " << note << "\n";
  Plan plan = load_plan(o.plan);
  if (o.p2p == "off") plan = p2p_off_variant(plan);  // as validate --p2p off runs it
  validate_plan(plan, cfg.layers, cfg.experts, machine.gpu_count(), o.plan);

  MemoryOptions mem;
  mem.max_seqs = w.max_num_seqs;
  mem.context = w.max_context();
  mem.max_batched_tokens = w.max_batched_tokens;
  MemoryReport mr = check_memory(plan, cfg, fig, machine, mem);
  if (mr.max_seqs_that_fit < 1)
    throw InputError(o.plan, "stages", "a plan that fits in GPU memory: " + (mr.why.empty() ? std::string("it does not") : mr.why));

  SimulateOptions so;
  so.pricer.per_octave = o.per_octave;
  so.memory = mr;
  so.memory_context = mem.context;
  so.record_limit = o.trace.empty() ? 0 : size_t(std::max(0, o.trace_records));
  so.progress = true;  // one simulation: a long one reports on stderr (planner/sim/serving.cpp)
  so.per_request = o.per_request;
  const RequestSource reqs(w);  // streamed: a run holds the requests in flight, not all of them
  Simulation s = simulate_plan(plan, cfg, fig, topo, w, reqs, so);
  const Metrics& m = s.metrics;
  if (!o.out.empty() || o.json) {  // built only when written: it holds every request's timing
    nlohmann::json mj = metrics_to_json(m, true);
    mj["band"] = band_to_json(prediction_band(m.provenance));  // the error band (docs/simulator.md, "Error band")
    if (!o.out.empty()) write_file_atomic(o.out, mj.dump(1) + "\n");
    if (o.json) {
      if (!o.trace.empty()) write_trace(o, plan, cfg, fig, topo, so, s);
      std::cout << mj.dump(2) << "\n";
      return;
    }
  }
  if (!o.trace.empty()) write_trace(o, plan, cfg, fig, topo, so, s);
  std::cout << fmt::format("{} on {} ({}), workload {}: {} requests at {:.2f} req/s\n", plan.name, machine.name,
                           machine.origin, w.name, m.requests, w.rate_rps);
  std::cout << fmt::format("  {:<10} {:>10} {:>10} {:>10} {:>10}\n", "", "p50", "p90", "p99", "mean");
  auto row = [](const char* n, const LatencyStats& x, double scale, const char* unit) {
    return fmt::format("  {:<10} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f}  {}\n", n, x.p50 * scale, x.p90 * scale,
                       x.p99 * scale, x.mean * scale, unit);
  };
  std::cout << row("TTFT", m.ttft, 1e3, "ms") << row("TPOT", m.tpot, 1e3, "ms") << row("E2E", m.e2e, 1, "s");
  const PredictionBand band = prediction_band(m.provenance);
  if (band.known)
    std::cout << (band.lower_bound_only
                      ? std::string("  error band: none, the figures are a lower bound only (")
                      : fmt::format("  error band: TTFT ±{:.0f} %, TPOT ±{:.0f} % (", 100 * band.ttft_relative,
                                    100 * band.step_relative))
              << band.basis << ")\n";
  std::cout << fmt::format("  {:.0f} output tok/s, {} of {} requests finished, {:.1f}% within SLO (goodput {:.2f} req/s), "
                           "{} iterations ({} shapes priced)\n",
                           m.output_tokens_per_s, m.completed, m.requests, 100 * m.slo_attainment, m.goodput_rps,
                           m.iterations, s.distinct_shapes);
  std::cout << "  GPU time split (compute / communication / sync / idle):\n";
  for (int g : plan.all_gpus()) {
    const GpuUsage& u = m.gpus.at(size_t(g));
    double t = u.compute_s + u.communication_s + u.sync_s + u.idle_s;
    if (t <= 0) continue;
    std::cout << fmt::format("    gpu{}: {:5.1f}% / {:5.1f}% / {:5.1f}% / {:5.1f}%\n", g, 100 * u.compute_s / t,
                             100 * u.communication_s / t, 100 * u.sync_s / t, 100 * u.idle_s / t);
  }
  if (!m.busiest_link.empty())
    std::cout << fmt::format("  busiest link: {} ({:.1f}% utilised)\n", m.busiest_link, 100 * m.links.front().utilisation);
  std::cout << "  priced from: " << cost_source_summary(m.provenance) << "\n";
  if (const std::string note = unmeasured_note(m.model, m.provenance, o.model); !note.empty()) std::cout << "  " << note;
  if (m.provenance.contains("moe_routing"))
    std::cout << "  MoE routing: " << routing::summary_text(m.provenance["moe_routing"]) << "\n";
  if (m.provenance.contains("moe_shared_experts"))
    std::cout << "  MoE shared experts: " << m.provenance["moe_shared_experts"].get<std::string>() << "\n";
  if (m.provenance.contains("power") && m.provenance["power"].is_object())  // a paced profile (docs/simulator.md, Power)
    std::cout << (m.provenance["power"].value("throttle_by_class", false)
                      ? fmt::format("  power: tables at boost clock; prefill past {:.0f} ms of continuous work runs slower, each "
                                    "class by its factor at the iteration's attention share (the profile's measured mixes)\n",
                                    m.provenance["power"].value("throttle_onset_ms", 0.0))
                      : fmt::format("  power: tables at boost clock; prefill past {:.0f} ms of continuous work runs {:.2f}x "
                                    "slower (the profile's measured throttle)\n",
                                    m.provenance["power"].value("throttle_onset_ms", 0.0),
                                    m.provenance["power"].value("throttle_factor", 1.0)));
  if (m.provenance.contains("power") && m.provenance["power"].contains("moe_dispatch"))
    std::cout << "  power, MoE experts: " << m.provenance["power"]["moe_dispatch"].get<std::string>() << "\n";
  if (m.provenance.contains("norms")) std::cout << "  norms: " << m.provenance["norms"].get<std::string>() << "\n";
  if (!o.out.empty()) std::cout << "  metrics JSON: " << o.out << "\n";
  if (!o.trace.empty()) std::cout << "  trace: " << o.trace << " (open in https://ui.perfetto.dev)\n";
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto o = std::make_shared<SimCmd>();
  auto* sub = app.add_subcommand("simulate", "Simulate serving one plan and write its metrics JSON");
  sub->footer(
      "\nThe plan is a plan JSON (peerplan plans --json, peerplan plan --best-out). Requests arrive as the workload\n"
      "says; a vLLM-like continuous-batching scheduler forms iterations; each iteration's op graph is priced on\n"
      "the machine (measured curves when it is a profile, nominal specs otherwise) and run on an event engine\n"
      "where transfers share links max-min fairly. The metrics JSON is what `peerplan validate` compares.\n\n"
      "Runs of up to 100000 requests keep every request's timing: exact percentiles and a per_request section\n"
      "in the metrics JSON. Longer runs hold only the requests in flight: percentiles within 0.02% (a\n"
      "log-bucket sketch past 100000 finished requests; mean and max exact) and no per_request section,\n"
      "unless --per-request is given (memory then grows with the number of requests).\n\n"
      "Example:\n"
      "  peerplan simulate --plan best.plan.json --model llama-3.1-8b --machine hgx-h100x8 --workload chat \\\n"
      "      --out predicted.json --trace trace.json\n");
  sub->add_option("--plan,-p", o->plan, "Plan JSON file")->required();
  sub->add_option("--model,-m", o->model, kModelHelp)->required();
  add_precision_options(sub, o->precision);
  sub->add_option("--machine", o->machine, "Machine: a shipped name or a profile/machine JSON")->required();
  sub->add_option("--workload,-w", o->workload, "Workload: shipped name or JSON file")->capture_default_str();
  sub->add_option("--rate", o->rate, kRateHelp);
  sub->add_option("--p2p", o->p2p, "on, or off: the plan without peer access (NCCL_P2P_DISABLE=1, host-staged stage "
                                   "boundaries, NCCL all-reduce), as `validate --p2p off` runs it")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--requests", o->requests, kRequestsHelp);
  add_trace_slice_options(sub, o->trace_slice);
  add_moe_routing_option(sub, o->moe_routing);
  sub->add_option("--out,-o", o->out, "Write the metrics JSON here");
  sub->add_flag("--json", o->json, "Print the metrics JSON instead of the summary");
  sub->add_option("--trace", o->trace, "Write a Chrome/Perfetto trace of the first iterations here");
  sub->add_option("--trace-iterations", o->trace_records, "Stage executions kept in the trace")
      ->capture_default_str()->check(integer_in(0, 1'000'000, "stage executions"));
  sub->add_option("--shape-points", o->per_octave, "Shape grid points per octave (0: exact pricing)")
      ->capture_default_str()->check(integer_in(0, 1024, "points per octave"));
  sub->add_flag("--per-request", o->per_request,
                "Keep every request's timing (exact percentiles, per_request in the metrics JSON) even past 100000 "
                "requests");
  sub->add_flag("--drop-over-context", o->drop_over_context,
                "Drop requests whose prompt is longer than the model's context (as serving engines refuse them) "
                "instead of refusing the workload; the count is reported");
  sub->callback([o] { run_simulate(*o); });
}

}  // namespace peerplan::cli
