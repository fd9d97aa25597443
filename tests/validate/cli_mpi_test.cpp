// `peerplan validate --mpi` launch rules on the built binary (no GPU, no mpirun needed): the
// refusals happen before MPI or CUDA is touched, with exit 2.
#include <gtest/gtest.h>

#include "run_command.hpp"

#include <array>
#include <cstdio>
#include <string>

namespace {


const std::string kArgs = std::string(" --plan ") + PEERPLAN_SOURCE_DIR + "/docs/validation/plans/llama8b-1gpu.json" +
                          " --model llama-3.1-8b --workload chat --machine h200x2-nvlink";

}  // namespace

TEST(ValidateMpiCli, StartedByALauncherWithoutMpiFlagIsRefusedExit2) {
  // What mpirun -np 2 sets: without --mpi every rank would run the whole plan on every GPU.
  int rc = -1;
  std::string out = run("OMPI_COMM_WORLD_SIZE=2 " + std::string(PEERPLAN_BINARY) + " validate" + kArgs, &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--mpi"), std::string::npos) << out;
}

TEST(ValidateMpiCli, MpiOnlyForServingValidationExit2) {
  // --self-test and --compare are single-process work (or, without an MPI build, --mpi itself is
  // refused): exit 2 either way, naming --mpi.
  for (const std::string& extra : {std::string(" --self-test"), std::string(" --compare a.json b.json")}) {
    int rc = -1;
    std::string out = run(std::string(PEERPLAN_BINARY) + " validate --mpi" + extra, &rc);
    EXPECT_EQ(rc, 2) << extra << ": " << out;
    EXPECT_NE(out.find("--mpi"), std::string::npos) << out;
  }
}

// `peerplan plan --validate K --mpi`: the same launch rules, checked before the search.
namespace {

const std::string kPlanArgs = " plan --model llama-3.1-8b --machine h200x2-nvlink --requests 4";

bool built_with_mpi() {
  int rc = -1;
  std::string out = run(std::string(PEERPLAN_BINARY) + kPlanArgs + " --validate 1 --mpi", &rc);
  return out.find("built without it") == std::string::npos;
}

}  // namespace

TEST(PlanMpiCli, MpiWithoutValidateIsRefusedExit2) {
  int rc = -1;
  std::string out = run(std::string(PEERPLAN_BINARY) + kPlanArgs + " --mpi", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--validate K as well"), std::string::npos) << out;
  EXPECT_EQ(out.find("llama-3.1-8b on"), std::string::npos) << "refused before the search: " << out;
}

TEST(PlanMpiCli, MpiWithoutMpirunOrWithoutAnMpiBuildIsRefusedExit2) {
  int rc = -1;
  std::string out = run(std::string(PEERPLAN_BINARY) + kPlanArgs + " --validate 1 --mpi", &rc);
  EXPECT_EQ(rc, 2) << out;
  if (built_with_mpi())
    EXPECT_NE(out.find("a start by mpirun: mpirun -np N peerplan plan"), std::string::npos) << out;
  else
    EXPECT_NE(out.find("a peerplan built with MPI"), std::string::npos) << out;
  EXPECT_EQ(out.find("llama-3.1-8b on"), std::string::npos) << "refused before the search: " << out;
}

TEST(PlanMpiCli, ValidateUnderALauncherWithoutMpiFlagIsRefusedExit2) {
  int rc = -1;
  std::string out = run("OMPI_COMM_WORLD_SIZE=2 " + std::string(PEERPLAN_BINARY) + kPlanArgs + " --validate 1", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("Add --mpi"), std::string::npos) << out;
  // A search alone touches no GPU: any launch may run it.
  out = run("OMPI_COMM_WORLD_SIZE=2 " + std::string(PEERPLAN_BINARY) + kPlanArgs + " --strategy single_gpu", &rc);
  EXPECT_EQ(rc, 0) << out;
}

TEST(PlanMpiCli, RankZerosChoiceMustFitTheLaunchBeforeAnyGpuIsTouched) {
  // Under mpirun -np 1, the top plan tp2[0,1] needs rank 1: rank 0 refuses after its search,
  // naming the plan and the -np to use (exit 2, no GPU needed).
  int rc = -1;
  const std::string mpirun = run("command -v mpirun", &rc);
  if (rc != 0 || !built_with_mpi()) GTEST_SKIP() << "needs mpirun and a peerplan built with MPI";
  std::string out = run("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 1 " +
                            std::string(PEERPLAN_BINARY) + kPlanArgs + " --strategy tensor_parallel --validate 1 --mpi",
                        &rc);
  if (out.find("built without CUDA") != std::string::npos) {  // MPI but no executor: refused earlier, also exit 2
    EXPECT_EQ(rc, 2) << out;
    return;
  }
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("ranked plan #1 (tp2[0,1])"), std::string::npos) << out;
  EXPECT_NE(out.find("start mpirun -np 2"), std::string::npos) << out;
  EXPECT_NE(out.find("llama-3.1-8b on"), std::string::npos) << "rank 0 searched first: " << out;
}
