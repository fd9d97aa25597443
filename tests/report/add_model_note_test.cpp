// The note `plan` and `simulate` print when over a quarter of a plan's step time is not from
// measured points (issue 23 item 1): it gives the exact command that adds the model's shapes to
// the machine file the user passed, with the model argument as they typed it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "planner/report/search_report.hpp"
#include "planner/topology/shape_set.hpp"

using namespace peerplan;

namespace {

nlohmann::json fitted_provenance(const std::string& machine_file) {
  return {{"machine_file", machine_file},
          {"measured", {{"gemm_shapes", 308}}},
          {"cost_sources", {{"measured", {{"time_fraction", 0.3}}}, {"fitted", {{"time_fraction", 0.7}}}}},
          {"fitted_fallback", {{"band_gemm", 0.05}, {"band_attention", 0.08}}}};
}

}  // namespace

TEST(AddModelNote, TheNoteGivesTheCommandForTheMachineFileAndModelArgumentPassed) {
  const std::string note = unmeasured_note("qwen2-7b", fitted_provenance("my-host.json"), "./Qwen2-7B/config.json");
  EXPECT_NE(note.find("peerplan profile --add-model ./Qwen2-7B/config.json --machine my-host.json\n"), std::string::npos)
      << note;
  EXPECT_NE(note.find("70 % of qwen2-7b's step time"), std::string::npos) << note;
}

TEST(AddModelNote, WithoutAModelArgumentTheModelsNameIsUsed) {
  const std::string note = unmeasured_note("qwen1.5-moe-a2.7b", fitted_provenance("/data/h200.json"));
  EXPECT_NE(note.find("peerplan profile --add-model qwen1.5-moe-a2.7b --machine /data/h200.json"), std::string::npos)
      << note;
}

TEST(AddModelNote, ArgumentsAShellWouldSplitAreQuoted) {
  EXPECT_EQ(add_model_command("m", "my host's.json"), "peerplan profile --add-model m --machine 'my host'\\''s.json'");
  EXPECT_EQ(add_model_command("Qwen/Qwen2-7B", "h.json"), "peerplan profile --add-model Qwen/Qwen2-7B --machine h.json");
  EXPECT_EQ(add_model_command("a;b", "h.json"), "peerplan profile --add-model 'a;b' --machine h.json");
  const std::string note = unmeasured_note("m", fitted_provenance("dir with space/h.json"));
  EXPECT_NE(note.find("--machine 'dir with space/h.json'"), std::string::npos) << note;
}

TEST(AddModelNote, NoMachineFileInTheProvenanceLeavesAPlaceholder) {
  nlohmann::json prov = fitted_provenance("");
  prov.erase("machine_file");
  EXPECT_NE(unmeasured_note("m", prov).find("--add-model m --machine <file>"), std::string::npos);
}
