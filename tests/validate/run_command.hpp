#pragma once
// Runs a shell command for the CLI tests of this module; returns stdout + stderr, exit code in *rc.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

inline std::string run(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf{};
  while (p && fgets(buf.data(), int(buf.size()), p)) out += buf.data();
  int status = p ? pclose(p) : -1;
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}
