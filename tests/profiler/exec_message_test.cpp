// The executor under MPI, CPU side: the iteration message rank 0 broadcasts (a follower must run
// exactly the iteration rank 0 scheduled, or refuse a message it cannot read) and the plan-vs-
// ranks check (rank r owns GPU r).
#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "profiler/common/exec_message.hpp"

using namespace peerplan;
using namespace peerplan::exec;

TEST(ExecMessage, LaunchRoundTripKeepsEverySequenceInOrder) {
  // A mixed iteration: a prefill chunk then two decodes, on in-flight slot 1 of a pipeline.
  ExecMessage m{ExecCommand::Launch, 1, 0, 0, {{3, 512, 512, true}, {0, 1, 77, false}, {5, 1, 1025, false}}};
  const std::vector<int64_t> v = encode_message(m);
  EXPECT_EQ(v.size(), 6u + 4u * 3u) << "6 header words + 4 per sequence";
  const ExecMessage back = decode_message(v);
  EXPECT_EQ(back, m);
  EXPECT_TRUE(back.seqs[0].prefill);
  EXPECT_EQ(back.seqs[2].context, 1025);
}

TEST(ExecMessage, CommandsWithoutSequencesRoundTrip) {
  for (const ExecMessage& m : {ExecMessage{ExecCommand::WarmGemm, 0, 8192, 256, {}}, ExecMessage{ExecCommand::Stop, 0, 0, 0, {}},
                               ExecMessage{ExecCommand::TimeOps, 0, 0, 0, {{0, 1, 2, false}}}})
    EXPECT_EQ(decode_message(encode_message(m)), m);
}

TEST(ExecMessage, RefusesTruncatedForeignOrImpossibleMessages) {
  const std::vector<int64_t> good = encode_message({ExecCommand::Launch, 0, 0, 0, {{1, 1, 10, false}}});
  // Truncated: one word of the last sequence missing.
  std::vector<int64_t> cut(good.begin(), good.end() - 1);
  EXPECT_THROW(decode_message(cut), RuntimeError);
  // Foreign buffer (wrong magic).
  std::vector<int64_t> foreign = good;
  foreign[0] = 42;
  EXPECT_THROW(decode_message(foreign), RuntimeError);
  // Unknown command.
  std::vector<int64_t> cmd = good;
  cmd[1] = 99;
  EXPECT_THROW(decode_message(cmd), RuntimeError);
  // More new tokens than the context holds: no real sequence looks like that.
  std::vector<int64_t> seq = good;
  seq[7] = 11;  // new_tokens 11 > context 10
  EXPECT_THROW(decode_message(seq), RuntimeError);
  // A prefill flag that is neither 0 nor 1.
  std::vector<int64_t> flag = good;
  flag[9] = 2;
  EXPECT_THROW(decode_message(flag), RuntimeError);
  EXPECT_THROW(decode_message(nullptr, 0), RuntimeError);
  EXPECT_NO_THROW(decode_message(good));
}

TEST(ExecMessage, PlanMayUseOnlyTheLaunchedRanksGpus) {
  EXPECT_NO_THROW(check_plan_ranks({0, 1}, 2, "tp2.json"));
  EXPECT_NO_THROW(check_plan_ranks({0}, 2, "one.json")) << "an idle rank is allowed (it follows and does nothing)";
  try {
    check_plan_ranks({0, 1}, 1, "tp2.json");  // mpirun -np 1 with a TP2 plan
    FAIL() << "a plan on GPU 1 with one rank must be refused";
  } catch (const InputError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("tp2.json"), std::string::npos) << w;
    EXPECT_NE(w.find("GPU 1"), std::string::npos) << w;
    EXPECT_NE(w.find("mpirun -np 2"), std::string::npos) << "says how to launch: " << w;
  }
  // GPU 0 belongs to rank 0, which runs the scheduler and receives the completion messages.
  EXPECT_THROW(check_plan_ranks({1}, 2, "gpu1.json"), InputError);
  EXPECT_THROW(check_plan_ranks({0}, 0, "x.json"), InputError);
}
