#pragma once
// JsonIn: a read-only view of one JSON node that knows which file it came from and where in it
// it sits (a JSON pointer), so every validation failure can name the file and the field.
// Every loader in peerplan reads through this class instead of nlohmann's at()/get(), which
// would throw messages that name neither.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace peerplan {

using json = nlohmann::json;

struct FileKind;

// Reads and parses a JSON file. Throws InputError naming the file for: anything but a regular file
// within the kind's size cap (planner/core/files.hpp; checked before reading), empty file, syntax
// errors (with line/column), nesting deeper than max_depth.
json load_json_file(const std::string& path, int max_depth = 64);
json load_json_file(const std::string& path, const FileKind& kind, int max_depth = 64);
// Parses text that claims to come from `origin` (used by tests and by stdin input).
json parse_json_text(const std::string& text, const std::string& origin, int max_depth = 64);

class JsonIn {
 public:
  JsonIn(const json& node, std::string file, std::string pointer = "");

  const json& raw() const { return *node_; }
  const std::string& file() const { return file_; }
  const std::string& pointer() const { return pointer_; }  // e.g. "/gpus/3/memory_bytes"
  std::string field(const std::string& key) const;         // pointer of a child

  bool is_object() const { return node_->is_object(); }
  bool is_array() const { return node_->is_array(); }
  bool has(const std::string& key) const;  // present and not null

  // Child access. at() throws if missing; opt() returns nullopt if missing or null.
  JsonIn at(const std::string& key) const;
  std::optional<JsonIn> opt(const std::string& key) const;
  JsonIn object(const std::string& key) const;  // required, must be an object
  JsonIn array(const std::string& key) const;   // required, must be an array
  size_t size() const;                          // array length (throws if not an array)
  JsonIn operator[](size_t i) const;            // array element

  // Typed leaves (required). Each checks type; numbers must be finite.
  std::string str(const std::string& key) const;
  double num(const std::string& key) const;
  double positive(const std::string& key) const;     // > 0
  double nonnegative(const std::string& key) const;  // >= 0
  int64_t integer(const std::string& key) const;     // integral value
  int64_t positive_int(const std::string& key) const;
  int64_t nonnegative_int(const std::string& key) const;
  bool boolean(const std::string& key) const;

  // Typed leaves with defaults used when the key is absent or null (present-but-wrong still throws).
  std::string str_or(const std::string& key, const std::string& def) const;
  double num_or(const std::string& key, double def) const;
  double positive_or(const std::string& key, double def) const;
  double nonnegative_or(const std::string& key, double def) const;
  int64_t integer_or(const std::string& key, int64_t def) const;
  int64_t nonnegative_int_or(const std::string& key, int64_t def) const;
  bool boolean_or(const std::string& key, bool def) const;

  // The node itself as a leaf (for array elements).
  double as_num() const;
  int64_t as_integer() const;
  std::string as_str() const;

  // Throw an InputError naming this file and `field` (a key of this node, or "" for this node).
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;

 private:
  const json* node_;
  std::string file_;
  std::string pointer_;
};

}  // namespace peerplan
