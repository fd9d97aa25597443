// Turning what users type ("llama-3.1-8b", "chat", a path) into a file, and listing what ships.
#include <algorithm>
#include <filesystem>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/model/hf_cache.hpp"
#include "planner/model/model_config.hpp"
#include "planner/model/workload.hpp"

namespace peerplan {

namespace fs = std::filesystem;

namespace {

// Names under a shipped data folder: sub-directories holding `inner` (models), or files ending in
// `suffix` (workloads), with the suffix removed.
std::vector<std::string> list_shipped(const std::string& folder, const std::string& inner, const std::string& suffix) {
  std::vector<std::string> names;
  std::string dir = find_data_file(folder);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return names;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string n = e.path().filename().string();
    if (!inner.empty()) {
      if (e.is_directory() && fs::exists(e.path() / inner)) names.push_back(n);
    } else if (e.is_regular_file() && n.size() > suffix.size() &&
               n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.push_back(n.substr(0, n.size() - suffix.size()));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none found: is PEERPLAN_HOME set to the source tree?)" : s;
}

}  // namespace

std::vector<std::string> shipped_model_names() { return list_shipped("models/llm", "config.json", ""); }
std::vector<std::string> shipped_workload_names() { return list_shipped("models/workloads", "", ".json"); }

std::string resolve_model_path(const std::string& name_or_path) {
  if (name_or_path.empty()) throw InputError("", "model", "expected a config.json path or a shipped model name");
  std::error_code ec;
  // Anything at the path (a FIFO, a symlink loop...) is the user's file: the reader says what is wrong.
  if (path_present(name_or_path) && !fs::is_directory(name_or_path, ec)) return name_or_path;
  if (fs::is_directory(name_or_path, ec)) {
    fs::path p = fs::path(name_or_path) / "config.json";
    if (fs::is_regular_file(p, ec)) return p.string();
    throw InputError(name_or_path, "", "is a directory without a config.json (give the HuggingFace config.json)");
  }
  // A bare name: a shipped model card. A name with a slash that does not exist is a missing file.
  if (name_or_path.find('/') == std::string::npos) {
    std::string p = find_data_file("models/llm/" + name_or_path + "/config.json");
    if (fs::is_regular_file(p, ec)) return p;
  }
  // "org/name": a HuggingFace model id in the local hub cache (planner/model/hf_cache.hpp).
  if (looks_like_hf_repo_id(name_or_path)) {
    HfCacheDir cache = hf_cache_dir();
    std::vector<std::string> looked;
    if (auto p = find_hf_snapshot_file(cache.path, name_or_path, &looked)) return *p;
    std::string where;
    for (const auto& l : looked) where += "\n  " + l;
    throw InputError(name_or_path, "",
                     "no such file, no shipped model of that name, and not in the HuggingFace cache " + cache.path +
                         " (" + cache.from + "; set HF_HUB_CACHE or HF_HOME to another, or download it with "
                         "`huggingface-cli download " + name_or_path + " config.json`); looked for:" + where +
                         "\nshipped models: " + join(shipped_model_names()));
  }
  throw InputError(name_or_path, "", "no such file, and no shipped model of that name; shipped models: " +
                                         join(shipped_model_names()));
}

std::string resolve_workload_path(const std::string& name_or_path) {
  if (name_or_path.empty()) throw InputError("", "workload", "expected a workload JSON path or a shipped workload name");
  std::error_code ec;
  if (path_present(name_or_path) && !fs::is_directory(name_or_path, ec)) return name_or_path;  // the reader says what is wrong
  if (name_or_path.find('/') == std::string::npos) {
    std::string base = name_or_path;
    if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0) base.resize(base.size() - 5);
    std::string p = find_data_file("models/workloads/" + base + ".json");
    if (fs::is_regular_file(p, ec)) return p;
  }
  throw InputError(name_or_path, "", "no such file, and no shipped workload of that name; shipped workloads: " +
                                         join(shipped_workload_names()));
}

}  // namespace peerplan
