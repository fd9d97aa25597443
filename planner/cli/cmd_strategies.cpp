// `peerplan strategies`: list the shipped strategies (plugins/*.lua) and any given script, with
// their descriptions and parameters, so users know what `--strategy` and `--set` accept.
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "planner/cli/commands.hpp"
#include "planner/core/error.hpp"
#include "planner/strategy/strategy_runner.hpp"

namespace peerplan::cli {

namespace {

struct StrategiesOptions {
  std::vector<std::string> strategies;
  bool json = false;
};

std::string show_default(const nlohmann::json& v) { return v.is_string() ? "\"" + v.get<std::string>() + "\"" : v.dump(); }

void run_strategies_cmd(const StrategiesOptions& o) {
  std::vector<std::string> files = builtin_strategy_files();
  for (const auto& s : o.strategies) files.push_back(resolve_strategy(s));
  if (files.empty()) throw InputError("", "plugins/", "the shipped strategies; none found (set $PEERPLAN_HOME to the source tree)");
  std::vector<StrategyInfo> infos;
  for (const auto& f : files) infos.push_back(describe_strategy(f));
  if (o.json) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& s : infos) {
      nlohmann::json params = nlohmann::json::array();
      for (const auto& p : s.params)
        params.push_back({{"name", p.name}, {"type", p.type}, {"default", p.default_value}, {"help", p.help}});
      a.push_back({{"name", s.name}, {"file", s.file}, {"description", s.description}, {"params", params}});
    }
    std::cout << nlohmann::json{{"version", 1}, {"strategies", a}}.dump(2) << "\n";
    return;
  }
  for (const auto& s : infos) {
    std::cout << fmt::format("{}  ({})\n", s.name, std::filesystem::path(s.file).filename().string());
    std::cout << fmt::format("    {}\n", s.description.empty() ? "(no description)" : s.description);
    for (const auto& p : s.params)
      std::cout << fmt::format("    --set {}=<{}>  default {}: {}\n", p.name, p.type, show_default(p.default_value), p.help);
    std::cout << "\n";
  }
  std::cout << "Run one: peerplan plans --model llama-3.1-8b --machine MACHINE --strategy " << infos.front().name
            << "\nWrite your own: plugins/README.md (the API a script sees, with examples)\n";
}

}  // namespace

void add_strategies_command(CLI::App& app) {
  auto opts = std::make_shared<StrategiesOptions>();
  auto* sub = app.add_subcommand("strategies", "List partitioning strategies (Lua scripts) and their parameters");
  sub->footer(
      "A strategy is a Lua file returning {name, description, params, candidates(model, machine, options)}.\n"
      "The shipped ones live in plugins/; give your own with --strategy FILE (no rebuild needed).\n"
      "plugins/README.md documents what a script sees and the helper library (lib.layers, lib.placement,\n"
      "lib.plans).\n"
      "\n"
      "Examples:\n"
      "  peerplan strategies\n"
      "  peerplan strategies --strategy my_strategy.lua --json");
  sub->add_option("--strategy,-s", opts->strategies, "Also describe this Lua file (repeatable)");
  sub->add_flag("--json", opts->json, "Print JSON instead of text");
  sub->callback([opts] { run_strategies_cmd(*opts); });
}

}  // namespace peerplan::cli
