#include "planner/core/text.hpp"

#include <cstdint>
#include <cstring>
#include <iostream>
#include <mutex>

#include <fmt/format.h>

namespace peerplan {

namespace {

bool is_layout(unsigned char c) { return c == '\n' || c == '\t' || c == '\r'; }

void hex(unsigned char c, std::string& out) { out += fmt::format("\\x{:02x}", c); }

// Printable ASCII (and, with keep_layout, newline/tab/CR): passes the escaper unchanged.
bool is_plain(unsigned char c, bool keep_layout) { return (c >= 0x20 && c < 0x7F) || (keep_layout && is_layout(c)); }

// End of the run of plain bytes starting at `i`. Eight bytes at a time while none of them is a
// control byte or >= 0x7F (the bit tests of "Bit Twiddling Hacks": hasless / hasmore), so the
// ~400 MB of `topo --format json` on 1024 GPUs pass the standard-stream filter quickly.
size_t plain_run(std::string_view in, size_t i, bool keep_layout) {
  constexpr uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  while (i < in.size()) {
    if (i + 8 <= in.size()) {
      uint64_t x;
      std::memcpy(&x, in.data() + i, 8);
      bool low = ((x - ones * 0x20) & ~x & highs) != 0;  // some byte < 0x20
      bool high = (((x + ones) | x) & highs) != 0;        // some byte >= 0x7F
      if (!low && !high) {
        i += 8;
        continue;
      }
    }
    if (!is_plain(static_cast<unsigned char>(in[i]), keep_layout)) break;
    ++i;  // a plain byte in a word that is not all plain (a newline): then words again
  }
  return i;
}

// Length of a UTF-8 sequence from its lead byte; 0 for a byte that cannot start one.
int sequence_length(unsigned char c) {
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

// Forwards writes to `dest` through a ControlEscaper.
class EscapingBuf : public std::streambuf {
 public:
  explicit EscapingBuf(std::streambuf* dest) : dest_(dest), esc_(true) {}
  ~EscapingBuf() override {
    std::string out;
    esc_.finish(out);
    if (!out.empty()) dest_->sputn(out.data(), std::streamsize(out.size()));
    dest_->pubsync();
  }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    char ch = traits_type::to_char_type(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::mutex> lock(mu_);  // search threads may warn at the same time
    // The common case (all of `topo --format json`'s 400 MB): nothing to escape, no copy.
    if (esc_.passes_unchanged(std::string_view(s, size_t(n)))) return dest_->sputn(s, n);
    buf_.clear();
    esc_.feed(std::string_view(s, size_t(n)), buf_);
    if (buf_.empty()) return n;
    return dest_->sputn(buf_.data(), std::streamsize(buf_.size())) == std::streamsize(buf_.size()) ? n : 0;
  }
  int sync() override { return dest_->pubsync(); }

 private:
  std::streambuf* dest_;
  ControlEscaper esc_;
  std::string buf_;
  std::mutex mu_;
};

}  // namespace

void ControlEscaper::flush_pending_as_invalid(std::string& out) {
  for (int i = 0; i < have_; ++i) hex(pending_[i], out);
  have_ = need_ = 0;
}

bool ControlEscaper::passes_unchanged(std::string_view in) const {
  return need_ == 0 && plain_run(in, 0, keep_layout_) == in.size();
}

void ControlEscaper::feed(std::string_view in, std::string& out) {
  out.reserve(out.size() + in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (need_ == 0) {  // copy a run of plain bytes at once
      size_t j = plain_run(in, i, keep_layout_);
      out.append(in.data() + i, j - i);
      if ((i = j) == in.size()) break;
    }
    const auto c = static_cast<unsigned char>(in[i]);
    if (need_ > 0) {
      if (c >= 0x80 && c <= 0xBF) {
        pending_[have_++] = c;
        if (have_ < need_) continue;
        if (pending_[0] == 0xC2 && pending_[1] <= 0x9F) out += fmt::format("\\u{:04x}", pending_[1]);  // C1 control
        else out.append(reinterpret_cast<const char*>(pending_), size_t(have_));
        have_ = need_ = 0;
        continue;
      }
      flush_pending_as_invalid(out);  // then look at this byte afresh
    }
    if (c < 0x80) {
      if ((c < 0x20 && !(keep_layout_ && is_layout(c))) || c == 0x7F) hex(c, out);
      else out += char(c);
    } else if (int len = sequence_length(c)) {
      pending_[0] = c;
      have_ = 1;
      need_ = len;
    } else {
      hex(c, out);
    }
  }
}

void ControlEscaper::finish(std::string& out) { flush_pending_as_invalid(out); }

std::string escape_control(std::string_view text, bool keep_layout) {
  // The common case, plain printable ASCII, is returned as is.
  bool plain = true;
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x7F || (c < 0x20 && !(keep_layout && is_layout(c)))) {
      plain = false;
      break;
    }
  }
  if (plain) return std::string(text);
  ControlEscaper e(keep_layout);
  std::string out;
  e.feed(text, out);
  e.finish(out);
  return out;
}

EscapeStandardStreams::EscapeStandardStreams() {
  std::cout.flush();
  std::cerr.flush();
  old_out_ = std::cout.rdbuf();
  old_err_ = std::cerr.rdbuf();
  out_ = std::make_unique<EscapingBuf>(old_out_);
  err_ = std::make_unique<EscapingBuf>(old_err_);
  std::cout.rdbuf(out_.get());
  std::cerr.rdbuf(err_.get());
}

EscapeStandardStreams::~EscapeStandardStreams() {
  std::cout.flush();
  std::cerr.flush();
  std::cout.rdbuf(old_out_);
  std::cerr.rdbuf(old_err_);
}

}  // namespace peerplan
