#pragma once
// A HuggingFace model id ("meta-llama/Llama-3.1-8B") -> the config.json of its snapshot in the
// local hub cache, laid out as huggingface_hub writes it:
//   <cache>/models--<org>--<name>/refs/main          (the commit hash main points at)
//   <cache>/models--<org>--<name>/snapshots/<hash>/config.json
// The cache is $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub (huggingface_hub's own order).
#include <optional>
#include <string>
#include <vector>

namespace peerplan {

// The hub cache folder the environment selects, with the rule that chose it ("$HF_HUB_CACHE", ...).
struct HfCacheDir {
  std::string path;
  std::string from;
};
HfCacheDir hf_cache_dir();

// True when `id` looks like a hub model id: "org/name" (one slash, no "." or ".." part, no
// leading or trailing slash).
bool looks_like_hf_repo_id(const std::string& id);

// The snapshot file `file` (config.json by default) of `repo_id` in `cache`: the snapshot
// refs/main names when it holds that file, else the newest snapshot (by modification time) that
// does. nullopt when none; `looked` (when given) receives each place looked at, for the error.
std::optional<std::string> find_hf_snapshot_file(const std::string& cache, const std::string& repo_id,
                                                 std::vector<std::string>* looked = nullptr,
                                                 const std::string& file = "config.json");

// "org/name" when `path` lies in a hub cache snapshot (.../models--org--name/snapshots/<hash>/...),
// else "": the name a model read from the cache is shown by, rather than its commit hash.
std::string hf_repo_id_of_path(const std::string& path);

}  // namespace peerplan
