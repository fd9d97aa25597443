// `peerplan plan --validate K` where it cannot execute: a build without CUDA refuses before the
// search; a CUDA build refuses at the executor's preflight (no GPU on this host, or a profile
// measured on another host). Either way: exit 2 and a message that says what is missing.
#include <gtest/gtest.h>

#include "run_command.hpp"

#include <array>
#include <cstdio>
#include <string>

namespace {


bool built_with_cuda() {
  int rc = -1;
  // --self-test needs the executor: a build without CUDA names CUDA in its refusal.
  std::string out = run(std::string(PEERPLAN_BINARY) + " validate --self-test", &rc);
  return out.find("built without CUDA") == std::string::npos;
}

}  // namespace

TEST(PlanValidateCli, WithoutAnExecutorOrGpuIsExit2WithAClearMessage) {
  int rc = -1;
  const std::string out =
      run(std::string(PEERPLAN_BINARY) +
              " plan --model llama-3.1-8b --machine h200x2-nvlink --strategy single_gpu --requests 4 --validate 1",
          &rc);
  EXPECT_EQ(rc, 2) << out;
  if (built_with_cuda()) {
    // The executor's preflight refuses: no GPU here, or (on a GPU host) a profile of another host.
    EXPECT_TRUE(out.find("this host has none visible") != std::string::npos ||
                out.find("cannot be validated here") != std::string::npos)
        << out;
  } else {
    EXPECT_NE(out.find("--validate"), std::string::npos) << out;         // names the option
    EXPECT_NE(out.find("built without CUDA"), std::string::npos) << out;  // and why
    EXPECT_EQ(out.find("llama-3.1-8b on"), std::string::npos) << out;     // refused before the search
  }
}

TEST(PlanValidateCli, NegativeCountIsExit2) {
  int rc = -1;
  const std::string out = run(std::string(PEERPLAN_BINARY) +
                                  " plan --model llama-3.1-8b --machine h200x2-nvlink --strategy single_gpu --validate -1",
                              &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--validate"), std::string::npos) << out;
}
