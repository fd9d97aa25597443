#include "profiler/mpi/comm.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "planner/core/error.hpp"

namespace peerplan::mpi {

namespace {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw RuntimeError(std::string("MPI call failed: ") + call + ": " + std::string(msg, size_t(len)));
}
#define MPI_CHECK(call) check((call), #call)

MPI_Comm g_local = MPI_COMM_NULL;

int to_count(size_t bytes) {
  if (bytes > size_t(INT32_MAX)) throw RuntimeError("MPI message of " + std::to_string(bytes) + " bytes is too large");
  return int(bytes);
}

}  // namespace

Session::Session() {
  int provided = 0;
  MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
  // Errors come back as return codes (checked above) instead of aborting inside MPI.
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &g_local));
}

Session::~Session() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin) return;
  if (g_local != MPI_COMM_NULL) MPI_Comm_free(&g_local);
  MPI_Finalize();
}

bool initialized() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

int world_rank() { int r = 0; MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &r)); return r; }
int world_size() { int n = 0; MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n)); return n; }

std::string processor_name() {
  char buf[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_CHECK(MPI_Get_processor_name(buf, &len));
  return std::string(buf, size_t(len));
}

int local_rank() { int r = 0; MPI_CHECK(MPI_Comm_rank(g_local, &r)); return r; }
int local_size() { int n = 0; MPI_CHECK(MPI_Comm_size(g_local, &n)); return n; }

void barrier_on(MPI_Comm comm) {
  MPI_Request req;
  MPI_CHECK(MPI_Ibarrier(comm, &req));
  int done = 0;
  auto sleep = std::chrono::microseconds(20);
  for (;;) {
    MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(sleep);
    if (sleep < std::chrono::microseconds(1000)) sleep *= 2;  // short waits stay short
  }
}

void barrier() { barrier_on(MPI_COMM_WORLD); }

namespace {
MPI_Comm& as_comm(void* p) { return *static_cast<MPI_Comm*>(p); }
}  // namespace

SubComm::SubComm(bool member) {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, world_rank(), &c));
  if (c != MPI_COMM_NULL) {
    MPI_CHECK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    comm_ = new MPI_Comm(c);
  }
}

SubComm::~SubComm() {
  if (!comm_) return;
  if (initialized()) MPI_Comm_free(&as_comm(comm_));
  delete static_cast<MPI_Comm*>(comm_);
}

int SubComm::rank() const { int r = 0; MPI_CHECK(MPI_Comm_rank(as_comm(comm_), &r)); return r; }
int SubComm::size() const { int n = 0; MPI_CHECK(MPI_Comm_size(as_comm(comm_), &n)); return n; }
void SubComm::barrier() { barrier_on(as_comm(comm_)); }
void SubComm::bcast_bytes(void* data, size_t bytes, int root) {
  MPI_CHECK(MPI_Bcast(data, to_count(bytes), MPI_BYTE, root, as_comm(comm_)));
}
double SubComm::allreduce_sum(double v) {
  double out = 0;
  MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, as_comm(comm_)));
  return out;
}
double SubComm::allreduce_max(double v) {
  double out = 0;
  MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, as_comm(comm_)));
  return out;
}

void bcast_bytes(void* data, size_t bytes, int root) {
  MPI_CHECK(MPI_Bcast(data, to_count(bytes), MPI_BYTE, root, MPI_COMM_WORLD));
}

std::string bcast_string(std::string s, int root) {
  unsigned long long n = s.size();
  MPI_CHECK(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD));
  s.resize(size_t(n));
  if (n) bcast_bytes(s.data(), size_t(n), root);
  return s;
}

std::vector<std::string> gather_strings(const std::string& mine, int root) {
  int n = world_size(), me = world_rank();
  int len = to_count(mine.size());
  std::vector<int> lens(size_t(me == root ? n : 0)), displs;
  MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, MPI_COMM_WORLD));
  std::string all;
  if (me == root) {
    size_t total = 0;
    for (int l : lens) { displs.push_back(to_count(total)); total += size_t(l); }
    all.resize(total);
  }
  MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_BYTE, all.data(), lens.data(), displs.data(), MPI_BYTE, root,
                        MPI_COMM_WORLD));
  std::vector<std::string> out;
  if (me == root)
    for (int r = 0; r < n; ++r) out.push_back(all.substr(size_t(displs[size_t(r)]), size_t(lens[size_t(r)])));
  return out;
}

std::vector<std::string> allgather_strings(const std::string& mine) {
  int n = world_size();
  int len = to_count(mine.size());
  std::vector<int> lens(static_cast<size_t>(n)), displs;
  MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD));
  size_t total = 0;
  for (int l : lens) { displs.push_back(to_count(total)); total += size_t(l); }
  std::string all(total, '\0');
  MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_BYTE, all.data(), lens.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.push_back(all.substr(size_t(displs[size_t(r)]), size_t(lens[size_t(r)])));
  return out;
}

void send_bytes(const void* data, size_t bytes, int dest, int tag) {
  MPI_CHECK(MPI_Send(data, to_count(bytes), MPI_BYTE, dest, tag, MPI_COMM_WORLD));
}

void recv_bytes(void* data, size_t bytes, int source, int tag) {
  MPI_Status st;
  MPI_CHECK(MPI_Recv(data, to_count(bytes), MPI_BYTE, source, tag, MPI_COMM_WORLD, &st));
  int got = 0;
  MPI_CHECK(MPI_Get_count(&st, MPI_BYTE, &got));
  if (size_t(got) != bytes)
    throw RuntimeError("MPI message from rank " + std::to_string(source) + " has " + std::to_string(got) +
                       " bytes, expected " + std::to_string(bytes));
}

double allreduce_max(double v) {
  double out = 0;
  MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

double allreduce_sum(double v) {
  double out = 0;
  MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  return out;
}

bool any(bool mine) {
  int v = mine ? 1 : 0, out = 0;
  MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  return out != 0;
}

void abort_all(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

void abort_others_on_error(const Session& s, const std::string& command, const std::exception& e) {
  if (s.size() <= 1) return;
  std::cerr << "peerplan " << command << ": rank " << s.rank() << ": " << e.what() << "\n" << std::flush;
  abort_all(dynamic_cast<const InputError*>(&e) ? 2 : 1);
}

}  // namespace peerplan::mpi
