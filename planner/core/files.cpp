#include "planner/core/files.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "planner/core/build_info.hpp"
#include "planner/core/error.hpp"

namespace peerplan {

namespace fs = std::filesystem;

void write_file_atomic(const std::string& path, const std::string& content) {
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmpXXXXXX")).string();
  int fd = mkstemp(tmpl.data());
  if (fd < 0) throw RuntimeError("cannot create a temporary file next to " + path + " (is the directory writable?)");
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n <= 0) {
      ::close(fd);
      ::unlink(tmpl.c_str());
      throw RuntimeError("write failed for " + path + " (disk full?); the previous file, if any, is untouched");
    }
    off += size_t(n);
  }
  ::fsync(fd);
  ::fchmod(fd, 0644);
  ::close(fd);
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    ::unlink(tmpl.c_str());
    throw RuntimeError("cannot rename the temporary file onto " + path);
  }
}

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path, "", "is a directory; expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file (does it exist and is it readable?)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string find_data_file(const std::string& relpath) {
  if (fs::exists(relpath)) return relpath;
  if (const char* home = std::getenv("PEERPLAN_HOME")) {
    fs::path p = fs::path(home) / relpath;
    if (fs::exists(p)) return p.string();
  }
  fs::path p = fs::path(build::source_dir) / relpath;
  if (fs::exists(p)) return p.string();
  return relpath;  // let the loader report it missing, naming the path the user gave
}

}  // namespace peerplan
