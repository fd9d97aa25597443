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
