// GoogleTest main for tests that run under mpirun: MPI is initialised once around all tests, and
// every rank exits non-zero if a test failed on any rank (so ctest sees a failure on rank 1 too).
#include <gtest/gtest.h>

#include "profiler/mpi/comm.hpp"

int main(int argc, char** argv) {
  peerplan::mpi::Session session;
  ::testing::InitGoogleTest(&argc, argv);
  if (session.rank() != 0) {
    // One rank prints the progress; failures still print on the rank that has them.
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  bool failed = peerplan::mpi::any(rc != 0);
  return failed ? 1 : 0;
}
