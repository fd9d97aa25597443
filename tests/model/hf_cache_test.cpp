// The local HuggingFace hub cache: which folder the environment selects, refs/main, the newest
// snapshot when main names none, and `--model org/name` resolving through it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include <unistd.h>

#include "planner/core/error.hpp"
#include "planner/model/hf_cache.hpp"
#include "planner/model/model_config.hpp"

namespace peerplan {
namespace {

namespace fs = std::filesystem;

// Sets (or unsets) an environment variable for one scope.
class EnvVar {
 public:
  EnvVar(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~EnvVar() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

const char* kConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
  "max_position_embeddings": 2048})";
const std::string kHashA = std::string(40, 'a');
const std::string kHashB = std::string(40, 'b');

class HfCache : public ::testing::Test {
 protected:
  fs::path root = fs::temp_directory_path() / ("peerplan-hf-" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(root); }
  void TearDown() override { fs::remove_all(root); }
  // <cache>/models--org--name/snapshots/<hash>/config.json, and refs/main when `main` is given.
  fs::path snapshot(const fs::path& cache, const std::string& repo_dir, const std::string& hash,
                    const std::string& main = "") {
    fs::path snap = cache / repo_dir / "snapshots" / hash;
    fs::create_directories(snap);
    std::ofstream(snap / "config.json") << kConfig;
    if (!main.empty()) {
      fs::create_directories(cache / repo_dir / "refs");
      std::ofstream(cache / repo_dir / "refs" / "main") << main;
    }
    return snap / "config.json";
  }
};

TEST_F(HfCache, EnvironmentSelectsTheCacheInHuggingFaceHubsOrder) {
  EnvVar a("HF_HUB_CACHE", "/x/hub-cache"), b("HF_HOME", "/y/hf-home"), c("XDG_CACHE_HOME", "/z/xdg"),
      d("HOME", "/home/u");
  EXPECT_EQ(hf_cache_dir().path, "/x/hub-cache");
  EXPECT_EQ(hf_cache_dir().from, "$HF_HUB_CACHE");
  {
    EnvVar off("HF_HUB_CACHE", std::nullopt);
    EXPECT_EQ(hf_cache_dir().path, "/y/hf-home/hub");
    EnvVar off2("HF_HOME", std::nullopt);
    EXPECT_EQ(hf_cache_dir().path, "/z/xdg/huggingface/hub");
    EnvVar off3("XDG_CACHE_HOME", std::nullopt);
    EXPECT_EQ(hf_cache_dir().path, "/home/u/.cache/huggingface/hub");
  }
}

TEST_F(HfCache, RepoIdShape) {
  EXPECT_TRUE(looks_like_hf_repo_id("meta-llama/Llama-3.1-8B"));
  EXPECT_FALSE(looks_like_hf_repo_id("llama-3.1-8b"));
  EXPECT_FALSE(looks_like_hf_repo_id("a/b/c"));
  EXPECT_FALSE(looks_like_hf_repo_id("/abs"));
  EXPECT_FALSE(looks_like_hf_repo_id("org/"));
  EXPECT_FALSE(looks_like_hf_repo_id("../x"));
  EXPECT_EQ(hf_repo_id_of_path("/c/hub/models--Qwen--Qwen2-7B/snapshots/" + kHashA + "/config.json"), "Qwen/Qwen2-7B");
  EXPECT_EQ(hf_repo_id_of_path("/c/models/llama/config.json"), "");
}

TEST_F(HfCache, RefsMainPicksTheSnapshotElseTheNewest) {
  fs::path main_cfg = snapshot(root, "models--org--tiny", kHashA, kHashA + "\n");
  fs::path other = snapshot(root, "models--org--tiny", kHashB);
  // Newer than main's snapshot, but main wins while it names one that holds the file.
  fs::last_write_time(other.parent_path(), fs::last_write_time(main_cfg.parent_path()) + std::chrono::hours(1));
  EXPECT_EQ(find_hf_snapshot_file(root.string(), "org/tiny"), main_cfg.string());
  // main names a snapshot that is not there (a partial download): the newest one that is.
  std::ofstream(root / "models--org--tiny" / "refs" / "main", std::ios::trunc) << std::string(40, 'c');
  EXPECT_EQ(find_hf_snapshot_file(root.string(), "org/tiny"), other.string());
  // refs/main holding garbage is ignored, not followed as a path.
  std::ofstream(root / "models--org--tiny" / "refs" / "main", std::ios::trunc) << "../../../etc";
  EXPECT_EQ(find_hf_snapshot_file(root.string(), "org/tiny"), other.string());
  std::vector<std::string> looked;
  EXPECT_FALSE(find_hf_snapshot_file(root.string(), "org/absent", &looked));
  ASSERT_EQ(looked.size(), 2u);
  EXPECT_NE(looked[0].find("models--org--absent"), std::string::npos);
}

TEST_F(HfCache, ModelArgumentResolvesThroughTheCache) {
  fs::path cache = root / "home" / "hub";
  fs::path cfg = snapshot(cache, "models--meta-llama--Tiny-Llama", kHashA, kHashA);
  EnvVar off("HF_HUB_CACHE", std::nullopt), home("HF_HOME", (root / "home").string());
  EXPECT_EQ(resolve_model_path("meta-llama/Tiny-Llama"), cfg.string());
  ModelConfig c = load_model_config(resolve_model_path("meta-llama/Tiny-Llama"));
  EXPECT_EQ(c.name, "meta-llama/Tiny-Llama") << "the hub id, not the commit hash";
  EXPECT_EQ(c.layers, 2);
  try {
    resolve_model_path("meta-llama/Not-Downloaded");
    ADD_FAILURE() << "resolved a model that is not in the cache";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(cache.string()), std::string::npos) << m;
    EXPECT_NE(m.find("$HF_HOME/hub"), std::string::npos) << m;
    EXPECT_NE(m.find("models--meta-llama--Not-Downloaded/refs/main"), std::string::npos) << m;
    EXPECT_NE(m.find("shipped models"), std::string::npos) << m;
  }
  // A path that exists wins over a cache entry of the same spelling.
  fs::create_directories(root / "meta-llama" / "Tiny-Llama");
  std::ofstream(root / "meta-llama" / "Tiny-Llama" / "config.json") << kConfig;
  fs::path cwd = fs::current_path();
  fs::current_path(root);
  EXPECT_EQ(resolve_model_path("meta-llama/Tiny-Llama"), (fs::path("meta-llama/Tiny-Llama") / "config.json").string());
  fs::current_path(cwd);
}

}  // namespace
}  // namespace peerplan
