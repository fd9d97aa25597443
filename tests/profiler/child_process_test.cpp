// profiler/common/child_process: the re-executed children (NCCL with P2P off, validate's missing
// shapes) are started with this environment plus overrides, and a failing child is an error that
// says how it failed. Run with /bin/sh as the child.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "planner/core/error.hpp"
#include "profiler/common/child_process.hpp"

using namespace peerplan;
using namespace peerplan::profiler;

TEST(ChildProcess, AChildSeesTheEnvironmentWithOverridesReplacingVariables) {
  setenv("PEERPLAN_CHILD_TEST_KEEP", "kept", 1);
  setenv("PEERPLAN_CHILD_TEST_SET", "old", 1);
  EXPECT_NO_THROW(run_child({"/bin/sh", "-c", "test \"$PEERPLAN_CHILD_TEST_KEEP\" = kept && test \"$PEERPLAN_CHILD_TEST_SET\" = new"},
                            {"PEERPLAN_CHILD_TEST_SET=new"}, "test child", "hint"));
  // A variable whose name is a prefix of another is not replaced by it.
  setenv("PEERPLAN_CHILD_TEST_SET_LONGER", "long", 1);
  EXPECT_NO_THROW(run_child({"/bin/sh", "-c", "test \"$PEERPLAN_CHILD_TEST_SET_LONGER\" = long"},
                            {"PEERPLAN_CHILD_TEST_SET=new"}, "test child", "hint"));
}

TEST(ChildProcess, AFailingChildIsAnErrorWithItsStatusAndTheHint) {
  try {
    run_child({"/bin/sh", "-c", "exit 3"}, {}, "measuring things", "rerun X to see why");
    FAIL() << "exit 3 was taken for success";
  } catch (const RuntimeError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("measuring things"), std::string::npos) << w;
    EXPECT_NE(w.find("exit status 3"), std::string::npos) << w;
    EXPECT_NE(w.find("rerun X to see why"), std::string::npos) << w;
  }
  EXPECT_THROW(run_child({"/nonexistent/peerplan-child"}, {}, "x", "y"), RuntimeError);
  EXPECT_THROW(run_child({"/bin/sh", "-c", "kill -9 $$"}, {}, "x", "y"), RuntimeError);
}

TEST(ChildProcess, ATempDirIsFreshAndRemovedWithItsFiles) {
  std::string path;
  {
    TempDir a("peerplan-test"), b("peerplan-test");
    path = a.path();
    EXPECT_NE(a.path(), b.path());
    ASSERT_TRUE(std::filesystem::is_directory(path));
    std::ofstream(a.file("rows.json")) << "{}";
    EXPECT_TRUE(std::filesystem::exists(a.file("rows.json")));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(ChildProcess, SelfExeIsThisTestBinary) {
  const std::string exe = self_exe("a test");
  EXPECT_TRUE(std::filesystem::exists(exe));
  EXPECT_NE(exe.find("test_profiler"), std::string::npos) << exe;
}
