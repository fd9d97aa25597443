#pragma once
// Every file peerplan reads or writes goes through here.
//
// Reading: the path must name a regular file (or a symlink to one) no larger than the cap for its
// kind; both are checked before a byte is read, so /dev/zero, a FIFO or a 200 MB "config.json"
// ends at once with an InputError naming the file, what it is (or its size) and the cap.
//
// Writing (docs/robustness.md, "outputs"): a regular file or a new path is replaced atomically (a
// temporary beside it, fsync, rename) and keeps its mode; a symlink is followed and its target
// replaced the same way beside the target; a FIFO or a character device (/dev/null, /dev/stdout)
// is written in place; anything else is refused with the reason. Temporaries are removed when
// SIGINT, SIGTERM or SIGHUP ends the process. OutputSet writes several outputs all or none.
#include <cstdint>
#include <istream>
#include <memory>
#include <string>
#include <vector>

namespace peerplan {

// What a file holds: its name in messages and the largest size accepted. The caps are far above
// any real file of the kind (the largest shipped profile is under 1 MiB, a model config a few KiB)
// and keep the memory of loading bounded (a JSON tree takes ~10-25x its text).
struct FileKind {
  const char* what;
  uint64_t max_bytes;
};

namespace file_kind {
inline constexpr uint64_t kMiB = uint64_t(1) << 20;
inline constexpr FileKind kAny{"input", 64 * kMiB};
inline constexpr FileKind kModelConfig{"model config", 16 * kMiB};
inline constexpr FileKind kMachine{"machine, profile or NCCL topology", 64 * kMiB};
inline constexpr FileKind kPlan{"plan", 16 * kMiB};
inline constexpr FileKind kWorkload{"workload", 16 * kMiB};
inline constexpr FileKind kStrategy{"strategy script", 16 * kMiB};
inline constexpr FileKind kMetrics{"metrics", 128 * kMiB};     // per-request timings of long runs
inline constexpr FileKind kTrace{"request trace", 4096 * kMiB};  // days of production traffic; CSV and JSON streamed
}  // namespace file_kind

// Throws InputError naming `path` unless it is a regular file within kind.max_bytes; returns its
// size. The reasons given: no such file, a dangling symlink, a symlink loop, permission denied,
// a directory, a FIFO, a character or block device, a socket, over the cap.
uint64_t check_input_file(const std::string& path, const FileKind& kind);

// check_input_file, then the whole file (never more than the cap, even if it grows meanwhile).
std::string read_input_file(const std::string& path, const FileKind& kind);
// read_input_file with file_kind::kAny.
std::string read_text_file(const std::string& path);

// check_input_file, then a stream over the file for readers that go line by line.
std::unique_ptr<std::istream> open_input_stream(const std::string& path, const FileKind& kind);

// True when something (a file, a directory, a FIFO, even a dangling symlink or a symlink loop) is
// at `path`. Name resolvers use it so that the reader, not "no such file", says what is wrong.
bool path_present(const std::string& path);

// Collects the outputs of one command and writes them all or none: commit() first writes every
// regular output to a temporary beside its target (a failure there removes them all and leaves
// every target untouched), then writes the in-place ones (FIFOs, devices), then renames. Two
// outputs on one file (also by another spelling or through a symlink) are refused.
class OutputSet {
 public:
  OutputSet();
  ~OutputSet();  // removes any temporary left by a failed commit
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  // Reserves `path` for `option` (e.g. "--csv"; used in messages): call it before the work so
  // that a clash is refused before minutes of computing. Throws InputError.
  void claim(const std::string& option, const std::string& path);
  // Stages `content` for `path` (claimed before or not).
  void add(const std::string& option, const std::string& path, std::string content);
  void commit();

  struct Entry;  // one output (defined in output_set.cpp)

 private:
  std::vector<std::unique_ptr<Entry>> entries_;
  void commit_staged();
  Entry& find_or_claim(const std::string& option, const std::string& path);
};

// One output written on its own (an OutputSet of one).
void write_file_atomic(const std::string& path, const std::string& content);

// Flushes standard output; false (and a message on stderr) when a write to it failed, e.g.
// `> /dev/full`. main() turns false into a non-zero exit.
bool flush_standard_output();

// Locates a shipped data file (models/..., plugins/...). Search order: the path as given; relative
// to $PEERPLAN_HOME; relative to the source tree the binary was built from.
std::string find_data_file(const std::string& relpath);

}  // namespace peerplan
