#include <gtest/gtest.h>

#include <filesystem>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "profiler/common/checkpoint.hpp"
#include "fixture.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

namespace {
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("peerplan_prof_" + name)).string();
}
}  // namespace

TEST(Checkpoint, ResumeSkipsCompletedMeasurementsKeepingOrder) {
  auto sel = select_measurements({}, {});
  auto rest = remaining_after_resume(sel, {"launch_overhead", "hbm", "p2p_ce"});
  ASSERT_EQ(rest.size(), sel.size() - 3);
  EXPECT_STREQ(rest.front()->name, "h2d_d2h") << "the first not-yet-done entry in table order";
  for (auto* m : rest) EXPECT_STRNE(m->name, "p2p_ce");
  // A completed name that is not selected now changes nothing.
  EXPECT_EQ(remaining_after_resume(select_measurements({"hbm"}, {}), {"gemm"}).size(), 1u);
}

TEST(Checkpoint, ProfileRoundTripsThroughLoadMachine) {
  Machine m = proftest::two_gpu_profile();
  CheckpointState st;
  st.completed = {"p2p_ce", "nccl"};
  st.options = {{"samples", 20}};
  write_checkpoint_state(m, st);
  std::string path = temp_path("roundtrip.json");
  save_profile(m, path);
  Machine back = load_machine(path);
  ASSERT_TRUE(back.measured());
  EXPECT_EQ(back.gpu_count(), 2);
  EXPECT_EQ(back.gpus[1].uuid, "GPU-00000001");
  ASSERT_EQ(back.measurements->transfers.size(), 1u);
  const auto& pts = back.measurements->transfers[0].points;
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_NEAR(pts[1].time.median, m.measurements->transfers[0].points[1].time.median, 1e-12);
  EXPECT_EQ(back.measurements->collectives[0].op, "all_reduce");
  EXPECT_EQ(back.measurements->gemms[0].m, 8192);
  EXPECT_TRUE(back.p2p[0][1].usable());
  auto st2 = read_checkpoint_state(back);
  EXPECT_FALSE(st2.complete);
  EXPECT_EQ(st2.completed, st.completed);
  EXPECT_EQ(st2.options, st.options);
  std::filesystem::remove(path);
}

TEST(Checkpoint, ResumeRefusesOtherGpus) {
  Machine cp = proftest::two_gpu_profile();
  cp.source_file = "old.json";
  Machine now = proftest::two_gpu_profile();
  EXPECT_NO_THROW(check_resume_compatible(cp, now, nlohmann::json::object()));
  now.gpus[1].uuid = "GPU-other";
  try {
    check_resume_compatible(cp, now, nlohmann::json::object());
    FAIL() << "mixing curves of different GPUs would corrupt the profile";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "old.json");
    EXPECT_EQ(e.field(), "/gpus/1");
  }
  Machine one = proftest::two_gpu_profile();
  one.gpus.pop_back();
  EXPECT_THROW(check_resume_compatible(cp, one, nlohmann::json::object()), InputError);
}

TEST(Checkpoint, ResumeRefusesADifferentSweep) {
  Machine cp = proftest::two_gpu_profile();
  CheckpointState st;
  st.options = {{"samples", 20}, {"quick", false}};
  write_checkpoint_state(cp, st);
  Machine now = proftest::two_gpu_profile();
  EXPECT_NO_THROW(check_resume_compatible(cp, now, st.options));
  nlohmann::json other = {{"samples", 5}, {"quick", true}};
  EXPECT_THROW(check_resume_compatible(cp, now, other), InputError);
}

TEST(Checkpoint, SaveIsAtomicAndLeavesNoTemporaryFile) {
  std::string dir = temp_path("atomic_dir");
  std::filesystem::create_directories(dir);
  std::string path = dir + "/p.json";
  write_file_atomic(path, "old");
  save_profile(proftest::two_gpu_profile(), path);
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) { (void)e; ++files; }
  EXPECT_EQ(files, 1) << "only the profile itself: the temporary was renamed over it";
  EXPECT_NE(read_text_file(path).find("\"measurements\""), std::string::npos);
  std::filesystem::remove_all(dir);
}
