#pragma once
// Text from input files (model, machine, plan and strategy names, notes, messages quoting a
// file) printed for people: control characters are shown escaped, never sent raw, so a name
// holding a terminal escape sequence cannot repaint, retitle or hide anything on the screen.
// One escaper, used by the table and report printers and by the filter main() installs on
// std::cout and std::cerr (which lets newline, tab and carriage return through).
#include <memory>
#include <streambuf>
#include <string>
#include <string_view>

namespace peerplan {

// Escapes C0 controls and DEL as \xNN, C1 controls (U+0080..U+009F) as \u00NN and bytes that are
// not valid UTF-8 as \xNN. `keep_layout`: newline, tab and carriage return pass (whole documents);
// otherwise they are escaped too (a single name or table cell).
std::string escape_control(std::string_view text, bool keep_layout = false);

// The same escaper over a stream of writes (a multi-byte character may arrive split in two).
class ControlEscaper {
 public:
  explicit ControlEscaper(bool keep_layout) : keep_layout_(keep_layout) {}
  // Appends the escaped form of `in` to `out`; an incomplete UTF-8 sequence at the end is held.
  void feed(std::string_view in, std::string& out);
  // True when feed(in) would append `in` itself (nothing held, nothing to escape).
  bool passes_unchanged(std::string_view in) const;
  // Flushes a held incomplete sequence (escaped: it never completed).
  void finish(std::string& out);

 private:
  void flush_pending_as_invalid(std::string& out);
  bool keep_layout_;
  unsigned char pending_[4] = {};
  int have_ = 0, need_ = 0;
};

// While alive, everything written to std::cout and std::cerr passes through escape_control with
// keep_layout (JSON output is unchanged: it never holds raw control bytes).
class EscapeStandardStreams {
 public:
  EscapeStandardStreams();
  ~EscapeStandardStreams();
  EscapeStandardStreams(const EscapeStandardStreams&) = delete;
  EscapeStandardStreams& operator=(const EscapeStandardStreams&) = delete;

 private:
  std::unique_ptr<std::streambuf> out_, err_;
  std::streambuf* old_out_ = nullptr;
  std::streambuf* old_err_ = nullptr;
};

}  // namespace peerplan
