#pragma once
// What counts as a finding, shared by every fuzz target and by the replay test (tests/hostile).
// A loader may reject input only with peerplan::InputError, and that error must name the file it
// was given. Anything else is a finding: another exception, a crash, a sanitizer report, a hang,
// or a broken invariant (FUZZ_CHECK throws Finding, which libFuzzer sees as an uncaught exception).
#include <stdexcept>
#include <string>
#include <string_view>

#include "planner/core/error.hpp"

namespace peerplan::fuzz {

struct Finding : std::logic_error {
  using std::logic_error::logic_error;
};

#define FUZZ_CHECK(cond, detail)                                                                  \
  do {                                                                                            \
    if (!(cond))                                                                                  \
      throw ::peerplan::fuzz::Finding(std::string(__FILE__) + ":" + std::to_string(__LINE__) +   \
                                      ": invariant '" #cond "' broken: " + std::string(detail)); \
  } while (0)

// Runs `body`. A clean rejection (InputError naming `origin`, with a non-empty explanation) is
// accepted and reported as false; acceptance returns true. Everything else propagates.
// `qualified`: the error may name a part of the file, "<origin>: <part>" (the strategy runner
// names a returned plan as "<script>: plan #2 (name)").
template <class F>
bool accepts(const std::string& origin, F&& body, bool qualified = false) {
  try {
    body();
    return true;
  } catch (const InputError& e) {
    const bool names_origin = e.file() == origin || (qualified && e.file().rfind(origin + ": ", 0) == 0);
    FUZZ_CHECK(names_origin, "the error must name the file '" + origin + "', got: " + e.what());
    FUZZ_CHECK(!e.expected().empty(), "the error must say what was expected, got: " + std::string(e.what()));
    return false;
  }
}

// One fuzz target: a name (the binary is fuzz_<name>), the function libFuzzer and the replay test
// call with one input, and where its seed inputs come from among the shipped files.
struct ShippedFiles {
  const char* dir;         // relative to the source tree
  const char* suffix;      // file name ending, e.g. "config.json", ".lua"
  bool recursive = true;   // false: only files directly in `dir`
};

}  // namespace peerplan::fuzz
