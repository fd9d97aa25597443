// The local HuggingFace hub cache, read as huggingface_hub (file_download.py, constants.py) lays it out.
#include "planner/model/hf_cache.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace peerplan {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// refs/main holds a 40-hex commit (a branch ref); anything else is ignored, not trusted as a path.
std::string read_ref(const fs::path& ref) {
  std::error_code ec;
  if (!fs::is_regular_file(ref, ec) || fs::file_size(ref, ec) > 256) return "";
  std::ifstream in(ref);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.size() != 40) return "";
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return "";
  return s;
}

}  // namespace

HfCacheDir hf_cache_dir() {
  if (std::string v = env("HF_HUB_CACHE"); !v.empty()) return {v, "$HF_HUB_CACHE"};
  if (std::string v = env("HF_HOME"); !v.empty()) return {(fs::path(v) / "hub").string(), "$HF_HOME/hub"};
  if (std::string v = env("XDG_CACHE_HOME"); !v.empty())
    return {(fs::path(v) / "huggingface" / "hub").string(), "$XDG_CACHE_HOME/huggingface/hub"};
  std::string home = env("HOME");
  return {(fs::path(home.empty() ? "~" : home) / ".cache" / "huggingface" / "hub").string(),
          "~/.cache/huggingface/hub"};
}

bool looks_like_hf_repo_id(const std::string& id) {
  size_t slash = id.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == id.size() || id.find('/', slash + 1) != std::string::npos)
    return false;
  std::string org = id.substr(0, slash), name = id.substr(slash + 1);
  for (const std::string& part : {org, name})
    if (part == "." || part == ".." || part.find('\\') != std::string::npos) return false;
  return true;
}

std::optional<std::string> find_hf_snapshot_file(const std::string& cache, const std::string& repo_id,
                                                 std::vector<std::string>* looked, const std::string& file) {
  auto note = [&](const fs::path& p) {
    if (looked) looked->push_back(p.string());
  };
  if (!looks_like_hf_repo_id(repo_id)) return std::nullopt;
  std::string folder = "models--" + repo_id;
  folder.replace(folder.find('/'), 1, "--");
  const fs::path repo = fs::path(cache) / folder;
  std::error_code ec;
  const fs::path ref = repo / "refs" / "main";
  if (std::string hash = read_ref(ref); !hash.empty()) {
    fs::path p = repo / "snapshots" / hash / file;
    note(p);
    if (fs::is_regular_file(p, ec)) return p.string();
  } else {
    note(ref);
  }
  // No usable refs/main (a download by revision, a copied cache): the newest snapshot with the file.
  const fs::path snaps = repo / "snapshots";
  note(snaps / "*" / file);
  std::optional<std::string> best;
  fs::file_time_type best_t{};
  for (fs::directory_iterator it(snaps, ec), end; !ec && it != end; it.increment(ec)) {
    fs::path p = it->path() / file;
    if (!fs::is_regular_file(p, ec)) continue;
    fs::file_time_type t = fs::last_write_time(it->path(), ec);
    if (ec) continue;
    // Ties broken by name so the choice does not depend on directory order.
    if (!best || t > best_t || (t == best_t && p.string() > *best)) best = p.string(), best_t = t;
  }
  return best;
}

std::string hf_repo_id_of_path(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  // .../models--org--name/snapshots/<hash>/<file...>: find the "snapshots" part and the one before it.
  std::vector<std::string> parts;
  for (const auto& x : p) parts.push_back(x.string());
  for (size_t i = parts.size(); i-- > 1;) {
    if (parts[i] != "snapshots" || i + 1 >= parts.size()) continue;  // a snapshot hash follows
    const std::string& repo = parts[i - 1];
    if (repo.rfind("models--", 0) != 0) continue;
    std::string rest = repo.substr(8);
    size_t sep = rest.find("--");
    if (sep == std::string::npos || sep == 0 || sep + 2 == rest.size()) continue;
    return rest.substr(0, sep) + "/" + rest.substr(sep + 2);
  }
  return "";
}

}  // namespace peerplan
