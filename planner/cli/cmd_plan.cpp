// `peerplan plan`: the main question. Runs every strategy, simulates every candidate that fits
// (with P2P on and off), ranks them, and says whether splitting the model pays at all.
#include <algorithm>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "planner/cli/commands.hpp"
#include "planner/cli/moe_routing_option.hpp"
#include "planner/cli/option_checks.hpp"
#include "planner/cli/trace_options.hpp"
#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/export/export_request.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/report/search_report.hpp"
#include "planner/report/trace.hpp"
#include "planner/search/search.hpp"
#include "planner/strategy/strategy_runner.hpp"
#include "planner/validate/gpu_backend.hpp"
#include "planner/validate/host_validation.hpp"
#include "planner/validate/launch.hpp"

namespace peerplan::cli {

namespace {

struct PlanCmd {
  std::string model, machine, workload = "chat", objective = "gpus";
  std::string moe_routing;  // --moe-routing ("": the workload's)
  double rate = 0;
  int64_t requests = 0;
  TraceSliceOptions trace_slice;  // --trace-window, --trace-speedup
  std::vector<std::string> strategies, sets;
  std::string json_out, csv_out, report_dir, trace_out, best_out;
  bool json_stdout = false, no_p2p_compare = false, drop_over_context = false;
  std::vector<std::string> allreduce;  // --allreduce: settings each TP plan is also simulated with
  int validate = 0;               // execute the top K ranked plans on this host's GPUs
  std::string validate_out;       // reports of those runs: DIR/<rank>/
  bool allow_other_host = false;
  bool mpi = false;               // --validate under mpirun: one process per GPU, rank 0 chooses
  int threads = 2;
  bool capacity_all = false;      // --capacity: every ranked plan's capacity, not only the recommended's
  int64_t screen = 250;           // --screen N: screening run's requests (0: simulate every plan fully)
  double slo_attainment = 0.99;   // --slo-attainment: the share of requests within the SLOs that "meets" them
  int per_octave = 16;
  // --export ENGINE (issue 19): the launch commands of the recommended plan, or of ranked plan --rank K.
  std::string export_engine, export_out, engine_model;
  int export_rank = 0;
  Precision precision;
  std::vector<std::string> dtypes, kv_dtypes;  // --dtypes, --kv-dtypes: formats ranked together (formats.hpp)
};

using Validated = std::vector<std::pair<std::string, Comparison>>;

void print_validated(const Validated& done) {
  std::cout << "\nvalidated plans (predicted vs measured, this host)\n";
  std::cout << fmt::format("  {:>4}  {:<32} {:>16} {:>16} {:>16}  {}\n", "rank", "plan", "TTFT p50 err", "TPOT p50 err",
                           "E2E p99 err", "targets");
  for (size_t i = 0; i < done.size(); ++i) {
    const Comparison& c = done[i].second;
    auto err = [&](const char* m) -> std::string {
      for (const MetricComparison& row : c.rows)
        if (row.metric == m) return fmt::format("{:+.1f}%", 100 * row.rel_error());
      return "n/a";
    };
    std::cout << fmt::format("  {:>4}  {:<32} {:>16} {:>16} {:>16}  {}\n", i + 1, done[i].first, err("ttft_p50"),
                             err("tpot_p50"), err("e2e_p99"), c.targets_met ? "met" : "missed");
  }
}

// The top K ranked plans (the ones --validate executes).
std::vector<Plan> top_plans(const SearchResult& r, int validate) {
  const size_t k = std::min(size_t(validate), r.ranked.size());
  if (k == 0) throw RuntimeError("--validate: no plan fits this machine, so there is nothing to execute");
  std::vector<Plan> out;
  for (size_t i = 0; i < k; ++i) out.push_back(r.ranked[i].plan);
  return out;
}

// Executes `plans` in turn the way `peerplan validate` does (same function), a comparison for
// each, then one summary line per plan. With `ranks` (--mpi, joined) every rank runs each plan
// (rank r owns GPU r); only rank 0 prints and writes, and the ranks start each plan together.
void validate_plans(GpuBackend& gpu, const std::vector<Plan>& plans, const PlanCmd& o, const Workload& w,
                    RankGroup* ranks = nullptr) {
  const bool root = !ranks || ranks->rank() == 0;
  Validated done;
  for (size_t i = 0; i < plans.size(); ++i) {
    HostValidationOptions ho;
    ho.precision = o.precision;
    ho.allow_other_host = o.allow_other_host;
    ho.ranks = ranks;
    if (!o.validate_out.empty()) ho.out = fmt::format("{}/{}", o.validate_out, i + 1);
    if (root)
      std::cout << fmt::format("\n== validate #{} of {}{}: {}\n", i + 1, plans.size(),
                               ranks ? fmt::format(" ({} MPI ranks)", ranks->size()) : "", plans[i].name);
    Comparison c = validate_on_host(gpu, plans[i], fmt::format("ranked plan #{}", i + 1), o.model, o.machine, w, ho);
    if (ranks) ranks->barrier();  // rank 0 has written its reports; the next plan starts together
    if (!root) continue;
    done.emplace_back(plans[i].name, std::move(c));
    if (!ho.out.empty()) write_file_atomic(ho.out + "/plan.json", plan_to_json(plans[i]).dump(2) + "\n");
  }
  if (root) print_validated(done);
}

// The search and everything it prints and writes; executes nothing.
SearchResult search_and_report(const PlanCmd& o) {
  // Every output or none (planner/core/files.hpp); two on one path are refused before the search.
  OutputSet outputs;
  if (!o.json_out.empty()) outputs.claim("--json-out", o.json_out);
  if (!o.csv_out.empty()) outputs.claim("--csv", o.csv_out);
  if (!o.best_out.empty()) outputs.claim("--best-out", o.best_out);
  if (!o.trace_out.empty()) outputs.claim("--trace", o.trace_out);
  auto obj = objective_from_string(o.objective);
  ModelConfig cfg = load_model_config(resolve_model_path(o.model));
  apply_precision(cfg, o.precision);
  Machine machine = load_machine(resolve_machine_path(o.machine));
  Topology topo(machine);
  Workload w = load_workload(resolve_workload_path(o.workload));
  bind_model_context(w, cfg.max_context, cfg.name, o.drop_over_context);
  bind_moe_routing(o.moe_routing, w, cfg);
  std::vector<SearchFormat> formats =
      search_formats(cfg, parse_dtype_list("--dtypes", o.dtypes, weights_choices()),
                     parse_dtype_list("--kv-dtypes", o.kv_dtypes, kv_dtype_choices()));

  SearchOptions so;
  so.objective = *obj;
  apply_overrides(w, workload_overrides(o.rate, o.requests, o.trace_slice));  // before minutes of search; the search's are then none
  print_workload_notes(w);
  for (const auto& s : o.strategies) so.strategy_files.push_back(resolve_strategy(s));
  so.sets = parse_set_options(o.sets);
  so.compare_p2p = !o.no_p2p_compare;
  for (const std::string& a : o.allreduce) so.allreduce.push_back(allreduce_setting_from_string(a));
  so.threads = o.threads;
  so.capacity_all = o.capacity_all;
  so.capacity.slo_threshold = o.slo_attainment;
  so.screen_requests = o.screen;
  so.sim.pricer.per_octave = o.per_octave;
  SearchResult r = search_plans(std::move(formats), topo, w, so);
  if (std::string note = over_context_note(r.workload); !note.empty()) std::cerr << "peerplan: note: " << note << "\n";

  if (o.json_stdout) std::cout << search_to_json(r).dump(2) << "\n";
  else std::cout << fmt::format("{} on {} ({})\n", cfg.name, machine.name, r.precision_line) << ranked_table(r, 30, o.model);
  if (!o.json_out.empty()) outputs.add("--json-out", o.json_out, search_to_json(r).dump(2) + "\n");
  if (!o.csv_out.empty()) outputs.add("--csv", o.csv_out, search_to_csv(r));
  if (!o.report_dir.empty()) stage_report_dir(r, o.report_dir, outputs);
  if (r.recommended >= 0 && !o.best_out.empty())
    outputs.add("--best-out", o.best_out, plan_to_json(r.ranked[size_t(r.recommended)].plan).dump(2) + "\n");
  if (r.recommended >= 0 && !o.trace_out.empty()) {
    // Re-simulate the recommended plan with its stage executions recorded.
    const CandidateResult& best = r.ranked[size_t(r.recommended)];
    const ModelConfig& cfg = r.formats[best.format].cfg;  // its format's
    const ModelFigures& fig = r.formats[best.format].fig;
    SimulateOptions sim = so.sim;
    sim.memory = best.memory;
    sim.memory_context = r.workload.max_context();
    sim.record_limit = 400;
    Simulation s = simulate_plan(best.plan, cfg, fig, topo, r.workload, RequestSource(r.workload), sim);
    CostModel cost(topo, sim.cost);
    outputs.add("--trace", o.trace_out, chrome_trace(best.plan, cfg, fig, cost, s.run, sim.pricer, s.metrics.provenance).dump() + "\n");
  }
  outputs.commit();
  if (!o.report_dir.empty()) {
    std::string note = draw_report_plots(o.report_dir);
    std::cerr << "report: " << o.report_dir << "/report.md" << (note.empty() ? "" : " (" + note + ")") << "\n";
  }
  if (r.recommended >= 0 && !o.trace_out.empty()) std::cerr << "trace: " << o.trace_out << " (open in https://ui.perfetto.dev)\n";
  if (r.recommended >= 0 && !o.best_out.empty() && r.multi_format()) {  // a plan file holds no number format
    const SearchFormat& f = r.formats[r.ranked[size_t(r.recommended)].format];
    std::cerr << fmt::format("best-out: {} is planned with {}: simulate or validate it with the same options plus{}{}\n", o.best_out, f.words(),
                             f.precision.weights ? std::string(" --weights ") + dtype_name(*f.precision.weights) : "",
                             f.precision.kv_dtype ? std::string(" --kv-dtype ") + dtype_name(*f.precision.kv_dtype) : "");
  }
  return r;
}

// The workload as the search used it, built the same way on every rank (files are read per
// rank, so a rank on another host reads its own copy).
Workload search_workload(const PlanCmd& o) {
  Workload w = load_workload(resolve_workload_path(o.workload));
  apply_overrides(w, workload_overrides(o.rate, o.requests, o.trace_slice));
  if (!o.moe_routing.empty()) w.moe_routing = routing::parse_routing_arg(o.moe_routing);
  return w;
}

nlohmann::json workload_fingerprint(const Workload& w) {
  return {{"name", w.name}, {"rate_rps", w.rate_rps}, {"num_requests", w.num_requests}, {"seed", w.seed},
          {"arrival", w.arrival == Workload::Arrival::Poisson ? "poisson" : "trace"},
          {"max_num_seqs", w.max_num_seqs}, {"max_batched_tokens", w.max_batched_tokens},
          {"max_context", w.max_context()}};
}

// `mpirun -np N peerplan plan ... --validate K --mpi`: rank 0 searches (the others wait in an
// idle barrier), checks that the top K plans fit the launch (GPUs 0..N-1, GPU 0 used), and
// broadcasts them; then every rank validates each plan in turn as `validate --mpi` does (rank r
// owns GPU r; rank 0 schedules, compares and reports). An error on any rank ends all ranks.
void run_plan_mpi(GpuBackend& gpu, const PlanCmd& o) {
  gpu.run_ranks("plan --mpi", [&](RankGroup& ranks) {
    const bool root = ranks.rank() == 0;
    std::string payload;
    Workload w;
    if (root) {
      SearchResult r = search_and_report(o);
      std::vector<Plan> plans = top_plans(r, o.validate);
      nlohmann::json j{{"plans", nlohmann::json::array()}, {"workload", workload_fingerprint(r.workload)}};
      for (size_t i = 0; i < plans.size(); ++i) {
        // Before any rank touches a GPU: the launch must hold every chosen plan.
        ranks.check_plan(plans[i].all_gpus(), fmt::format("ranked plan #{} ({})", i + 1, plans[i].name));
        j["plans"].push_back(plan_to_json(plans[i]));
      }
      payload = j.dump();
      w = r.workload;
    }
    ranks.barrier();  // idle-friendly: the followers sleep while rank 0 searches
    payload = ranks.broadcast(payload);
    const nlohmann::json j = nlohmann::json::parse(payload);
    std::vector<Plan> plans;
    for (const auto& p : j.at("plans")) plans.push_back(parse_plan_json(p, "rank 0's plan"));
    if (!root) {
      w = search_workload(o);
      if (workload_fingerprint(w) != j.at("workload"))
        throw InputError(o.workload, "", "the same workload on every rank: rank 0 has " + j.at("workload").dump() +
                                             ", this rank " + workload_fingerprint(w).dump());
    }
    ranks.join_gpus();  // collective: one rank per GPU
    validate_plans(gpu, plans, o, w, &ranks);
  });
}

// --export: the recommended plan (or --rank K) as an engine's launch commands, after the table.
void export_ranked(const PlanCmd& o, const SearchResult& r) {
  const int k = o.export_rank > 0 ? o.export_rank : r.recommended + 1;
  if (k < 1 || size_t(k) > r.ranked.size())
    throw InputError("", o.export_rank > 0 ? "--rank" : "--export",
                     r.ranked.empty() ? std::string("a plan that fits: none does, so there is nothing to export")
                                      : fmt::format("a rank in 1..{}, got {}", r.ranked.size(), k));
  ModelConfig cfg = load_model_config(resolve_model_path(o.model));
  Machine machine = load_machine(resolve_machine_path(o.machine));
  ExportSources src;
  src.model_arg = o.model;
  src.engine_model = o.engine_model;
  ExportRequest req = make_export_request(plan_to_json(r.ranked[size_t(k - 1)].plan), fmt::format("ranked plan #{}", k),
                                          cfg, r.workload, src, &machine);
  if (o.export_out.empty()) std::cout << "\n";
  emit_export(*parse_engine(o.export_engine), req, false, o.export_out);
}

void run_plan(const Executable& exe, const PlanCmd& o) {
  if (!objective_from_string(o.objective))
    throw InputError("", "--objective", "one of: gpus (default), goodput, p99, throughput");
  if (o.threads < 1) throw InputError("", "--threads", "at least 1");
  if (!o.dtypes.empty() && o.precision.weights)
    throw InputError("", "--dtypes", "either --dtypes (formats searched together) or --weights (one format), not both");
  if (!o.kv_dtypes.empty() && o.precision.kv_dtype)
    throw InputError("", "--kv-dtypes", "either --kv-dtypes (formats searched together) or --kv-dtype (one), not both");
  if (o.validate > 0 && (o.dtypes.size() > 1 || o.kv_dtypes.size() > 1))
    throw InputError("", "--validate", "one format: validate a plan of a --dtypes search with --weights / --kv-dtype "
                                       "of its format (the table's w/kv column)");
  if (o.validate < 0) throw InputError("", "--validate", "a number of top-ranked plans to execute (0: none)");
  check_plan_validate_mpi(o.mpi, o.validate, exe.built_with_mpi, launcher_size_from_env());
  if (o.validate > 0)  // before minutes of search: an executor, and kernels for the model's shapes
    require_executor(exe, "--validate").check_executable([&] {
      ModelConfig c = load_model_config(resolve_model_path(o.model));
      apply_precision(c, o.precision);
      return c;
    }());
  if (!o.export_engine.empty()) {  // before minutes of search
    parse_export_engine(o.export_engine);
    if (o.mpi) throw InputError("", "--export", "a plan without --mpi (export after the search, on one process)");
    if (o.json_stdout && o.export_out.empty())
      throw InputError("", "--export", "--export-out FILE with --json (standard output holds the JSON)");
  }
  if (o.export_rank < 0) throw InputError("", "--rank", "a rank >= 1 (1: the best ranked plan; default: the recommended)");
  if (o.mpi) return run_plan_mpi(*exe.gpu, o);
  SearchResult r = search_and_report(o);
  if (!o.export_engine.empty()) export_ranked(o, r);
  if (o.validate > 0) validate_plans(*exe.gpu, top_plans(r, o.validate), o, r.workload);
}

}  // namespace

void add_plan_command(CLI::App& app, const Executable& exe) {
  auto o = std::make_shared<PlanCmd>();
  auto* sub = app.add_subcommand(
      "plan",
      "Find the best way to split a model over this machine's GPUs, and whether splitting pays at all");
  sub->footer(
      "\nEvery strategy (plugins/*.lua) proposes plans; each plan that fits in memory is simulated under the\n"
      "workload with P2P on and off, then ranked. The default objective, gpus, recommends the fewest GPUs that\n"
      "meet the SLOs at the requested rate (>= --slo-attainment of requests within TTFT and TPOT, all finished;\n"
      "ties by goodput, then E2E p99). With another objective (or when no plan meets the SLOs) a plan on more\n"
      "GPUs is recommended only if it beats the best plan on fewer GPUs by 5% in latency (TPOT p50, TTFT p50,\n"
      "E2E p99) or capacity (goodput, tokens/s). The verdict lists the best plan at each GPU count.\n"
      "Capacity: the highest arrival rate the recommended plan sustains within the SLOs (every plan's with\n"
      "--capacity), found by doubling/halving the rate from the requested one, then bisecting to 5%; each probe\n"
      "simulates the same seeded requests with their arrivals rescaled (docs/simulator.md).\n"
      "Formats: --dtypes bf16,fp8 --kv-dtypes bf16,fp8 ranks the plans of every weights x KV-cache pair together\n"
      "(each sized and priced in its format, as --weights / --kv-dtype would; a 'w/kv' column). A checkpoint takes\n"
      "its own weight format or one with fewer bits (not bf16 of an FP8 checkpoint). The verdict says what each\n"
      "format buys: its fewest GPUs that meet the SLOs against the widest format's.\n"
      "Costs come from the machine file: measured curves when it is a profile (peerplan profile), nominal\n"
      "specs otherwise; the 'priced from' column says which.\n\n"
      "Examples:\n"
      "  peerplan plan --model llama-3.1-8b --machine hgx-h100x8 --workload chat\n"
      "  peerplan plan --model llama-3.1-70b --machine my-host.json --objective p99 --rate 2 --report out/\n"
      "  peerplan plan --model mixtral-8x7b --machine pcie-gen5x8-2socket --json > plans.json\n"
      "  peerplan plan --model llama-3.1-70b --machine hgx-h100x8 --dtypes bf16,fp8 --kv-dtypes bf16,fp8\n"
      "  mpirun -np 4 peerplan plan --model llama-3.1-70b --machine two-hosts.json --validate 2 --mpi\n");
  sub->add_option("--model,-m", o->model, kModelHelp)->required();
  add_precision_options(sub, o->precision);
  sub->add_option("--dtypes", o->dtypes,
                  "Weight formats searched together (comma-separated: bf16, fp8, int8, int4): every plan in each, "
                  "ranked in one table; the checkpoint's own format or ones with fewer bits (instead of --weights)")
      ->delimiter(',');
  sub->add_option("--kv-dtypes", o->kv_dtypes,
                  "KV-cache formats searched together (comma-separated: bf16, fp8), crossed with --dtypes "
                  "(instead of --kv-dtype)")
      ->delimiter(',');
  sub->add_option("--machine", o->machine, "Machine: a shipped name (models/hardware/<name>) or a profile/machine JSON")
      ->required();
  sub->add_option("--workload,-w", o->workload, "Workload: shipped name (models/workloads) or a JSON file")
      ->capture_default_str();
  sub->add_option("--objective", o->objective, "Rank by: gpus (fewest GPUs meeting the SLOs at the rate), goodput "
                                               "(requests/s within SLO), p99 (lowest E2E p99), throughput (output tokens/s)")
      ->capture_default_str();
  sub->add_option("--slo-attainment", o->slo_attainment,
                  "Share of requests that must meet TTFT and TPOT for a plan to meet the SLOs (objective gpus, capacity)")
      ->capture_default_str()->check(finite_in(0.01, 1, "a fraction"));
  sub->add_flag("--capacity", o->capacity_all,
                "Find every ranked plan's capacity (highest rate within the SLOs), not only the recommended one's; "
                "about 8 simulations per plan, over --threads");
  sub->add_option("--rate", o->rate, kRateHelp);
  sub->add_option("--requests", o->requests, kRequestsHelp);
  add_trace_slice_options(sub, o->trace_slice);
  add_moe_routing_option(sub, o->moe_routing);
  sub->add_option("--strategy,-s", o->strategies, "Only these strategies (name or .lua path; repeatable)");
  sub->add_option("--set", o->sets, "Strategy parameter key=value (repeatable)");
  sub->add_option("--json-out", o->json_out, "Write the full result as JSON to this file");
  sub->add_flag("--json", o->json_stdout, "Print JSON instead of the table");
  sub->add_option("--csv", o->csv_out, "Write one CSV row per candidate to this file");
  sub->add_option("--report", o->report_dir, "Write a Markdown report with plots into this directory");
  sub->add_option("--trace", o->trace_out, "Write a Chrome/Perfetto trace of the recommended plan to this file");
  sub->add_option("--best-out", o->best_out, "Write the recommended plan's JSON (for simulate/validate)");
  sub->add_flag("--no-p2p-compare", o->no_p2p_compare, "Do not simulate the P2P-off variant of each plan");
  sub->add_option("--allreduce", o->allreduce,
                  "Also simulate each plan with a TP group (P2P on) under these all-reduce settings: nccl, custom "
                  "(peer-memory one-shot/two-shot wherever P2P works), auto:vllm, auto:sglang, auto:trtllm (each "
                  "engine's rule and thresholds; docs/allreduce.md). Comma-separated or repeated; the variants are "
                  "named '<plan> ar:<setting>'")
      ->delimiter(',')
      ->check(CLI::IsMember(allreduce_setting_names()));
  sub->add_option("--threads", o->threads, "Candidates simulated in parallel")
      ->capture_default_str()->check(integer_in(1, 1024, "threads"));
  sub->add_flag("--drop-over-context", o->drop_over_context,
                "Drop requests whose prompt is longer than the model's context (as serving engines refuse them) "
                "instead of refusing the workload; the count is reported");
  sub->add_option("--validate", o->validate,
                  "Execute the top K ranked plans on this host's GPUs and compare each with its prediction, as "
                  "`peerplan validate` does (needs a CUDA build and a profile of this host as --machine)");
  sub->add_option("--validate-out", o->validate_out, "--validate: write each run's reports to DIR/<rank>/");
  sub->add_flag("--allow-other-host", o->allow_other_host,
                "--validate: run even if the profile was measured on another host");
  sub->add_option("--screen", o->screen,
                  "Objective gpus: simulate each plan first over the first N requests and fully only when that does "
                  "not prove it misses the SLOs; fewest GPUs first, plans on more GPUs than the fewest that meet the "
                  "SLOs are not simulated (the recommendation is the full search's; docs/simulator.md). 0: simulate "
                  "every plan fully. Applies when the workload has at least 4N requests")
      ->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  sub->add_flag("--mpi", o->mpi,
                "--validate under mpirun, one process per GPU (rank r owns GPU r, on one or several hosts): rank 0 "
                "searches and broadcasts its top K plans, every rank then runs its GPU's part of each "
                "(docs/mpi.md)");
  sub->add_option("--shape-points", o->per_octave,
                  "Iteration shapes are priced on a grid of this many points per octave (0: exact, slow)")
      ->capture_default_str()->check(integer_in(0, 1024, "points per octave"));
  sub->add_option("--export", o->export_engine,
                  "Also print the launch commands of the recommended plan for this engine: vllm, sglang, trtllm or "
                  "llamacpp (as `peerplan export` does; docs/export.md)");
  sub->add_option("--rank", o->export_rank, "--export: the plan of this rank instead of the recommended one");
  sub->add_option("--export-out", o->export_out, "--export: write the launch script to this file");
  sub->add_option("--engine-model", o->engine_model,
                  "--export: what the engine loads, if not the model given (HF id, checkpoint directory, .gguf)");
  sub->callback([o, exe] { run_plan(exe, *o); });
}

}  // namespace peerplan::cli
