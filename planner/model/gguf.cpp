// GGUF header reader (format: ggml/docs/gguf.md; types and block sizes: ggml/src/ggml.c type_traits,
// ggml/include/gguf.h). Hostile input is the norm for a file format: every count, length and
// offset is checked against the bytes left before it is used, so a 20-byte file claiming 2^60
// tensors fails at once instead of allocating, and every error names the file, the field and
// the byte offset.
#include "planner/model/gguf.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"

namespace peerplan {

namespace {

constexpr uint32_t kMaxDims = 4;                  // GGML_MAX_DIMS
constexpr uint64_t kMaxName = 64;                 // GGML_MAX_NAME (including the terminating zero)
constexpr uint64_t kMaxKey = 65535;               // gguf.md: keys are at most 2^16-1 bytes
constexpr uint64_t kMaxString = uint64_t(64) << 20;  // chat templates are KiB; a 64 MiB string is not metadata

// Reads little-endian values from a stream of known size, each read checked against the bytes left.
class Cursor {
 public:
  Cursor(std::istream& in, uint64_t size, const std::string& origin) : in_(in), size_(size), origin_(origin) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& field, const std::string& expected, uint64_t at) const {
    throw InputError(origin_, field, fmt::format("{} (at byte offset {})", expected, at));
  }
  void need(uint64_t n, const std::string& field) const {
    if (n > left())
      fail(field, fmt::format("{} more bytes, but the file has only {} left (truncated, or a corrupt size)", n, left()),
           pos_);
  }
  template <typename T>
  T num(const std::string& field) {
    need(sizeof(T), field);
    std::array<char, sizeof(T)> b{};
    read_raw(b.data(), sizeof(T), field);
    T v;
    std::memcpy(&v, b.data(), sizeof(T));  // GGUF is little-endian, as every host peerplan runs on
    return v;
  }
  std::string str(const std::string& field, uint64_t max) {
    const uint64_t at = pos_;
    uint64_t n = num<uint64_t>(field + " length");
    if (n > max) fail(field, fmt::format("a string of at most {} bytes, got a length of {}", max, n), at);
    need(n, field);
    std::string s(size_t(n), '\0');
    read_raw(s.data(), n, field);
    return s;
  }
  void skip(uint64_t n, const std::string& field) {
    need(n, field);
    in_.seekg(std::streamoff(n), std::ios::cur);
    if (!in_) fail(field, "a readable file (seek failed)", pos_);
    pos_ += n;
  }

 private:
  void read_raw(char* p, uint64_t n, const std::string& field) {
    in_.read(p, std::streamsize(n));
    if (uint64_t(in_.gcount()) != n) fail(field, fmt::format("{} bytes (the read ended early)", n), pos_);
    pos_ += n;
  }
  std::istream& in_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& origin_;
};

uint64_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::Bool: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
    default: return 0;  // string (8-byte length + bytes), array
  }
}

const char* value_type_name(GgufValueType t) {
  static const char* const names[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32", "float32",
                                      "bool",  "string", "array",  "uint64", "int64",  "float64"};
  return uint32_t(t) < 13 ? names[uint32_t(t)] : "unknown";
}

GgufValueType value_type(Cursor& c, const std::string& field) {
  const uint64_t at = c.pos();
  uint32_t t = c.num<uint32_t>(field);
  if (t > uint32_t(GgufValueType::F64))
    c.fail(field, fmt::format("a GGUF value type 0..12 (uint8 .. float64), got {}", t), at);
  return GgufValueType(t);
}

nlohmann::json scalar(Cursor& c, GgufValueType t, const std::string& field) {
  switch (t) {
    case GgufValueType::U8: return c.num<uint8_t>(field);
    case GgufValueType::I8: return c.num<int8_t>(field);
    case GgufValueType::U16: return c.num<uint16_t>(field);
    case GgufValueType::I16: return c.num<int16_t>(field);
    case GgufValueType::U32: return c.num<uint32_t>(field);
    case GgufValueType::I32: return c.num<int32_t>(field);
    case GgufValueType::U64: return c.num<uint64_t>(field);
    case GgufValueType::I64: return c.num<int64_t>(field);
    case GgufValueType::F32: return double(c.num<float>(field));
    case GgufValueType::F64: return c.num<double>(field);
    case GgufValueType::Bool: {
      const uint64_t at = c.pos();
      uint8_t b = c.num<uint8_t>(field);
      if (b > 1) c.fail(field, fmt::format("a bool (0 or 1), got {}", b), at);
      return b == 1;
    }
    case GgufValueType::String: {
      // JSON strings must be UTF-8; metadata that is not (GGUF requires UTF-8) is kept as hex-free bytes.
      std::string s = c.str(field, kMaxString);
      return nlohmann::json(s);
    }
    default: break;
  }
  c.fail(field, std::string("a scalar value, got type ") + value_type_name(t), c.pos());
}

void read_value(Cursor& c, GgufKV& kv, const std::string& field) {
  if (kv.type != GgufValueType::Array) {
    kv.value = scalar(c, kv.type, field);
    return;
  }
  kv.array_type = value_type(c, field + " element type");
  if (kv.array_type == GgufValueType::Array) c.fail(field, "an array of scalars or strings (nested arrays are not GGUF metadata)", c.pos() - 4);
  const uint64_t at = c.pos();
  kv.array_count = c.num<uint64_t>(field + " count");
  const uint64_t min_elem = kv.array_type == GgufValueType::String ? 8 : scalar_size(kv.array_type);
  if (kv.array_count > c.left() / min_elem)
    c.fail(field, fmt::format("an array that fits in the file ({} bytes left), got {} elements of {} bytes or more",
                              c.left(), kv.array_count, min_elem),
           at);
  const bool keep = kv.array_count <= kGgufKeptArray;
  kv.value = nlohmann::json::array();
  if (!keep && kv.array_type != GgufValueType::String) {
    c.skip(kv.array_count * min_elem, field);
    return;
  }
  for (uint64_t i = 0; i < kv.array_count; ++i) {
    if (keep) {
      kv.value.push_back(scalar(c, kv.array_type, field));
    } else {  // a long string array (vocabulary, merges): each length checked, the bytes skipped
      const uint64_t sat = c.pos();
      uint64_t n = c.num<uint64_t>(field);
      if (n > kMaxString) c.fail(fmt::format("{}/{}", field, i), fmt::format("a string of at most {} bytes, got {}", kMaxString, n), sat);
      c.skip(n, fmt::format("{}/{}", field, i));
    }
  }
}

// Bytes of a tensor of `elements` elements of ggml type `t` whose rows hold `ne0` elements.
uint64_t tensor_bytes(Cursor& c, const GgufTensor& t, const std::string& field, uint64_t at) {
  GgmlTypeInfo info = ggml_type_info(t.ggml_type);
  if (info.block_elems == 0)
    c.fail(field + " type", fmt::format("a known ggml tensor type (F32, F16, BF16, Q8_0, Q4_K, ...), got {}", t.ggml_type), at);
  if (t.dims[0] % info.block_elems != 0)
    c.fail(field + " dims/0", fmt::format("a multiple of {}'s block of {} elements, got {}", info.name, info.block_elems, t.dims[0]), at);
  const uint64_t blocks = t.elements / info.block_elems;
  if (blocks > UINT64_MAX / info.block_bytes) c.fail(field, "a tensor size that fits in 64 bits", at);
  return blocks * info.block_bytes;
}

void read_tensor_info(Cursor& c, GgufFile& f, uint64_t i, std::set<std::string>& names) {
  const uint64_t at = c.pos();
  const std::string field = fmt::format("tensor {}", i);
  GgufTensor t;
  t.name = c.str(field + " name", kMaxName - 1);
  const std::string tf = fmt::format("tensor {} '{}'", i, t.name);
  if (!names.insert(t.name).second) c.fail(tf + " name", "tensor names used once, this one is a duplicate", at);
  const uint64_t dat = c.pos();
  uint32_t nd = c.num<uint32_t>(tf + " n_dims");
  if (nd < 1 || nd > kMaxDims) c.fail(tf + " n_dims", fmt::format("1..{} dimensions, got {}", kMaxDims, nd), dat);
  t.elements = 1;
  for (uint32_t d = 0; d < nd; ++d) {
    const uint64_t eat = c.pos();
    uint64_t n = c.num<uint64_t>(fmt::format("{} dims/{}", tf, d));
    if (n == 0 || n > uint64_t(INT64_MAX)) c.fail(fmt::format("{} dims/{}", tf, d), fmt::format("a size >= 1, got {}", n), eat);
    if (t.elements > uint64_t(INT64_MAX) / n) c.fail(tf + " dims", "an element count that fits in 63 bits", eat);
    t.elements *= n;
    t.dims.push_back(n);
  }
  const uint64_t tat = c.pos();
  t.ggml_type = c.num<uint32_t>(tf + " type");
  t.bytes = tensor_bytes(c, t, tf, tat);
  const uint64_t oat = c.pos();
  t.offset = c.num<uint64_t>(tf + " offset");
  if (t.offset % f.alignment != 0)
    c.fail(tf + " offset", fmt::format("a multiple of the alignment {}, got {}", f.alignment, t.offset), oat);
  f.tensors.push_back(std::move(t));
}

// Tensor data must lie inside the data section without overlapping (ggml's reader also requires
// it); the data section must lie inside the file unless a header-only file is accepted.
void check_tensor_data(const Cursor& c, GgufFile& f, const GgufReadOptions& opt) {
  std::vector<const GgufTensor*> order;
  for (const auto& t : f.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  uint64_t end = 0;
  const GgufTensor* prev = nullptr;
  for (const GgufTensor* t : order) {
    if (prev && t->offset < end)
      c.fail("tensor '" + t->name + "' offset",
             fmt::format("data that does not overlap '{}' (which ends at {}), got offset {}", prev->name, end, t->offset),
             f.data_offset);
    if (t->bytes > UINT64_MAX - f.data_offset || t->offset > UINT64_MAX - f.data_offset - t->bytes)
      c.fail("tensor '" + t->name + "' offset", "an offset within 64 bits", f.data_offset);
    end = t->offset + t->bytes;
    prev = t;
  }
  if (f.tensors.empty()) return;  // a vocabulary-only file: no data section to check
  if (f.data_offset > f.file_size || end > f.file_size - f.data_offset) {
    if (!opt.allow_missing_data)
      c.fail(prev ? "tensor '" + prev->name + "'" : "data",
             fmt::format("tensor data up to byte {} of the file, but the file has {} bytes (truncated download?)",
                         f.data_offset + end, f.file_size),
             f.data_offset);
    f.data_present = false;
  }
}

}  // namespace

const GgufKV* GgufFile::find(const std::string& key) const {
  for (const auto& x : kv)
    if (x.key == key) return &x;
  return nullptr;
}

GgmlTypeInfo ggml_type_info(uint32_t type) {
  // ggml.c type_traits: {name, blck_size, type_size}. Removed ids (4, 5, 31-33, 36-38) stay unknown.
  static const GgmlTypeInfo kTypes[] = {
      {"F32", 1, 4},        {"F16", 1, 2},       {"Q4_0", 32, 18},    {"Q4_1", 32, 20},    {nullptr, 0, 0},
      {nullptr, 0, 0},      {"Q5_0", 32, 22},    {"Q5_1", 32, 24},    {"Q8_0", 32, 34},    {"Q8_1", 32, 36},
      {"Q2_K", 256, 84},    {"Q3_K", 256, 110},  {"Q4_K", 256, 144},  {"Q5_K", 256, 176},  {"Q6_K", 256, 210},
      {"Q8_K", 256, 292},   {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74}, {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
      {"IQ4_NL", 32, 18},   {"IQ3_S", 256, 110}, {"IQ2_S", 256, 82},  {"IQ4_XS", 256, 136}, {"I8", 1, 1},
      {"I16", 1, 2},        {"I32", 1, 4},       {"I64", 1, 8},       {"F64", 1, 8},       {"IQ1_M", 256, 56},
      {"BF16", 1, 2},       {nullptr, 0, 0},     {nullptr, 0, 0},     {nullptr, 0, 0},     {"TQ1_0", 256, 54},
      {"TQ2_0", 256, 66},   {nullptr, 0, 0},     {nullptr, 0, 0},     {nullptr, 0, 0},     {"MXFP4", 32, 17},
  };
  if (type >= std::size(kTypes) || !kTypes[type].name) return {nullptr, 0, 0};
  return kTypes[type];
}

bool is_gguf_path(const std::string& path) {
  if (path.size() < 5) return false;
  std::string ext = path.substr(path.size() - 5);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  return ext == ".gguf";
}

GgufFile parse_gguf(std::istream& in, uint64_t size, const std::string& origin, const GgufReadOptions& opt) {
  Cursor c(in, size, origin);
  GgufFile f;
  f.path = origin;
  f.file_size = size;
  if (size < 4) c.fail("magic", fmt::format("a GGUF file (starting with \"GGUF\"), got {} bytes", size), 0);
  uint32_t magic = c.num<uint32_t>("magic");
  if (std::memcmp(&magic, "GGUF", 4) != 0)
    c.fail("magic", "a GGUF file: the first 4 bytes \"GGUF\" (is this a safetensors or an old GGML/GGJT file?)", 0);
  f.version = c.num<uint32_t>("version");
  if (f.version == 1) c.fail("version", "GGUF version 2 or 3; version 1 (2023, 32-bit counts) is not read: re-convert the model", 4);
  if (f.version > 0xFFFF && (f.version >> 24) <= 3)
    c.fail("version", "a little-endian GGUF file; this one is big-endian", 4);
  if (f.version != 2 && f.version != 3) c.fail("version", fmt::format("GGUF version 2 or 3, got {}", f.version), 4);
  const uint64_t n_tensors = c.num<uint64_t>("tensor_count");
  const uint64_t n_kv = c.num<uint64_t>("metadata_kv_count");
  // The smallest key/value pair is 8 (key length) + 1 + 4 (type) + 1 bytes; the smallest tensor
  // info 8 + 1 + 4 + 8 + 4 + 8: counts beyond what the file can hold are refused before any allocation.
  if (n_kv > c.left() / 14)
    c.fail("metadata_kv_count", fmt::format("a count that fits in the file ({} bytes left), got {}", c.left(), n_kv), 16);
  if (n_tensors > c.left() / 33)
    c.fail("tensor_count", fmt::format("a count that fits in the file ({} bytes left), got {}", c.left(), n_tensors), 8);

  std::set<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    GgufKV kv;
    kv.offset = c.pos();
    kv.key = c.str(fmt::format("metadata {} key", i), kMaxKey);
    const std::string field = "metadata '" + kv.key + "'";
    if (kv.key.empty()) c.fail(fmt::format("metadata {} key", i), "a non-empty key", kv.offset);
    if (!keys.insert(kv.key).second) c.fail(field, "each key once; this one is a duplicate", kv.offset);
    kv.type = value_type(c, field + " type");
    read_value(c, kv, field);
    if (kv.key == "general.alignment") {
      if (kv.type != GgufValueType::U32) c.fail(field, "a uint32", kv.offset);
      uint32_t a = kv.value.get<uint32_t>();
      if (a == 0 || (a & (a - 1)) != 0 || a > (1u << 20))
        c.fail(field, fmt::format("a power of two up to 2^20, got {}", a), kv.offset);
      f.alignment = a;
    }
    f.kv.push_back(std::move(kv));
  }
  std::set<std::string> names;
  f.tensors.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) read_tensor_info(c, f, i, names);
  f.data_offset = (c.pos() + f.alignment - 1) / f.alignment * f.alignment;
  check_tensor_data(c, f, opt);
  return f;
}

GgufFile read_gguf(const std::string& path, const GgufReadOptions& opt) {
  // Weights are GBs: the size cap only bounds what the header reader may be asked to walk.
  static constexpr FileKind kGguf{"GGUF model", uint64_t(1) << 42};
  uint64_t size = check_input_file(path, kGguf);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "a readable GGUF file (open failed)");
  return parse_gguf(in, size, path, opt);
}

GgufWeights gguf_weights(const GgufFile& f) {
  GgufWeights w;
  for (const auto& t : f.tensors) {
    auto& p = w.by_type[ggml_type_info(t.ggml_type).name];
    ++p.tensors;
    p.elements += t.elements;
    p.bytes += t.bytes;
    w.elements += t.elements;
    w.bytes += t.bytes;
  }
  return w;
}

}  // namespace peerplan

namespace peerplan {

std::string gguf_summary_text(const GgufFile& f) {
  GgufWeights w = gguf_weights(f);
  std::string s = fmt::format("\nGGUF v{}: {} tensors, {} metadata keys, {:.3f} GB of weights ({:.2f} bits per weight){}\n",
                              f.version, f.tensors.size(), f.kv.size(), double(w.bytes) / 1e9, w.bits_per_weight(),
                              f.data_present ? "" : " [header only: the tensor data is not in the file]");
  s += fmt::format("  {:<8} {:>8} {:>16} {:>14} {:>6}\n", "type", "tensors", "weights", "bytes", "bits");
  for (const auto& [type, p] : w.by_type)
    s += fmt::format("  {:<8} {:>8} {:>16} {:>14} {:>6.2f}\n", type, p.tensors, p.elements, p.bytes,
                     p.elements ? 8.0 * double(p.bytes) / double(p.elements) : 0.0);
  return s;
}

nlohmann::json gguf_summary_json(const GgufFile& f) {
  GgufWeights w = gguf_weights(f);
  nlohmann::json types = nlohmann::json::object();
  for (const auto& [type, p] : w.by_type) types[type] = {{"tensors", p.tensors}, {"weights", p.elements}, {"bytes", p.bytes}};
  return {{"version", f.version}, {"tensors", f.tensors.size()}, {"metadata_keys", f.kv.size()},
          {"weight_bytes", w.bytes}, {"weights", w.elements}, {"bits_per_weight", w.bits_per_weight()},
          {"by_type", types}, {"data_present", f.data_present}};
}

}  // namespace peerplan
