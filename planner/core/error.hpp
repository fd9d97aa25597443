#pragma once
// Typed errors. Library code throws; only the CLI turns them into exit codes:
//   InputError   -> exit 2 (bad usage or bad input: names the file, the field, what was expected)
//   RuntimeError -> exit 1 (the input was fine but the work failed)
#include <stdexcept>
#include <string>

namespace peerplan {

class InputError : public std::runtime_error {
 public:
  // file: path of the offending file ("" for command-line input); field: JSON pointer or option
  // name; expected: what a valid value looks like, phrased so the user knows how to fix it.
  InputError(std::string file, std::string field, std::string expected);
  const std::string& file() const { return file_; }
  const std::string& field() const { return field_; }
  const std::string& expected() const { return expected_; }

 private:
  std::string file_, field_, expected_;
};

class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace peerplan
