// An export as a bash script users can read and run, and as JSON for tools.
#include <fmt/format.h>

#include "planner/export/engine_export.hpp"

namespace peerplan {

std::string shell_quote(const std::string& w) {
  if (w.empty()) return "''";
  bool safe = true;
  for (unsigned char c : w)
    if (!(std::isalnum(c) || std::string_view("@%+=:,./_-").find(char(c)) != std::string_view::npos)) safe = false;
  // A leading '=' or '~' is safe in argv but '~' expands: quote it; '=' first only matters for env words.
  if (safe && w[0] != '~') return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

namespace {

// Comment lines carry user-given names: no newline may end the comment early.
std::string comment(const std::string& text) {
  std::string s = "# ";
  for (char c : text) s += (c == '\n' || c == '\r') ? ' ' : c;
  return s + "\n";
}

// A here-document delimiter that no line of `content` equals.
std::string heredoc_tag(const std::string& content) {
  std::string tag = "PEERPLAN_EOF";
  while (content.find("\n" + tag + "\n") != std::string::npos || content.rfind(tag + "\n", 0) == 0) tag += "_";
  return tag;
}

}  // namespace

std::string render_script(const EngineExport& x) {
  const EngineInfo& info = engine_info(x.engine);
  std::string s = "#!/usr/bin/env bash\n";
  s += comment(fmt::format("peerplan export: plan '{}' on {} {} ({} launch{})", x.plan_name, info.label, info.version,
                           x.launches.size(), x.launches.size() == 1 ? "" : "es"));
  for (const auto& n : x.notes) s += comment("note: " + n);
  s += "set -euo pipefail\n";
  const bool many = x.launches.size() > 1;
  for (const Launch& l : x.launches) {
    s += "\n" + comment(fmt::format("replica {}: GPUs {} on port {}", l.replica, fmt::join(l.gpus, ","), l.port));
    for (const auto& [name, content] : l.files) {
      std::string tag = heredoc_tag(content);
      s += "cat > " + shell_quote(name) + " <<'" + tag + "'\n" + content;
      if (!content.empty() && content.back() != '\n') s += "\n";
      s += tag + "\n";
    }
    std::string line;
    for (const auto& [k, v] : l.env) line += k + "=" + shell_quote(v) + " ";
    // One flag (with its value) per continued line, so the script reads like the engine's docs.
    for (size_t i = 0; i < l.argv.size(); ++i) {
      const std::string& w = l.argv[i];
      const bool flag = w.rfind("--", 0) == 0;
      if (flag && i > 0) line += " \\\n    ";
      else if (i > 0) line += " ";
      line += shell_quote(w);
    }
    s += line + (many ? " &\n" : "\n");
  }
  if (many) s += "\nwait\n";
  return s;
}

nlohmann::json export_to_json(const EngineExport& x) {
  const EngineInfo& info = engine_info(x.engine);
  nlohmann::json j{{"engine", info.key}, {"engine_version", info.version}, {"plan", x.plan_name},
                   {"notes", x.notes}, {"launches", nlohmann::json::array()}};
  for (const Launch& l : x.launches) {
    nlohmann::json env = nlohmann::json::object(), files = nlohmann::json::object();
    for (const auto& [k, v] : l.env) env[k] = v;
    for (const auto& [k, v] : l.files) files[k] = v;
    j["launches"].push_back({{"replica", l.replica}, {"port", l.port}, {"gpus", l.gpus}, {"env", env},
                             {"files", files}, {"argv", l.argv}});
  }
  return j;
}

}  // namespace peerplan
