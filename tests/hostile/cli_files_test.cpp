// Issue 21, classes 2 and 7: what an input path names. Every reader checks that the path is a
// regular file within its kind's size cap before reading a byte (planner/core/files.hpp), so
// /dev/zero, a FIFO, a symlink loop or a 200 MB "config.json" ends at once with exit 2 and a
// message naming the file and what it is. Each case failed on 9259f41 (noted per test).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include "tests/hostile/cli_expect.hpp"

namespace peerplan::hostile {
namespace {

using namespace std::chrono_literals;

const std::string kPlan = std::string(PEERPLAN_SOURCE_DIR) + "/docs/validation/plans/llama8b-tp2.json";

// One command per input role, with `path` in that role.
std::vector<std::vector<std::string>> every_input_role(const ScratchDir& d, const std::string& path) {
  nlohmann::json trace_workload = nlohmann::json::parse(R"({
    "arrival": {"process": "trace", "file": "@"},
    "prompt_tokens": {"dist": "fixed", "value": 100}, "output_tokens": {"dist": "fixed", "value": 10}})");
  trace_workload["arrival"]["file"] = path;
  const std::string tw = d.write("trace-workload.json", trace_workload.dump());
  return {
      {"model", path},
      {"plans", "--model", path, "--machine", "h200x2-nvlink", "--strategy", "single_gpu"},
      {"topo", "--machine", path},
      {"plans", "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink", "--strategy", "single_gpu", "--workload", path},
      {"plans", "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink", "--strategy", "single_gpu", "--workload", tw},
      {"plans", "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink", "--strategy", path},
      {"simulate", "--plan", path, "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink"},
      {"validate", "--compare", path, path},
  };
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& a : v) s += a + " ";
  return s;
}

// Peak RSS of `peerplan --version`: what the binary costs before it reads anything. A CUDA build
// maps cuBLAS(Lt) and NCCL at start-up (~220 MiB RSS on Debian 12 with CUDA 13; ~5 MiB without
// CUDA), so the 100 MiB budget below is for what reading the input adds on top of that.
long startup_rss_kib() {
  static const long kib = run_peerplan({"--version"}).max_rss_kib;
  return kib;
}

TEST(CliFilesHostile, DevZeroAsAnyInputIsRefusedAtOnceInLittleMemory) {
  // Was: every reader read the path whole: /dev/zero as a trace, machine or plan grew to 3-8.5 GB
  // before anything failed (as a model it was "no such file"). Required: refused without reading
  // and in little memory. "Without reading" is shown by the run ending at all (reading /dev/zero
  // never ends) and by the memory bound; a wall-clock bound would be a timed test, and a loaded
  // 2-core CI machine took 2.2 s to start a CUDA-linked binary once.
  ScratchDir d;
  for (const auto& args : every_input_role(d, "/dev/zero")) {
    RunOptions o;
    o.deadline = 60s;
    CliResult r = run_peerplan(args, o);
    SCOPED_TRACE(joined(args));
    EXPECT_FALSE(r.timed_out) << r.describe();
    expect_input_error(r, "/dev/zero", {"character device"});
    EXPECT_LT(r.max_rss_kib, startup_rss_kib() + 100 * 1024) << r.describe();
  }
}

TEST(CliFilesHostile, AFifoIsCalledAFifoAndNeverOpenedForReading) {
  // Was: "no such file" for a model or workload, and a hang for a machine (open() of a FIFO
  // without a writer blocks). Now: "a FIFO (named pipe)", exit 2, at once.
  ScratchDir d;
  const std::string fifo = (d / "input.fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& args : every_input_role(d, fifo)) {
    RunOptions o;
    o.deadline = 10s;
    CliResult r = run_peerplan(args, o);
    SCOPED_TRACE(joined(args));
    expect_input_error(r, fifo, {"FIFO"});
  }
}

TEST(CliFilesHostile, ASymlinkLoopIsBadInputNotAnInternalError) {
  // Was: exit 1 "internal error" (std::filesystem threw on ELOOP) for a machine; others said
  // "no such file". Now: exit 2 naming the path and the loop.
  ScratchDir d;
  const std::string loop = (d / "loop.json").string();
  ASSERT_EQ(symlink(loop.c_str(), loop.c_str()), 0);
  for (const auto& args : every_input_role(d, loop)) {
    CliResult r = run_peerplan(args);
    SCOPED_TRACE(joined(args));
    expect_input_error(r, loop, {"symbolic links"});
  }
}

TEST(CliFilesHostile, AFileOverItsKindsCapIsRefusedBeforeReading) {
  // A 200 MB config.json took 5.1 GB on 9259f41. A sparse file costs no disk; the reader must
  // refuse it by its size (16 MiB cap for a model config) without reading it.
  ScratchDir d;
  const std::string big = d.write("config.json", "{\"hidden_size\": 4096");
  ASSERT_EQ(truncate(big.c_str(), 200LL << 20), 0);
  RunOptions o;
  o.deadline = 20s;
  CliResult r = run_peerplan({"model", big}, o);
  EXPECT_FALSE(r.timed_out) << r.describe();
  expect_input_error(r, big, {"200.0 MiB", "16.0 MiB cap", "model config"});
  EXPECT_LT(r.max_rss_kib, startup_rss_kib() + 100 * 1024) << r.describe();
}

TEST(CliFilesHostile, ACsvTraceLineLongerThan64KiBIsRefused) {
  // CSV traces are streamed line by line (hundreds of MB are real): one endless line must not be
  // read whole. Was: accepted into memory whole, then "expected N values".
  ScratchDir d;
  std::string csv = "timestamp_s,prompt_tokens,output_tokens\n" + std::string(100000, '1') + ",1,1\n";
  const std::string trace = d.write("trace.csv", csv);
  nlohmann::json w = nlohmann::json::parse(R"({"arrival": {"process": "trace", "file": "trace.csv"}})");
  const std::string wf = d.write("w.json", w.dump());
  CliResult r = run_peerplan({"plans", "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink", "--strategy",
                              "single_gpu", "--workload", wf});
  expect_input_error(r, trace, {"line 2", "longer than 65536 bytes"});
}

TEST(CliFilesHostile, AJsonTraceOverTheOld64MiBCapIsStreamedInLittleMemory) {
  // JSON traces were parsed as a tree under a 64 MiB cap (CSV was streamed): this ~93 MiB JSON
  // trace was refused, and a tree of one within the cap took ~20x its size. Now both are streamed under
  // the 4 GiB trace cap: memory follows the columns kept (24 B per request), not the text.
  ScratchDir d;
  std::string text = "{\"source\": \"a JSON trace with a note per request\", \"requests\": [\n";
  const std::string pad(240, 'x');
  const int rows = 300000;
  text.reserve(size_t(rows) * 310);
  for (int i = 0; i < rows; ++i)
    text += std::string(i ? ",\n" : "") + "{\"timestamp_s\": " + std::to_string(i * 0.01) +
            ", \"prompt_tokens\": " + std::to_string(100 + i % 900) + ", \"output_tokens\": 20, \"note\": \"" + pad + "\"}";
  text += "]}\n";
  ASSERT_GT(text.size(), size_t(72) << 20);
  d.write("trace.json", text);
  text.clear();
  text.shrink_to_fit();
  const std::string wf = d.write("w.json", R"({"arrival": {"process": "trace", "file": "trace.json"}})");
  RunOptions o;
  o.deadline = 120s;
  CliResult r = run_peerplan({"plans", "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink", "--strategy",
                              "single_gpu", "--workload", wf, "--json"},
                             o);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(nlohmann::json::parse(r.out)["memory_options"]["context"], 999 + 20) << "the longest prompt + output";
  EXPECT_LT(r.max_rss_kib, startup_rss_kib() + 64 * 1024) << "~93 MiB of JSON, 300 000 requests: " << r.describe();
}

TEST(CliFilesHostile, CsvTraceAsSpreadsheetsWriteItIsRead) {
  // Excel and LibreOffice write a UTF-8 byte-order mark, quote the header cells and end lines
  // with CRLF. Was: "the header row must name a timestamp_s column".
  ScratchDir d;
  d.write("trace.csv",
          "\xEF\xBB\xBF\"timestamp_s\",\"prompt_tokens\",\"output_tokens\"\r\n"
          "0.0,\"512\",64\r\n0.5,1024,\"128\"\r\n1.25,256,32\r\n");
  nlohmann::json w = nlohmann::json::parse(R"({"arrival": {"process": "trace", "file": "trace.csv"}})");
  const std::string wf = d.write("w.json", w.dump());
  CliResult r = run_peerplan({"simulate", "--plan", kPlan, "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink",
                              "--workload", wf, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto m = nlohmann::json::parse(r.out);
  EXPECT_EQ(m.value("requests", 0), 3) << "three rows, three requests";
  EXPECT_EQ(m.value("prompt_tokens", 0), 512 + 1024 + 256) << "lengths replayed from the quoted cells";
}

TEST(CliFilesHostile, ControlCharactersFromInputFilesArePrintedEscaped) {
  // A name holding a terminal escape sequence (here: clear screen, retitle the window) was
  // printed raw by `model`, `topo` and in error messages. Now: shown as \x1b..., never sent.
  ScratchDir d;
  // A model is named by its directory: one holding clear-screen and retitle-window sequences.
  const std::string model = d.write("evil\x1b[2J\x1b]0;pwned\x07/config.json",
                                    shipped_json("models/llm/llama-3.1-8b/config.json").dump());
  nlohmann::json machine = shipped_json("models/hardware/h200x2-nvlink.json");
  machine["name"] = "evil\x1b[2Jmachine";
  const std::string mf = d.write("machine.json", machine.dump());
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"model", model}, {"topo", "--machine", mf},
        {"plans", "--model", model, "--machine", mf, "--strategy", "single_gpu"},
        {"plans", "--model", "llama-3.1-8b", "--machine", "h200x2-nvlink", "--strategy", "no\x1b[2Jsuch"}}) {
    CliResult r = run_peerplan(args);
    SCOPED_TRACE(joined(args));
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "raw ESC on stdout: " << r.describe();
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << "raw ESC on stderr: " << r.describe();
    EXPECT_NE((r.out + r.err).find("\\x1b[2J"), std::string::npos) << "the escape is shown, escaped: " << r.describe();
  }
}

}  // namespace
}  // namespace peerplan::hostile
