// `peerplan plans`: run strategies for a model on a machine and show the candidate plans with their
// per-GPU memory fit.
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
#include "planner/model/model_config.hpp"
#include "planner/model/model_figures.hpp"
#include "planner/model/workload.hpp"
#include "planner/strategy/strategy_runner.hpp"

namespace peerplan::cli {

namespace {

struct PlansOptions {
  std::string model, machine, workload, out;
  std::string moe_routing;  // --moe-routing ("": the workload's)
  std::vector<std::string> strategies, sets;
  bool json = false;
  bool drop_over_context = false;
  TraceSliceOptions trace_slice;  // --trace-window, --trace-speedup
  MemoryOptions mem;
  LuaLimits lua;
  double lua_memory_mib = double(LuaLimits{}.memory_bytes >> 20);
  Precision precision;
};

std::string gib(int64_t b) { return fmt::format("{:.1f}", double(b) / double(1LL << 30)); }

std::string gpus_of(const Plan& p) {
  std::string s;
  for (size_t i = 0; i < p.stages.size(); ++i) {
    if (i) s += "|";
    for (size_t g = 0; g < p.stages[i].gpus.size(); ++g) s += (g ? "," : "") + std::to_string(p.stages[i].gpus[g]);
  }
  if (p.replica_count() > 1)  // the other copies' GPUs are in --json
    s += fmt::format(" (+{} cop{}, {} GPUs)", p.replica_count() - 1, p.replica_count() == 2 ? "y" : "ies", p.num_gpus());
  return s;
}

nlohmann::json memory_json(const MemoryReport& m) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : m.gpus) {
    gpus.push_back({{"gpu", g.gpu}, {"capacity_bytes", g.capacity}, {"weights_bytes", g.weights},
                    {"kv_cache_bytes", g.kv_cache}, {"activations_bytes", g.activations},
                    {"reserve_bytes", g.reserve}, {"used_bytes", g.used()}, {"fits", g.fits()}});
    if (g.mla_scratch > 0) gpus.back()["mla_scratch_bytes"] = g.mla_scratch;  // MLA models only
  }
  nlohmann::json by = nlohmann::json::object();
  for (const auto& [name, b] : m.weight_bytes_by_dtype) by[name] = b;
  return {{"fits", m.fits}, {"why", m.why}, {"max_seqs_that_fit", m.max_seqs_that_fit},
          {"kv_dtype", dtype_name(m.kv_dtype)}, {"kv_bytes_per_seq", m.kv_bytes_per_seq},
          {"weight_bytes_by_dtype", by}, {"gpus", gpus}};
}

void run_plans(PlansOptions o) {
  if (o.lua_memory_mib <= 0 || o.lua.seconds <= 0 || o.lua.instructions <= 0)
    throw InputError("", "--lua-*", "positive limits");
  o.lua.memory_bytes = int64_t(o.lua_memory_mib * (1 << 20));
  ModelConfig cfg = load_model_config(resolve_model_path(o.model));
  apply_precision(cfg, o.precision);
  ModelFigures fig = derive_figures(cfg);
  Machine machine = load_machine(resolve_machine_path(o.machine));
  Topology topo(machine);
  if (!o.workload.empty()) {
    Workload w = load_workload(resolve_workload_path(o.workload));
    apply_overrides(w, workload_overrides(0, 0, o.trace_slice));
    print_workload_notes(w);
    // Prompts beyond the model's context are refused (or dropped) here as plan and simulate do:
    // the memory figures below would otherwise be for requests no engine serves.
    bind_model_context(w, cfg.max_context, cfg.name, o.drop_over_context);
    if (std::string note = over_context_note(w); !note.empty()) std::cerr << "peerplan: note: " << note << "\n";
    o.mem.max_seqs = w.max_num_seqs;
    o.mem.context = w.max_context();
    o.mem.max_batched_tokens = w.max_batched_tokens;
    cfg.moe_routing = w.moe_routing;
  }
  {  // MoE: the routing (checked against the model) travels with the plans; memory assumes the worst case
    Workload w;
    w.moe_routing = cfg.moe_routing;
    bind_moe_routing(o.moe_routing, w, cfg);
  }
  std::vector<std::string> files;
  for (const auto& s : o.strategies) files.push_back(resolve_strategy(s));
  auto cands = run_strategies(files, cfg, fig, CostModel(topo), parse_set_options(o.sets), o.mem, o.lua);

  nlohmann::json doc = {{"version", 1},
                        {"model", cfg.name},
                        {"machine", machine.name},
                        {"memory_options",
                         {{"max_seqs", o.mem.max_seqs}, {"context", o.mem.context},
                          {"max_batched_tokens", o.mem.max_batched_tokens},
                          {"reserve_fraction", o.mem.reserve_fraction}, {"reserve_bytes", o.mem.reserve_bytes}}}};
  if (cfg.is_moe()) doc["moe_routing"] = routing::routing_to_json(cfg.moe_routing);
  doc["plans"] = nlohmann::json::array();
  for (const auto& c : cands) {
    nlohmann::json j = plan_to_json(c.plan);
    j["memory"] = memory_json(c.memory);
    j["strategy_file"] = c.strategy_file;
    doc["plans"].push_back(j);
  }
  if (!o.out.empty()) write_file_atomic(o.out, doc.dump(2) + "\n");
  if (o.json) {
    std::cout << doc.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("{} on {} ({} GPUs): {} candidate plans. Memory for {} sequences x {} tokens of context, "
                           "activations for {} tokens, reserve {:.0f}% + {} GiB per GPU.\n\n",
                           cfg.name, machine.name, machine.gpu_count(), cands.size(), o.mem.max_seqs, o.mem.context,
                           o.mem.max_batched_tokens, o.mem.reserve_fraction * 100, gib(o.mem.reserve_bytes));
  constexpr const char* hdr_fmt = "{:<24} {:<17} {:>6} {:>3} {:>3} {:>3}  {:<23} {:>20} {:>5} {:>8}\n";
  std::cout << fmt::format(fmt::runtime(hdr_fmt), "plan", "strategy", "stages", "tp", "pp", "ep", "GPUs", "max GPU mem (GiB)", "fits",
                           "max seqs");
  std::cout << std::string(124, '-') << "\n";
  for (const auto& c : cands) {
    const Plan& p = c.plan;
    int tp = 0;
    for (const auto& s : p.stages) tp = std::max(tp, s.tp);
    const GpuMemory* worst = nullptr;
    for (const auto& g : c.memory.gpus)
      if (!worst || double(g.used()) / double(g.capacity) > double(worst->used()) / double(worst->capacity)) worst = &g;
    std::string mem = worst ? fmt::format("{} / {}", gib(worst->used()), gib(worst->capacity)) : "-";
    std::cout << fmt::format(fmt::runtime(hdr_fmt), p.name, p.strategy, p.stages.size(), tp, p.stages.size(), p.ep, gpus_of(p), mem,
                             c.memory.fits ? "yes" : "NO", c.memory.max_seqs_that_fit);
  }
  bool any_bad = false;
  for (const auto& c : cands)
    if (!c.memory.fits) {
      if (!any_bad) std::cout << "\nDoes not fit:\n";
      any_bad = true;
      std::cout << fmt::format("  {}: {}\n", c.plan.name, c.memory.why);
    }
  std::cout << "\nWhy each plan: --json (notes), the memory of every GPU: --json | jq '.plans[].memory'.\n";
}

}  // namespace

void add_plans_command(CLI::App& app) {
  auto o = std::make_shared<PlansOptions>();
  auto* sub = app.add_subcommand("plans", "Run strategies and list candidate plans with their per-GPU memory fit");
  sub->footer(
      "Each strategy (plugins/*.lua, or --strategy FILE) proposes plans; each is validated and checked for\n"
      "memory on every GPU: weights (exact shard bytes) + KV cache (max-seqs x context, sharded by TP over KV\n"
      "heads and by stage over layers) + activations (max-batched-tokens) + reserve. `max seqs` is how many\n"
      "sequences of that context every GPU could hold. See `peerplan strategies` for the parameters --set takes.\n"
      "\n"
      "Examples:\n"
      "  peerplan plans --model llama-3.1-70b --machine hgx-h100x8\n"
      "  peerplan plans --model mixtral-8x7b --machine pcie-gen5x8-2socket --strategy expert_parallel --set ep=4\n"
      "  peerplan plans --model llama-3.1-8b --machine my-host.json --strategy my_strategy.lua --json > plans.json");
  sub->add_option("--model", o->model, kModelHelp)->required();
  add_precision_options(sub, o->precision);
  sub->add_option("--machine,-m", o->machine, "Machine JSON / profile / NCCL XML, or a shipped machine name")->required();
  sub->add_option("--strategy,-s", o->strategies, "Strategy name (plugins/) or Lua file; repeatable; default: all built-ins");
  sub->add_option("--set", o->sets, "key=value for a strategy parameter (repeatable), typed against its declaration");
  sub->add_option("--workload,-w", o->workload, "Take max-seqs, context and max-batched-tokens from this workload");
  add_moe_routing_option(sub, o->moe_routing);
  add_trace_slice_options(sub, o->trace_slice);
  sub->add_flag("--drop-over-context", o->drop_over_context,
                "With --workload: drop requests whose prompt is longer than the model's context (as serving engines "
                "refuse them) instead of refusing the workload; the count is reported");
  sub->add_option("--max-seqs", o->mem.max_seqs, "Sequences the KV cache must hold")
      ->capture_default_str()->check(integer_in(1, 1'000'000, "sequences"));
  sub->add_option("--context", o->mem.context, "Tokens per sequence (prompt + output)")
      ->capture_default_str()->check(integer_in(1, 200'000'000, "tokens"));
  sub->add_option("--max-batched-tokens", o->mem.max_batched_tokens, "Tokens per iteration (sizes activations)")
      ->capture_default_str()->check(integer_in(1, 100'000'000, "tokens"));
  sub->add_option("--reserve-fraction", o->mem.reserve_fraction, "Per-GPU reserve as a fraction of its memory")
      ->capture_default_str()->check(CLI::Range(0.0, 0.9));
  sub->add_option("--reserve-bytes", o->mem.reserve_bytes, "Fixed per-GPU reserve in bytes, added to the fraction")
      ->capture_default_str()->check(integer_in(0, 1LL << 50, "bytes"));
  sub->add_option("--lua-instructions", o->lua.instructions, "Instruction budget per script call")
      ->capture_default_str()->check(integer_in(1, 1'000'000'000'000'000LL, "instructions"));
  sub->add_option("--lua-seconds", o->lua.seconds, "Wall-clock limit per strategy (loading it and candidates() together; its process is killed 0.5 s later). "
                                       "The default grows with machines over 16 GPUs (x GPUs/16: 4 s on 64); a value given is used as is")
      ->capture_default_str()->check(finite_in(0.001, 86400, "seconds"));
  sub->add_option("--lua-memory-mib", o->lua_memory_mib, "Memory cap per script")
      ->capture_default_str()->check(finite_in(1, 1 << 20, "MiB"));
  sub->add_flag("--json", o->json, "Print JSON (plans + memory per GPU) instead of the table");
  sub->add_option("--out,-o", o->out, "Also write the JSON to this file (atomically)");
  sub->callback([o] { run_plans(*o); });
}

}  // namespace peerplan::cli
