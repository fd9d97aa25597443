#include "profiler/common/exec_message.hpp"

#include <algorithm>

#include "planner/core/error.hpp"

namespace peerplan::exec {

namespace {
constexpr int64_t kMagic = 0x70706c6e65786563;  // "pplnexec": a buffer from something else is refused
constexpr size_t kHeader = 6, kPerSeq = 4;
}  // namespace

std::vector<int64_t> encode_message(const ExecMessage& m) {
  std::vector<int64_t> v{kMagic, int64_t(m.cmd), m.slot, m.a, m.b, int64_t(m.seqs.size())};
  v.reserve(kHeader + kPerSeq * m.seqs.size());
  for (const SeqRun& s : m.seqs) {
    v.push_back(s.slot);
    v.push_back(s.new_tokens);
    v.push_back(s.context);
    v.push_back(s.prefill ? 1 : 0);
  }
  return v;
}

ExecMessage decode_message(const int64_t* d, size_t n) {
  auto bad = [](const std::string& why) { return RuntimeError("executor message from rank 0: " + why); };
  if (n < kHeader) throw bad("truncated (" + std::to_string(n) + " words, header has " + std::to_string(kHeader) + ")");
  if (d[0] != kMagic) throw bad("not an executor message (wrong magic)");
  ExecMessage m;
  if (d[1] < int64_t(ExecCommand::Launch) || d[1] > int64_t(ExecCommand::Stop))
    throw bad("unknown command " + std::to_string(d[1]));
  m.cmd = ExecCommand(d[1]);
  m.slot = d[2];
  m.a = d[3];
  m.b = d[4];
  if (m.slot < 0) throw bad("negative in-flight slot " + std::to_string(m.slot));
  const int64_t count = d[5];
  if (count < 0 || size_t(count) != (n - kHeader) / kPerSeq || (n - kHeader) % kPerSeq != 0)
    throw bad(std::to_string(count) + " sequences announced, " + std::to_string(n - kHeader) + " words follow");
  for (int64_t i = 0; i < count; ++i) {
    const int64_t* q = d + kHeader + size_t(i) * kPerSeq;
    const auto fits = [](int64_t x) { return x >= 0 && x <= int64_t(INT32_MAX); };
    if (!fits(q[0]) || !fits(q[1]) || !fits(q[2]) || q[1] > q[2] || (q[3] != 0 && q[3] != 1))
      throw bad("sequence " + std::to_string(i) + " has slot " + std::to_string(q[0]) + ", " + std::to_string(q[1]) +
                " new tokens, context " + std::to_string(q[2]) + ", prefill flag " + std::to_string(q[3]));
    m.seqs.push_back(SeqRun{int(q[0]), int(q[1]), int(q[2]), q[3] == 1});
  }
  return m;
}

void check_plan_ranks(const std::vector<int>& plan_gpus, int ranks, const std::string& plan_origin) {
  if (ranks < 1) throw InputError(plan_origin, "--mpi", "at least one MPI rank");
  for (int g : plan_gpus)
    if (g < 0 || g >= ranks)
      throw InputError(plan_origin, "stages",
                       "GPUs 0.." + std::to_string(ranks - 1) + " only: under --mpi rank r owns GPU r and " +
                           std::to_string(ranks) + " rank(s) were started, but the plan uses GPU " + std::to_string(g) +
                           " (start mpirun -np " + std::to_string(*std::max_element(plan_gpus.begin(), plan_gpus.end()) + 1) +
                           ", one rank per GPU)");
  if (std::find(plan_gpus.begin(), plan_gpus.end(), 0) == plan_gpus.end())
    throw InputError(plan_origin, "stages",
                     "a plan that uses GPU 0 under --mpi: rank 0 runs the scheduler and learns on its GPU when an "
                     "iteration has finished");
}

}  // namespace peerplan::exec
