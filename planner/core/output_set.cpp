// Writing outputs: atomic replacement of regular files only, symlinks followed, FIFOs and devices
// written in place, all outputs of a command or none, temporaries removed on SIGINT/SIGTERM/SIGHUP.
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>

#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"

namespace peerplan {

namespace fs = std::filesystem;

namespace {

// ---- temporaries removed by a signal ----------------------------------------------------------
// Fixed slots, so the handler touches no allocator or lock (async-signal-safe: only unlink()).
constexpr int kTempSlots = 64;
enum SlotState : int { kFree = 0, kWriting = 1, kReady = 2 };
struct TempSlot {
  std::atomic<int> state{kFree};  // the handler unlinks only a complete name (kReady)
  char path[PATH_MAX];
};
TempSlot g_temps[kTempSlots];

std::atomic<pid_t> g_owner{0};  // a forked child (a strategy's sandbox) inherits the slots, not the files

extern "C" void remove_temporaries_and_die(int sig) {
  if (::getpid() == g_owner.load())
    for (TempSlot& t : g_temps)
      if (t.state.load() == kReady) ::unlink(t.path);
  ::signal(sig, SIG_DFL);  // then die of the same signal, so the parent sees what happened
  ::raise(sig);
}

void install_signal_cleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;  // ignored (nohup) or taken
      struct sigaction sa {};
      sa.sa_handler = remove_temporaries_and_die;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

// Registers a temporary path for removal on a signal; -1 when all slots are taken (then only the
// normal paths remove it).
int register_temp(const std::string& path) {
  install_signal_cleanup();
  g_owner.store(::getpid());
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = kFree;
    if (!g_temps[i].state.compare_exchange_strong(expected, kWriting)) continue;
    std::memcpy(g_temps[i].path, path.c_str(), path.size() + 1);
    g_temps[i].state.store(kReady);  // before the file exists, so it is never unregistered while present
    return i;
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot >= 0) g_temps[slot].state.store(kFree);
}

// ---- what a target path is ---------------------------------------------------------------------

enum class Method { Replace, InPlace };

struct Target {
  std::string dest;   // where the bytes go (the symlink's final target for a symlink)
  Method method = Method::Replace;
  bool exists = false;
  struct stat st {};
};

// Follows symlinks one at a time (a dangling link's target is created, as `echo > link` does).
Target resolve_target(const std::string& option, const std::string& path) {
  auto who = [&] { return option.empty() ? std::string("output") : option; };
  if (path.empty()) throw InputError("", option, "an output path (an empty one was given)");
  std::string cur = path;
  for (int hops = 0;; ++hops) {
    struct stat l {};
    if (::lstat(cur.c_str(), &l) != 0) {
      if (errno != ENOENT)
        throw InputError(path, option, fmt::format("cannot write the {} here: {}", who(), std::strerror(errno)));
      // A new file: its directory must exist and be writable, checked now rather than after the work.
      fs::path dir = fs::path(cur).has_parent_path() ? fs::path(cur).parent_path() : fs::path(".");
      struct stat d {};
      if (::stat(dir.c_str(), &d) != 0 || !S_ISDIR(d.st_mode))
        throw InputError(path, option, fmt::format("cannot write the {}: directory {} does not exist", who(), dir.string()));
      if (::access(dir.c_str(), W_OK) != 0)
        throw InputError(path, option, fmt::format("cannot write the {}: directory {} is not writable", who(), dir.string()));
      return Target{cur, Method::Replace, false, {}};
    }
    if (S_ISLNK(l.st_mode)) {
      // A link to a FIFO or a device (also /dev/stdout -> /proc/self/fd/1 -> "pipe:[...]", which
      // readlink cannot follow) is written in place through the link.
      struct stat st {};
      if (::stat(cur.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)))
        return Target{cur, Method::InPlace, true, st};
      if (hops >= 40) throw InputError(path, option, "too many levels of symbolic links (a symlink loop?)");
      std::string link(size_t(l.st_size > 0 ? l.st_size : PATH_MAX) + 1, '\0');
      ssize_t n = ::readlink(cur.c_str(), link.data(), link.size());
      if (n < 0 || size_t(n) >= link.size())
        throw InputError(path, option, "a symlink that cannot be read (or changed while being read)");
      link.resize(size_t(n));
      fs::path next(link);
      cur = next.is_absolute() ? link : (fs::path(cur).parent_path() / next).string();
      continue;
    }
    Target t{cur, Method::Replace, true, l};
    if (S_ISREG(l.st_mode)) return t;
    if (S_ISFIFO(l.st_mode) || S_ISCHR(l.st_mode)) {
      t.method = Method::InPlace;  // replacing it would destroy the pipe or the device node
      return t;
    }
    const char* what = S_ISDIR(l.st_mode)    ? "is a directory; expected a file path"
                       : S_ISSOCK(l.st_mode) ? "is a socket; peerplan writes files, FIFOs and character devices only"
                       : S_ISBLK(l.st_mode)  ? "is a block device; peerplan will not write over a disk"
                                             : "is not a file peerplan can write";
    throw InputError(path == cur ? path : path + " -> " + cur, option, what);
  }
}

// Identity of a target for the "two outputs on one file" check.
std::string identity(const Target& t) {
  if (t.exists) return fmt::format("inode {}:{}", t.st.st_dev, t.st.st_ino);
  std::error_code ec;
  fs::path p = fs::absolute(t.dest, ec);
  fs::path dir = fs::weakly_canonical(p.parent_path(), ec);
  return (dir / p.filename()).lexically_normal().string();
}

void write_all(int fd, const std::string& content, const std::string& what) {
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw RuntimeError(fmt::format("write failed for {}: {}", what, n < 0 ? std::strerror(errno) : "no progress"));
    off += size_t(n);
  }
}

mode_t new_file_mode() {
  static const mode_t mode = [] {
    mode_t u = ::umask(022);
    ::umask(u);
    return mode_t(0666 & ~u);
  }();
  return mode;
}

}  // namespace

struct OutputSet::Entry {
  std::string option, path;
  Target target;
  std::string id;
  std::string content;
  bool staged = false;
  std::string temp;
  int slot = -1;

  void remove_temp() {
    if (!temp.empty()) ::unlink(temp.c_str());
    unregister_temp(slot);
    temp.clear();
    slot = -1;
  }
};

namespace {

// A new temporary beside the target, registered for removal on a signal before it exists.
int create_temp_beside(OutputSet::Entry& e) {
  static std::atomic<unsigned> counter{0};
  fs::path dest(e.target.dest);
  fs::path dir = dest.has_parent_path() ? dest.parent_path() : fs::path(".");
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = (dir / fmt::format(".{}.tmp{}-{}", dest.filename().string(), ::getpid(), counter++)).string();
    int slot = register_temp(name);
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      e.temp = name;
      e.slot = slot;
      return fd;
    }
    const int err = errno;
    unregister_temp(slot);
    if (err != EEXIST)
      throw RuntimeError(fmt::format("cannot create a temporary file next to {} ({}); no output was replaced",
                                     e.target.dest, std::strerror(err)));
  }
  throw RuntimeError("cannot find a free temporary file name next to " + e.target.dest);
}

}  // namespace

OutputSet::OutputSet() = default;

OutputSet::~OutputSet() {
  for (auto& e : entries_) e->remove_temp();
}

OutputSet::Entry& OutputSet::find_or_claim(const std::string& option, const std::string& path) {
  Target t = resolve_target(option, path);
  std::string id = identity(t);
  for (auto& e : entries_) {
    if (e->id != id) continue;
    if (e->path == path && e->option == option) {
      e->target = std::move(t);  // as it is now (its mode may have changed since the claim)
      return *e;
    }
    throw InputError(path, option,
                     fmt::format("the same file as {} ({}); give each output its own path",
                                 e->option.empty() ? "another output" : e->option, e->path));
  }
  auto e = std::make_unique<Entry>();
  e->option = option;
  e->path = path;
  e->target = std::move(t);
  e->id = std::move(id);
  entries_.push_back(std::move(e));
  return *entries_.back();
}

void OutputSet::claim(const std::string& option, const std::string& path) { find_or_claim(option, path); }

void OutputSet::add(const std::string& option, const std::string& path, std::string content) {
  Entry& e = find_or_claim(option, path);
  e.content = std::move(content);
  e.staged = true;
}

void OutputSet::commit() {
  try {
    commit_staged();
  } catch (...) {
    for (auto& e : entries_) e->remove_temp();  // nothing half-done stays beside the targets
    throw;
  }
}

void OutputSet::commit_staged() {
  // 1. Every replaced output to a temporary beside its target; any failure leaves all targets as they were.
  for (auto& ep : entries_) {
    Entry& e = *ep;
    if (!e.staged || e.target.method != Method::Replace) continue;
    int fd = create_temp_beside(e);
    try {
      write_all(fd, e.content, e.target.dest);
      if (::fsync(fd) != 0) throw RuntimeError(fmt::format("fsync failed for {}: {}", e.target.dest, std::strerror(errno)));
    } catch (const RuntimeError& err) {
      ::close(fd);
      throw RuntimeError(std::string(err.what()) + " (disk full?); no output was replaced");
    }
    if (e.target.exists) {
      // Keep the file's mode, and its owner when allowed (root writing a user's file).
      if (::fchown(fd, e.target.st.st_uid, e.target.st.st_gid) != 0) { /* not ours to give away: keep ours */ }
      ::fchmod(fd, e.target.st.st_mode & 07777);
    } else {
      ::fchmod(fd, new_file_mode());
    }
    ::close(fd);
  }
  // 2. FIFOs and devices, in place (they cannot be staged; a reader of a FIFO may be waiting).
  for (auto& ep : entries_) {
    Entry& e = *ep;
    if (!e.staged || e.target.method != Method::InPlace) continue;
    int fd = ::open(e.target.dest.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) throw RuntimeError(fmt::format("cannot open {} for writing: {}", e.target.dest, std::strerror(errno)));
    try {
      write_all(fd, e.content, e.target.dest);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }
  // 3. Renames: each atomic; they can fail only if the directory changed under us.
  for (auto& ep : entries_) {
    Entry& e = *ep;
    if (e.temp.empty()) continue;
    if (std::rename(e.temp.c_str(), e.target.dest.c_str()) != 0)
      throw RuntimeError(fmt::format("cannot rename the temporary file onto {}: {}", e.target.dest, std::strerror(errno)));
    unregister_temp(e.slot);
    e.slot = -1;
    e.temp.clear();
  }
  for (auto& e : entries_) e->staged = false;
}

void write_file_atomic(const std::string& path, const std::string& content) {
  OutputSet s;
  s.add("", path, content);
  s.commit();
}

}  // namespace peerplan
