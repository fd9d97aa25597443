#include "planner/core/json_in.hpp"

#include <algorithm>
#include <cmath>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"

namespace peerplan {

namespace {

// A parsed value takes 16 bytes and an object or array a container besides: text packed with
// tiny values (`[0,0,0,...]`, `[{},{},...]`) takes 20-40x its size as a tree. Real files hold a
// value or key per 6 bytes or more (the shipped ones; a measured point {"bytes": 4096, "us": 12.5}
// about 7), so more than one per 4 bytes, past a floor no real small file reaches, is refused.
constexpr size_t kValueFloor = 1'000'000;

// A first pass over the text with nlohmann's SAX interface: depth and value count, no tree. (The
// parser's DOM callback, used for this before, rescans the parent container after every object:
// quadratic on an array of objects, 20 minutes for 5 M `{}`.) Syntax errors are left to the parse.
class Precheck : public nlohmann::json_sax<json> {
 public:
  Precheck(int max_depth, size_t max_values) : max_depth_(max_depth), max_values_(max_values) {}
  bool too_deep = false, too_many = false;

  bool null() override { return leaf(); }
  bool boolean(bool) override { return leaf(); }
  bool number_integer(number_integer_t) override { return leaf(); }
  bool number_unsigned(number_unsigned_t) override { return leaf(); }
  bool number_float(number_float_t, const string_t&) override { return leaf(); }
  bool string(string_t&) override { return leaf(); }
  bool binary(binary_t&) override { return leaf(); }
  bool key(string_t&) override { return leaf(); }
  bool start_object(std::size_t) override { return open(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  // Depth as the DOM callback counted it: the containers open around the value.
  bool leaf() {
    if (open_ > max_depth_) too_deep = true;
    else if (++values_ > max_values_) too_many = true;
    return !too_deep && !too_many;
  }
  bool open() {
    const bool ok = leaf();
    ++open_;
    return ok;
  }
  bool close() {
    --open_;
    return true;
  }
  int max_depth_;
  size_t max_values_;
  int open_ = 0;
  size_t values_ = 0;
};

json parse_with_depth(const std::string& text, const std::string& origin, int max_depth) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw InputError(origin, "", "file is empty; expected a JSON document");
  const size_t max_values = std::max(kValueFloor, text.size() / 4);
  Precheck pre(max_depth, max_values);
  (void)json::sax_parse(text, &pre, json::input_format_t::json, /*strict=*/true, /*ignore_comments=*/false);
  const bool too_deep = pre.too_deep;
  if (too_deep) throw InputError(origin, "", "JSON nested deeper than " + std::to_string(max_depth) + " levels");
  if (pre.too_many)
    throw InputError(origin, "", "JSON with more than " + std::to_string(max_values) + " values in " +
                                     std::to_string(text.size()) + " bytes (more than one per 4 bytes): refused, as "
                                     "its tree would take tens of times the file's size in memory");
  try {
    return json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::parse_error& e) {
    if (too_deep)
      throw InputError(origin, "", "JSON nested deeper than " + std::to_string(max_depth) + " levels");
    // Turn the byte offset into line:column, which is what editors show.
    size_t line = 1, col = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    std::string what = e.what();
    auto pos = what.find("syntax error");
    std::string detail = pos == std::string::npos ? what : what.substr(pos);
    throw InputError(origin, "", "malformed JSON at line " + std::to_string(line) + ", column " +
                                     std::to_string(col) + " (" + detail + ")");
  } catch (const json::exception& e) {
    // e.g. out_of_range.406: a number literal like 1e999 that overflows a double.
    std::string what = e.what();
    auto pos = what.find("] ");
    throw InputError(origin, "", "invalid JSON value (" + (pos == std::string::npos ? what : what.substr(pos + 2)) +
                                     "); numbers must be finite and within double range");
  }
}

std::string type_name(const json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array";
  return "an object";
}

}  // namespace

json load_json_file(const std::string& path, int max_depth) { return load_json_file(path, file_kind::kAny, max_depth); }

json load_json_file(const std::string& path, const FileKind& kind, int max_depth) {
  return parse_with_depth(read_input_file(path, kind), path, max_depth);
}

json parse_json_text(const std::string& text, const std::string& origin, int max_depth) {
  return parse_with_depth(text, origin, max_depth);
}

JsonIn::JsonIn(const json& node, std::string file, std::string pointer)
    : node_(&node), file_(std::move(file)), pointer_(std::move(pointer)) {}

std::string JsonIn::field(const std::string& key) const {
  std::string p = pointer_.empty() ? "" : pointer_.substr(1) + "/";
  return p + key;
}

void JsonIn::fail(const std::string& key, const std::string& expected) const {
  std::string f = key.empty() ? (pointer_.empty() ? "" : pointer_.substr(1)) : field(key);
  throw InputError(file_, f, expected);
}

bool JsonIn::has(const std::string& key) const {
  return node_->is_object() && node_->contains(key) && !(*node_)[key].is_null();
}

JsonIn JsonIn::at(const std::string& key) const {
  if (!node_->is_object()) fail("", "expected an object, found " + type_name(*node_));
  auto it = node_->find(key);
  if (it == node_->end() || it->is_null()) fail(key, "required field is missing");
  return JsonIn(*it, file_, pointer_ + "/" + key);
}

std::optional<JsonIn> JsonIn::opt(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return at(key);
}

JsonIn JsonIn::object(const std::string& key) const {
  JsonIn c = at(key);
  if (!c.is_object()) fail(key, "expected an object, found " + type_name(c.raw()));
  return c;
}

JsonIn JsonIn::array(const std::string& key) const {
  JsonIn c = at(key);
  if (!c.is_array()) fail(key, "expected an array, found " + type_name(c.raw()));
  return c;
}

size_t JsonIn::size() const {
  if (!node_->is_array()) fail("", "expected an array, found " + type_name(*node_));
  return node_->size();
}

JsonIn JsonIn::operator[](size_t i) const {
  if (!node_->is_array() || i >= node_->size()) fail("", "index " + std::to_string(i) + " out of range");
  return JsonIn((*node_)[i], file_, pointer_ + "/" + std::to_string(i));
}

double JsonIn::as_num() const {
  if (!node_->is_number()) fail("", "expected a number, found " + type_name(*node_));
  double v = node_->get<double>();
  if (!std::isfinite(v)) fail("", "expected a finite number");
  return v;
}

int64_t JsonIn::as_integer() const {
  if (node_->is_number_integer()) {
    if (node_->is_number_unsigned() && node_->get<uint64_t>() > uint64_t(INT64_MAX))
      fail("", "integer too large");
    return node_->get<int64_t>();
  }
  double v = as_num();
  if (v != std::floor(v) || std::fabs(v) > 9.0e18) fail("", "expected an integer, found " + node_->dump());
  return static_cast<int64_t>(v);
}

std::string JsonIn::as_str() const {
  if (!node_->is_string()) fail("", "expected a string, found " + type_name(*node_));
  return node_->get<std::string>();
}

std::string JsonIn::str(const std::string& key) const { return at(key).as_str(); }
double JsonIn::num(const std::string& key) const { return at(key).as_num(); }

double JsonIn::positive(const std::string& key) const {
  double v = num(key);
  if (!(v > 0)) fail(key, "expected a positive number, found " + (*node_)[key].dump());
  return v;
}
double JsonIn::nonnegative(const std::string& key) const {
  double v = num(key);
  if (v < 0) fail(key, "expected a number >= 0, found " + (*node_)[key].dump());
  return v;
}
int64_t JsonIn::integer(const std::string& key) const { return at(key).as_integer(); }
int64_t JsonIn::positive_int(const std::string& key) const {
  int64_t v = integer(key);
  if (v <= 0) fail(key, "expected a positive integer, found " + std::to_string(v));
  return v;
}
int64_t JsonIn::nonnegative_int(const std::string& key) const {
  int64_t v = integer(key);
  if (v < 0) fail(key, "expected an integer >= 0, found " + std::to_string(v));
  return v;
}
bool JsonIn::boolean(const std::string& key) const {
  JsonIn c = at(key);
  if (!c.raw().is_boolean()) fail(key, "expected true or false, found " + type_name(c.raw()));
  return c.raw().get<bool>();
}

std::string JsonIn::str_or(const std::string& key, const std::string& def) const { return has(key) ? str(key) : def; }
double JsonIn::num_or(const std::string& key, double def) const { return has(key) ? num(key) : def; }
double JsonIn::positive_or(const std::string& key, double def) const { return has(key) ? positive(key) : def; }
double JsonIn::nonnegative_or(const std::string& key, double def) const { return has(key) ? nonnegative(key) : def; }
int64_t JsonIn::integer_or(const std::string& key, int64_t def) const { return has(key) ? integer(key) : def; }
int64_t JsonIn::nonnegative_int_or(const std::string& key, int64_t def) const {
  return has(key) ? nonnegative_int(key) : def;
}
bool JsonIn::boolean_or(const std::string& key, bool def) const { return has(key) ? boolean(key) : def; }

}  // namespace peerplan
