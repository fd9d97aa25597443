// `peerplan model FILE --out OUT` on hostile HuggingFace configs. Each case: exit 2, the message
// names the file and the field, the previous --out file is untouched.
#include <gtest/gtest.h>

#include "tests/hostile/cli_expect.hpp"

namespace peerplan::hostile {
namespace {

const nlohmann::json& llama() {
  static const nlohmann::json j = shipped_json("models/llm/llama-3.1-8b/config.json");
  return j;
}

// Runs `peerplan model <file> --out <previous>` on `text` and checks the failure contract.
void expect_model_rejected(const std::string& text, const std::vector<std::string>& mentions,
                           std::chrono::seconds deadline = std::chrono::seconds(60)) {
  ScratchDir d;
  PreviousOutput prev(d);
  std::string cfg = d.write("config.json", text);
  CliResult r = run_peerplan({"model", cfg, "--out", prev.path()}, "", deadline);
  expect_input_error(r, cfg, mentions);
  prev.expect_untouched();
}

TEST(CliModelHostile, TheUnmodifiedShippedConfigIsAccepted) {
  // The control for every case below: the base document itself is fine.
  ScratchDir d;
  std::string cfg = d.write("config.json", llama().dump(1));
  CliResult r = run_peerplan({"model", cfg, "--out", (d / "figures.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(nlohmann::json::parse(read_file((d / "figures.json").string())).contains("params_total"));
}

TEST(CliModelHostile, EmptyFile) { expect_model_rejected("", {"empty"}); }
TEST(CliModelHostile, TruncatedFile) { expect_model_rejected(llama().dump(1).substr(0, 200), {"line"}); }
TEST(CliModelHostile, TenThousandLevelsDeep) { expect_model_rejected(deep_object(10000), {"nested"}); }
TEST(CliModelHostile, TopLevelArray) { expect_model_rejected("[1, 2, 3]", {"object"}); }

TEST(CliModelHostile, WrongTypeNamesTheField) {
  expect_model_rejected(with_value(llama(), "/hidden_size", "4096"), {"hidden_size"});
  expect_model_rejected(with_value(llama(), "/num_hidden_layers", true), {"num_hidden_layers"});
  expect_model_rejected(with_value(llama(), "/architectures", "LlamaForCausalLM"), {"architectures"});
}

TEST(CliModelHostile, NanAsAStringNamesTheField) {
  expect_model_rejected(with_value(llama(), "/num_attention_heads", "NaN"), {"num_attention_heads"});
}

TEST(CliModelHostile, OverflowingNumberIsBadInputNotAnInternalError) {
  // Found 2026-11-30 by fuzz_json_in: nlohmann's out_of_range.406 escaped json_in as an internal
  // error (exit 1). Fixed in ea85f22.
  expect_model_rejected(with_raw(llama(), "/hidden_size", "1e999"), {});
}

TEST(CliModelHostile, ZeroAndNegativeSizesNameTheField) {
  expect_model_rejected(with_value(llama(), "/num_hidden_layers", 0), {"num_hidden_layers"});
  expect_model_rejected(with_value(llama(), "/hidden_size", -4096), {"hidden_size"});
  expect_model_rejected(with_value(llama(), "/num_attention_heads", 0), {"num_attention_heads"});
  expect_model_rejected(with_value(llama(), "/num_key_value_heads", -8), {"num_key_value_heads"});
  expect_model_rejected(with_value(llama(), "/vocab_size", 0), {"vocab_size"});
  expect_model_rejected(with_value(llama(), "/intermediate_size", -1), {"intermediate_size"});
}

TEST(CliModelHostile, ImplausiblyLargeSizesAreRefusedNotOverflowed) {
  // Found 2026-11-30, fixed in 1a65ba0 (plausibility caps): 2^40 layers made `peerplan model`
  // allocate ~150 MB/s until killed (hence the short deadline: this test must not eat the CI box);
  // a 10^15-wide hidden state or a 2^62 vocabulary overflowed int64 parameter counts (UB; printed
  // as negative or zero embedding_params) and exited 0.
  expect_model_rejected(with_value(llama(), "/num_hidden_layers", int64_t(1) << 40), {"num_hidden_layers"},
                        std::chrono::seconds(5));
  expect_model_rejected(with_value(llama(), "/hidden_size", int64_t(1000000000000000)), {"hidden_size"});
  expect_model_rejected(with_value(llama(), "/vocab_size", int64_t(1) << 62), {"vocab_size"});
}

TEST(CliModelHostile, HundredMegabyteConfigIsHandled) {
  // Generated at test time (never committed): a 100 MB field, then a wrong type after it. Over the
  // 16 MiB cap of a model config (issue 21): refused by its size before it is read or parsed.
  nlohmann::json j = llama();
  j["padding"] = std::string(100u << 20, 'x');
  j["num_hidden_layers"] = "thirty-two";
  expect_model_rejected(j.dump(), {"over the 16.0 MiB cap for a model config file"});
}

TEST(CliModelHostile, MissingFileAndDirectoryWithoutConfig) {
  ScratchDir d;
  CliResult r = run_peerplan({"model", (d / "missing" / "config.json").string()});
  expect_input_error(r, "config.json", {});
  CliResult r2 = run_peerplan({"model", d.path().string()});  // a directory with no config.json in it
  expect_input_error(r2, d.path().string(), {});
}

}  // namespace
}  // namespace peerplan::hostile
