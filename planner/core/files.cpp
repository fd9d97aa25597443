// Reading input files: what the path names and how large it is are checked before reading.
#include "planner/core/files.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <streambuf>
#include <vector>

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "planner/core/build_info.hpp"
#include "planner/core/error.hpp"

namespace peerplan {

namespace fs = std::filesystem;

namespace {

std::string human_size(uint64_t bytes) {
  if (bytes >= (uint64_t(1) << 30)) return fmt::format("{:.1f} GiB", double(bytes) / double(uint64_t(1) << 30));
  if (bytes >= (uint64_t(1) << 20)) return fmt::format("{:.1f} MiB", double(bytes) / double(uint64_t(1) << 20));
  return fmt::format("{} bytes", bytes);
}

// "a model config", "an input": for messages.
std::string a(const FileKind& kind) {
  const char c = kind.what[0];
  const bool vowel = c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u';
  return std::string(vowel ? "an " : "a ") + kind.what;
}

// Why stat() failed, in words a user can act on.
[[noreturn]] void fail_stat(const std::string& path, int err, const FileKind& kind) {
  struct stat l {};
  switch (err) {
    case ENOENT:
      if (::lstat(path.c_str(), &l) == 0 && S_ISLNK(l.st_mode))
        throw InputError(path, "", "is a symlink to a file that does not exist (dangling link)");
      throw InputError(path, "", fmt::format("no such file; expected {} file", a(kind)));
    case ELOOP:
      throw InputError(path, "", "too many levels of symbolic links (a symlink loop?)");
    case EACCES:
      throw InputError(path, "", "permission denied (is the file or a directory on its path unreadable?)");
    case ENOTDIR:
      throw InputError(path, "", "a component of the path is not a directory");
    case ENAMETOOLONG:
      throw InputError(path, "", "file name too long");
    default:
      throw InputError(path, "", fmt::format("cannot read it: {}", std::strerror(err)));
  }
}

const char* non_regular_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// Checks the stat of an input file; returns its size.
uint64_t check_stat(const std::string& path, const struct stat& st, const FileKind& kind) {
  if (S_ISDIR(st.st_mode)) throw InputError(path, "", fmt::format("is a directory; expected {} file", a(kind)));
  if (!S_ISREG(st.st_mode))
    throw InputError(path, "", fmt::format("is {}; expected {} file, a regular file (peerplan checks a file's "
                                           "size before reading it, so it reads no pipes or devices)",
                                           non_regular_kind(st.st_mode), a(kind)));
  const uint64_t size = uint64_t(st.st_size);
  if (size > kind.max_bytes)
    throw InputError(path, "", fmt::format("is {} ({} bytes), over the {} cap for {} file", human_size(size), size,
                                           human_size(kind.max_bytes), a(kind)));
  return size;
}

// Opens a checked input: stat first (so a device with side effects on open is never opened), then
// open without blocking and re-check the opened file (the path may have changed in between).
int open_checked(const std::string& path, const FileKind& kind, uint64_t* size) {
  if (path.empty()) throw InputError("", "", fmt::format("an empty path was given for {} file", a(kind)));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail_stat(path, errno, kind);
  check_stat(path, st, kind);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) fail_stat(path, errno, kind);
  struct stat fst {};
  if (::fstat(fd, &fst) != 0 || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino) {
    ::close(fd);
    throw InputError(path, "", "changed while being opened; try again");
  }
  try {
    *size = check_stat(path, fst, kind);
  } catch (...) {
    ::close(fd);
    throw;
  }
  return fd;
}

// A read-only stream over a file descriptor it owns (a 64 KiB buffer: traces are read line by line).
class FdStreamBuf : public std::streambuf {
 public:
  FdStreamBuf(int fd, std::string path) : fd_(fd), path_(std::move(path)), buf_(64 * 1024) {}
  ~FdStreamBuf() override { ::close(fd_); }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    ssize_t n;
    do n = ::read(fd_, buf_.data(), buf_.size());
    while (n < 0 && errno == EINTR);
    if (n < 0) throw InputError(path_, "", fmt::format("read failed: {}", std::strerror(errno)));
    if (n == 0) return traits_type::eof();
    setg(buf_.data(), buf_.data(), buf_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  int fd_;
  std::string path_;
  std::vector<char> buf_;
};

class FdStream : public std::istream {
 public:
  FdStream(int fd, const std::string& path) : std::istream(nullptr), buf_(fd, path) {
    rdbuf(&buf_);
    exceptions(std::ios::badbit);  // a read error reaches the caller as the InputError above
  }

 private:
  FdStreamBuf buf_;
};

}  // namespace

uint64_t check_input_file(const std::string& path, const FileKind& kind) {
  uint64_t size = 0;
  ::close(open_checked(path, kind, &size));
  return size;
}

std::string read_input_file(const std::string& path, const FileKind& kind) {
  uint64_t size = 0;
  int fd = open_checked(path, kind, &size);
  std::string text;
  text.resize(size_t(size));
  size_t got = 0;
  char extra;
  for (;;) {
    // Read at most one byte past the size stat gave: a file that grows past it is refused.
    char* dst = got < text.size() ? text.data() + got : &extra;
    size_t want = got < text.size() ? text.size() - got : 1;
    ssize_t n = ::read(fd, dst, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw InputError(path, "", fmt::format("read failed: {}", std::strerror(e)));
    }
    if (n == 0) break;
    if (dst == &extra) {
      ::close(fd);
      throw InputError(path, "", fmt::format("grew while being read (past the {} bytes it had when opened)", size));
    }
    got += size_t(n);
  }
  ::close(fd);
  text.resize(got);  // shrank meanwhile: what is there
  return text;
}

std::string read_text_file(const std::string& path) { return read_input_file(path, file_kind::kAny); }

std::unique_ptr<std::istream> open_input_stream(const std::string& path, const FileKind& kind) {
  uint64_t size = 0;
  int fd = open_checked(path, kind, &size);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return std::make_unique<FdStream>(fd, path);
}

bool path_present(const std::string& path) {
  struct stat l {};
  return !path.empty() && ::lstat(path.c_str(), &l) == 0;
}

bool flush_standard_output() {
  std::cout.flush();
  const bool ok = std::cout.good() && std::fflush(stdout) == 0 && !std::ferror(stdout);
  if (!ok) {
    const int e = errno;
    std::cerr << "peerplan: failed: cannot write standard output (" << (e ? std::strerror(e) : "write error")
              << "); the output is incomplete\n";
  }
  return ok;
}

std::string find_data_file(const std::string& relpath) {
  if (path_present(relpath)) return relpath;
  if (const char* home = std::getenv("PEERPLAN_HOME")) {
    fs::path p = fs::path(home) / relpath;
    if (path_present(p.string())) return p.string();
  }
  fs::path p = fs::path(build::source_dir) / relpath;
  if (path_present(p.string())) return p.string();
  return relpath;  // let the loader report it missing, naming the path the user gave
}

}  // namespace peerplan
