#pragma once
// Reads an engine's pinned flag list (planner/export/flags/<engine>-<version>.txt) and checks a
// launch against it: every flag, its value when the flag has fixed choices, every environment
// variable and (TensorRT-LLM) every YAML key the export writes must be listed there.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "planner/export/engine_export.hpp"

namespace peerplan::test_export {

struct FlagList {
  std::vector<std::string> program;
  int positional = 0;
  std::set<std::string> switches;
  std::map<std::string, std::set<std::string>> values;  // flag -> choices ({"*"}: any)
  std::set<std::string> env;
  std::map<std::string, std::set<std::string>> yaml;
};

inline std::set<std::string> split_choices(const std::string& s) {
  std::set<std::string> out;
  std::stringstream in(s);
  for (std::string c; std::getline(in, c, ',');) out.insert(c);
  return out;
}

inline FlagList load_flag_list(Engine e) {
  FlagList f;
  const std::string path = std::string(PEERPLAN_SOURCE_DIR) + "/planner/export/flags/" + engine_info(e).flags_file;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing " << path;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ls(line);
    std::string kind, a, b;
    ls >> kind >> a;
    std::getline(ls >> std::ws, b);
    if (kind == "program") {
      f.program.push_back(a);
      for (std::stringstream rest(b); rest >> a;) f.program.push_back(a);
    } else if (kind == "positional") f.positional = std::stoi(a);
    else if (kind == "switch") f.switches.insert(a);
    else if (kind == "value") f.values[a] = split_choices(b);
    else if (kind == "env") f.env.insert(a);
    else if (kind == "yaml") f.yaml[a] = split_choices(b);
    else ADD_FAILURE() << path << ": unknown line kind '" << kind << "'";
  }
  return f;
}

inline bool allowed(const std::set<std::string>& choices, const std::string& v) {
  return choices.count("*") || choices.count(v);
}

// Flattens "a:\n  b: x\nc: y" into {"a.b": "x", "c": "y"} (the two-level YAML the export writes).
inline std::map<std::string, std::string> flat_yaml(const std::string& text) {
  std::map<std::string, std::string> out;
  std::string parent;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const bool nested = line.rfind("  ", 0) == 0;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(nested ? 2 : 0, colon - (nested ? 2 : 0));
    std::string value = colon + 1 < line.size() ? line.substr(colon + 2) : "";
    if (!nested && value.empty()) parent = key;
    else out[nested ? parent + "." + key : key] = value;
  }
  return out;
}

// Every word of every launch is one the pinned version documents.
inline void expect_documented(const EngineExport& x) {
  const FlagList f = load_flag_list(x.engine);
  for (const Launch& l : x.launches) {
    ASSERT_GE(l.argv.size(), f.program.size());
    for (size_t i = 0; i < f.program.size(); ++i) EXPECT_EQ(l.argv[i], f.program[i]);
    size_t i = f.program.size();
    for (int p = 0; p < f.positional; ++p, ++i) {
      ASSERT_LT(i, l.argv.size());
      EXPECT_NE(l.argv[i].rfind("--", 0), 0u) << "positional argument expected, got " << l.argv[i];
    }
    for (; i < l.argv.size(); ++i) {
      const std::string& w = l.argv[i];
      if (f.switches.count(w)) continue;
      auto it = f.values.find(w);
      ASSERT_NE(it, f.values.end()) << engine_info(x.engine).label << " " << engine_info(x.engine).version
                                    << " does not document flag '" << w << "'";
      ASSERT_LT(i + 1, l.argv.size()) << w << " needs a value";
      EXPECT_TRUE(allowed(it->second, l.argv[i + 1])) << w << " " << l.argv[i + 1] << " is not a documented choice";
      ++i;
    }
    for (const auto& [k, v] : l.env) EXPECT_TRUE(f.env.count(k)) << "undocumented environment variable " << k;
    for (const auto& [name, content] : l.files)
      for (const auto& [k, v] : flat_yaml(content)) {
        auto it = f.yaml.find(k);
        ASSERT_NE(it, f.yaml.end()) << "undocumented YAML key " << k << " in " << name;
        EXPECT_TRUE(allowed(it->second, v)) << k << ": " << v;
      }
  }
}

}  // namespace peerplan::test_export
