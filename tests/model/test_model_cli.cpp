// `peerplan model` end to end: the real binary, its exit codes and its JSON.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "model_test_util.hpp"

namespace peerplan {
namespace {

struct CliRun {
  int code = -1;
  std::string out;  // stdout and stderr together
};

CliRun run(const std::string& args) {
  std::string cmd = std::string(PEERPLAN_BINARY) + " " + args + " 2>&1";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(ModelCli, JsonOfAShippedNameHasTheContractKeys) {
  CliRun r = run("model llama-3.1-8b --json");
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("params_total").get<int64_t>(), 8030261248LL);
  EXPECT_EQ(j.at("kv_bytes_per_token").get<int64_t>(), 131072);
  EXPECT_EQ(j.at("weight_bytes").get<int64_t>(), 2 * 8030261248LL);
  EXPECT_GT(j.at("flops_per_token").at("at_context_1").get<double>(), 1.4e10);
}

TEST(ModelCli, TextSummaryCollapsesLayersAndShowsExperts) {
  CliRun r = run("model " + test::shipped_config("deepseek-v2-lite"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("15.71 B"), std::string::npos) << r.out;      // parameters
  EXPECT_NE(r.out.find("1-26"), std::string::npos) << r.out;         // 26 identical MoE layers, one row
  EXPECT_NE(r.out.find("expert.gate_up"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("64 (6/tok)"), std::string::npos) << r.out;   // routed experts, top-6
  EXPECT_NE(r.out.find("kv_lora_rank 512"), std::string::npos) << r.out;
}

TEST(ModelCli, OutWritesTheJsonFile) {
  std::string path = test::temp_file("cli-out.json", "");
  std::filesystem::remove(path);
  CliRun r = run("model mixtral-8x7b --out " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json j = test::read_json(path);
  EXPECT_EQ(j.at("experts").at("routed").get<int>(), 8);
  std::filesystem::remove(path);
}

TEST(ModelCli, BadInputExitsTwoNamingFileAndField) {
  std::string path = test::temp_file("bad-config.json", "");
  nlohmann::json j = test::read_json(test::shipped_config("llama-3.1-8b"));
  j["num_attention_heads"] = 30;
  std::ofstream(path) << j.dump();
  CliRun r = run("model " + path);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(path), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("num_attention_heads"), std::string::npos) << r.out;
  std::filesystem::remove(path);

  CliRun u = run("model no-such-model");
  EXPECT_EQ(u.code, 2) << u.out;
  EXPECT_NE(u.out.find("llama-3.1-8b"), std::string::npos) << u.out;  // lists what is shipped
  CliRun t = run("model " + test::temp_file("truncated.json", test::kTruncatedConfig));
  EXPECT_EQ(t.code, 2) << t.out;
  EXPECT_NE(t.out.find("malformed JSON"), std::string::npos) << t.out;
  CliRun c = run("model llama-3.1-8b --context 0");
  EXPECT_EQ(c.code, 2) << c.out;
}

TEST(ModelCli, ListShowsEveryShippedModel) {
  CliRun r = run("model --list");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* n : {"llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "mistral-7b", "qwen1.5-moe-a2.7b",
                        "deepseek-v2-lite"})
    EXPECT_NE(r.out.find(n), std::string::npos) << n << "\n" << r.out;
}

}  // namespace
}  // namespace peerplan
