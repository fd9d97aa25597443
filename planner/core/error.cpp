#include "planner/core/error.hpp"

namespace peerplan {

static std::string compose(const std::string& file, const std::string& field, const std::string& expected) {
  std::string msg;
  if (!file.empty()) msg += file;
  if (!field.empty()) msg += (msg.empty() ? "" : ": ") + std::string("field '") + field + "'";
  if (!msg.empty()) msg += ": ";
  return msg + expected;
}

InputError::InputError(std::string file, std::string field, std::string expected)
    : std::runtime_error(compose(file, field, expected)),
      file_(std::move(file)), field_(std::move(field)), expected_(std::move(expected)) {}

}  // namespace peerplan
