#include "planner/validate/launch.hpp"

#include <cstdlib>
#include <string>

#include "planner/core/error.hpp"

namespace peerplan {

int launcher_size_from_env() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* s = std::getenv(v);
    if (s && *s) return std::atoi(s);
  }
  return 0;
}

void check_mpi_launch(bool mpi_flag, bool built_with_mpi, int launcher_size) {
  if (mpi_flag && !built_with_mpi)
    throw InputError("", "--mpi",
                     "a peerplan built with MPI: this one was built without it. Install libopenmpi-dev and rebuild "
                     "(cmake -DPEERPLAN_MPI=ON), or run without --mpi: one process then measures every GPU of the host");
  if (!mpi_flag && launcher_size > 1)
    throw InputError("", "--mpi",
                     "--mpi when started by an MPI launcher (" + std::to_string(launcher_size) +
                         " ranks): without it every rank would run the whole command on every GPU at once. Add --mpi "
                         "(one rank per GPU), or run a single process without mpirun");
}

void check_plan_validate_mpi(bool mpi_flag, int validate, bool built_with_mpi, int launcher_size) {
  if (mpi_flag && validate <= 0)
    throw InputError("", "--mpi",
                     "--validate K as well: --mpi runs the validation of the top K plans one process per GPU under "
                     "mpirun; the search alone is CPU work in one process (drop --mpi and mpirun)");
  if (!mpi_flag && validate <= 0) return;  // a search only: no GPU is touched, any launch will do
  check_mpi_launch(mpi_flag, built_with_mpi, launcher_size);
  if (mpi_flag && launcher_size <= 0)
    throw InputError("", "--mpi",
                     "a start by mpirun: mpirun -np N peerplan plan ... --validate K --mpi, with N the GPUs the "
                     "plans use (rank r owns GPU r; rank 0 searches and the others follow its choice). Without "
                     "mpirun, drop --mpi: one process then executes the plans on this host's GPUs");
}

}  // namespace peerplan
