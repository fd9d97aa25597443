#pragma once
// How a command that runs on GPUs may be started: alone, or by an MPI launcher with --mpi (one
// process per GPU). CPU only, no MPI: the launcher is recognised from its environment, and
// whether this build has MPI is passed in, so the rules are tested in every build.
namespace peerplan {

// The launcher's rank count from the environment (Open MPI, MPICH/PMI), without initialising MPI:
// 0 when not started by an MPI launcher. A plain `profile` started N times by mpirun would have
// every process measure every GPU at once; the commands refuse that.
int launcher_size_from_env();

// Before a command runs: --mpi needs an MPI build; an MPI launch needs --mpi. Throws InputError.
void check_mpi_launch(bool mpi_flag, bool built_with_mpi, int launcher_size);

// `peerplan plan --validate K --mpi`: --mpi only with --validate (the search is CPU work in one
// process; the validations run one process per GPU), only under mpirun (launcher_size > 0), and
// the launch rules above whenever plans are executed. Throws InputError naming the option.
void check_plan_validate_mpi(bool mpi_flag, int validate, bool built_with_mpi, int launcher_size);

}  // namespace peerplan
