// Issue 21, class 3: outputs that replace what they should not. An output path that is a symlink
// or a FIFO is still one afterwards; a file keeps its mode; the outputs of one command are written
// all or none; two outputs on one path are refused; SIGTERM leaves no temporary; a failed write
// to standard output is an error. Each case failed on 9259f41 (noted per test).
#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/hostile/cli_expect.hpp"

namespace peerplan::hostile {
namespace {

using namespace std::chrono_literals;

// A quick `plan` (one strategy, 20 requests) with extra output options.
std::vector<std::string> quick_plan(std::vector<std::string> outputs) {
  std::vector<std::string> a{"plan", "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink", "--strategy",
                             "single_gpu", "--requests", "20", "--no-p2p-compare"};
  a.insert(a.end(), outputs.begin(), outputs.end());
  return a;
}

mode_t mode_of(const std::string& p, bool follow = true) {
  struct stat st {};
  EXPECT_EQ(follow ? stat(p.c_str(), &st) : lstat(p.c_str(), &st), 0) << p;
  return st.st_mode;
}

std::vector<std::string> temporaries(const ScratchDir& d) {
  std::vector<std::string> t;
  for (const auto& n : d.listing())
    if (n.find(".tmp") != std::string::npos) t.push_back(n);
  return t;
}

TEST(CliOutputsHostile, ASymlinkOutputStaysASymlinkAndItsTargetIsReplaced) {
  // Was: the rename replaced the link with a regular file; the file it pointed to went stale.
  ScratchDir d;
  const std::string target = d.write("real/machine.json", "old\n");
  const std::string link = (d / "link.json").string();
  ASSERT_EQ(symlink("real/machine.json", link.c_str()), 0);  // relative, as `ln -s` makes them
  CliResult r = run_peerplan({"topo", "--machine", "h200x2-nvlink", "--format", "json", "--out", link});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(S_ISLNK(mode_of(link, false))) << "the symlink was replaced by a file";
  EXPECT_NE(read_file(target).find("\"gpus\""), std::string::npos) << "the link's target holds the new output";
  EXPECT_TRUE(temporaries(d).empty());
}

TEST(CliOutputsHostile, AFifoOutputIsWrittenInPlaceAndStaysAFifo) {
  // Was: a regular file renamed over the FIFO (a reader waiting on it got nothing).
  ScratchDir d;
  const std::string fifo = (d / "out.fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  int rd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // a reader, so the writer's open does not wait
  ASSERT_GE(rd, 0);
  CliResult r = run_peerplan({"topo", "--machine", "h200x2-nvlink", "--out", fifo});
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = read(rd, buf, sizeof buf)) > 0;) got.append(buf, size_t(n));
  close(rd);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo, false))) << "the FIFO was replaced by a file";
  EXPECT_NE(got.find("GPU"), std::string::npos) << "the reader got the topology table: " << got;
}

TEST(CliOutputsHostile, AnExistingFileKeepsItsMode) {
  // Was: every rewritten file came out 0644 (a 0600 file of results became world-readable).
  ScratchDir d;
  const std::string out = d.write("topo.json", "old\n");
  ASSERT_EQ(chmod(out.c_str(), 0600), 0);
  CliResult r = run_peerplan({"topo", "--machine", "h200x2-nvlink", "--format", "json", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(mode_of(out) & 0777, 0600u);
}

TEST(CliOutputsHostile, TwoOutputsOnOnePathAreRefusedBeforeTheSearch) {
  // Was: --csv silently overwrote what --json-out had written. Also by another spelling.
  ScratchDir d;
  PreviousOutput prev(d);
  const std::string other_spelling = (d / "out" / "." / "result.json").string();
  CliResult r = run_peerplan(quick_plan({"--json-out", prev.path(), "--csv", other_spelling}));
  expect_input_error(r, "", {"--csv", "--json-out", "same file"});
  prev.expect_untouched();
}

TEST(CliOutputsHostile, AllOutputsOrNone) {
  // Was: --json-out was written, then --trace failed on its missing directory: half the outputs
  // of the run existed. Now the trace path is refused before anything is written.
  ScratchDir d;
  PreviousOutput prev(d);
  CliResult r = run_peerplan(quick_plan({"--json-out", prev.path(), "--trace", (d / "no-such-dir" / "t.json").string()}));
  expect_input_error(r, "no-such-dir", {"--trace", "does not exist"});
  prev.expect_untouched();
}

TEST(CliOutputsHostile, SigtermDuringTheWriteLeavesNoTemporaryAndNoPartialSet) {
  // The outputs are staged as temporaries, then a FIFO with no reader blocks the commit: the
  // moment to send SIGTERM. Was: a temporary (60 MB seen) stayed behind; and here, on 9259f41,
  // --json-out was written and the FIFO replaced by a file.
  ScratchDir d;
  const std::string fifo = (d / "csv.fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string json_out = (d / "search.json").string();
  bool sent = false;
  RunOptions o;
  o.deadline = 120s;
  o.while_running = [&](int pid) {
    if (!sent && !temporaries(d).empty()) {
      kill(pid, SIGTERM);
      sent = true;
    }
  };
  CliResult r = run_peerplan(quick_plan({"--json-out", json_out, "--csv", fifo}), o);
  EXPECT_TRUE(sent) << "no temporary ever appeared: " << r.describe();
  EXPECT_EQ(r.signal, SIGTERM) << "it ends as killed by SIGTERM: " << r.describe();
  EXPECT_TRUE(temporaries(d).empty()) << "temporaries left: " << temporaries(d).size();
  EXPECT_FALSE(std::filesystem::exists(json_out)) << "a partial set of outputs was written";
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo, false)));
}

TEST(CliOutputsHostile, AFailedWriteToStandardOutputIsAnError) {
  // Was: `peerplan topo > /dev/full` exited 0 with nothing written.
  RunOptions o;
  o.stdout_path = "/dev/full";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"topo", "--machine", "h200x2-nvlink"}, {"model", "llama-3.1-8b", "--json"}}) {
    CliResult r = run_peerplan(args, o);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find("standard output"), std::string::npos) << r.describe();
  }
}

}  // namespace
}  // namespace peerplan::hostile
