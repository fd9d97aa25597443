#pragma once
// Checked MPI for peerplan's multi-process mode (`mpirun -np N peerplan profile --mpi`). MPI is the
// launcher and the bootstrap only: bulk data moves over NCCL, CUDA IPC and shared host memory.
// No MPI types in this header, so callers need no MPI include; every call is checked and a
// failure throws RuntimeError naming the call and MPI's error string.
#include <cstddef>
#include <exception>
#include <string>
#include <vector>

namespace peerplan::mpi {

// MPI_Init_thread .. MPI_Finalize for the process's lifetime. Construct once, in main's thread.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0, size_ = 1;
};

bool initialized();               // MPI_Init has run and MPI_Finalize has not
int world_rank();
int world_size();
std::string processor_name();     // MPI_Get_processor_name (the host name as MPI sees it)
// Rank on this host and ranks on this host (MPI_Comm_split_type SHARED): which GPU a rank takes.
int local_rank();
int local_size();

// Idle-friendly barrier: MPI_Ibarrier polled with short sleeps, so ranks waiting for a turn do not
// spin a CPU core while another rank measures launch overhead on the same host.
void barrier();

void bcast_bytes(void* data, size_t bytes, int root);
std::string bcast_string(std::string s, int root);  // the root's string on every rank
// Every rank's string, in rank order, on `root` (others get an empty vector).
std::vector<std::string> gather_strings(const std::string& mine, int root);
std::vector<std::string> allgather_strings(const std::string& mine);
void send_bytes(const void* data, size_t bytes, int dest, int tag);
void recv_bytes(void* data, size_t bytes, int source, int tag);
double allreduce_max(double v);
double allreduce_sum(double v);
// True on every rank if `mine` is true on any rank: lets ranks agree to stop together.
bool any(bool mine);

// A sub-communicator of the ranks that pass member = true (MPI_Comm_split; every rank of the world
// must construct it, in the same order). Non-members get an empty one (valid() false).
class SubComm {
 public:
  explicit SubComm(bool member);
  ~SubComm();
  SubComm(const SubComm&) = delete;
  SubComm& operator=(const SubComm&) = delete;
  bool valid() const { return comm_ != nullptr; }
  int rank() const;
  int size() const;
  void barrier();                                    // idle-friendly, as mpi::barrier
  void bcast_bytes(void* data, size_t bytes, int root);
  double allreduce_sum(double v);
  double allreduce_max(double v);

 private:
  void* comm_ = nullptr;  // MPI_Comm (an int or a pointer, by implementation) held on the heap
};

// Ends every rank (MPI_Abort): for an error on one rank while others wait in a collective call.
[[noreturn]] void abort_all(int code);

// A command's catch block under MPI: with other ranks, prints "peerplan <command>: rank r: <what>"
// and ends every rank (exit 2 for an InputError, else 1), since they may be waiting in a
// collective call for this one. With one rank it returns, so the caller rethrows as a single
// process would.
void abort_others_on_error(const Session& s, const std::string& command, const std::exception& e);


}  // namespace peerplan::mpi
