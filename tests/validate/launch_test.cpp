// The launch rules of the GPU commands (planner/validate/launch.hpp): --mpi needs an MPI build and
// a launcher, a launcher needs --mpi, `plan --mpi` needs --validate. Pure functions of the flags,
// the build and the launcher's rank count, so every build tests every case.
#include <gtest/gtest.h>

#include <cstdlib>

#include "planner/core/error.hpp"
#include "planner/validate/launch.hpp"

using namespace peerplan;

TEST(MpiLaunchCheck, FlagAndBuildAndLauncherMustAgree) {
  EXPECT_NO_THROW(check_mpi_launch(false, false, 0)) << "plain run";
  EXPECT_NO_THROW(check_mpi_launch(true, true, 2)) << "mpirun -np 2 ... --mpi";
  EXPECT_NO_THROW(check_mpi_launch(false, true, 1)) << "mpirun -np 1 without --mpi is one process";
  try {
    check_mpi_launch(true, false, 2);
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--mpi");
    EXPECT_NE(std::string(e.what()).find("libopenmpi-dev"), std::string::npos) << "says how to get an MPI build";
  }
  try {
    check_mpi_launch(false, true, 4);
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("4 ranks"), std::string::npos) << e.what();
  }
}

TEST(MpiLaunchCheck, PlanValidateMpiNeedsValidateAndMpirun) {
  auto refusal = [](bool mpi, int k, bool built, int launcher) -> std::string {
    try {
      check_plan_validate_mpi(mpi, k, built, launcher);
    } catch (const InputError& e) {
      return e.field() + ": " + e.expected();
    }
    return "";
  };
  EXPECT_EQ(refusal(false, 0, true, 0), "") << "a search";
  EXPECT_EQ(refusal(false, 0, false, 4), "") << "a search under mpirun touches no GPU";
  EXPECT_EQ(refusal(true, 2, true, 4), "") << "mpirun -np 4 ... --validate 2 --mpi";
  EXPECT_EQ(refusal(true, 1, true, 1), "") << "mpirun -np 1 is a launch";
  EXPECT_EQ(refusal(false, 1, true, 0), "") << "--validate in one process";
  EXPECT_NE(refusal(true, 0, true, 4).find("--validate K as well"), std::string::npos) << "--mpi alone";
  EXPECT_NE(refusal(true, 1, true, 0).find("a start by mpirun"), std::string::npos) << "not launched";
  EXPECT_NE(refusal(true, 1, false, 4).find("libopenmpi-dev"), std::string::npos) << "no MPI build";
  EXPECT_NE(refusal(false, 1, true, 2).find("Add --mpi"), std::string::npos) << "launched without --mpi";
}

TEST(MpiLaunchCheck, LauncherSizeIsReadFromOpenMpiOrPmiEnvironment) {
  // mpirun (Open MPI) sets OMPI_COMM_WORLD_SIZE, MPICH's hydra PMI_SIZE; neither: not launched (0).
  const char* saved = std::getenv("OMPI_COMM_WORLD_SIZE");
  const std::string keep = saved ? saved : "";
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMI_SIZE");
  EXPECT_EQ(launcher_size_from_env(), 0);
  setenv("PMI_SIZE", "3", 1);
  EXPECT_EQ(launcher_size_from_env(), 3);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_EQ(launcher_size_from_env(), 2) << "Open MPI's variable is read first";
  unsetenv("PMI_SIZE");
  if (saved) setenv("OMPI_COMM_WORLD_SIZE", keep.c_str(), 1);
  else unsetenv("OMPI_COMM_WORLD_SIZE");
}
