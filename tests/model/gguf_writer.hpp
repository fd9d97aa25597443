#pragma once
// Builds GGUF bytes in memory for the reader's tests: the format written field by field as
// ggml/docs/gguf.md lays it out, so each test can break exactly one field.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace peerplan::test_gguf {

class Writer {
 public:
  std::string bytes;

  template <typename T>
  Writer& num(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes.append(b, sizeof(T));
    return *this;
  }
  Writer& str(const std::string& s) {
    num<uint64_t>(s.size());
    bytes += s;
    return *this;
  }
  Writer& header(uint32_t version, uint64_t tensors, uint64_t kvs) {
    bytes += "GGUF";
    return num<uint32_t>(version).num<uint64_t>(tensors).num<uint64_t>(kvs);
  }
  // Key/value pairs of the common types (type ids from gguf.h).
  Writer& kv_u32(const std::string& k, uint32_t v) { return str(k).num<uint32_t>(4).num<uint32_t>(v); }
  Writer& kv_i32(const std::string& k, int32_t v) { return str(k).num<uint32_t>(5).num<int32_t>(v); }
  Writer& kv_f32(const std::string& k, float v) { return str(k).num<uint32_t>(6).num<float>(v); }
  Writer& kv_bool(const std::string& k, bool v) { return str(k).num<uint32_t>(7).num<uint8_t>(v ? 1 : 0); }
  Writer& kv_str(const std::string& k, const std::string& v) { return str(k).num<uint32_t>(8).str(v); }
  Writer& kv_u64(const std::string& k, uint64_t v) { return str(k).num<uint32_t>(10).num<uint64_t>(v); }
  Writer& kv_f64(const std::string& k, double v) { return str(k).num<uint32_t>(12).num<double>(v); }
  Writer& kv_u8(const std::string& k, uint8_t v) { return str(k).num<uint32_t>(0).num<uint8_t>(v); }
  Writer& kv_i16(const std::string& k, int16_t v) { return str(k).num<uint32_t>(3).num<int16_t>(v); }
  Writer& kv_i64(const std::string& k, int64_t v) { return str(k).num<uint32_t>(11).num<int64_t>(v); }
  Writer& kv_str_array(const std::string& k, const std::vector<std::string>& v) {
    str(k).num<uint32_t>(9).num<uint32_t>(8).num<uint64_t>(v.size());
    for (const auto& s : v) str(s);
    return *this;
  }
  Writer& kv_i32_array(const std::string& k, const std::vector<int32_t>& v) {
    str(k).num<uint32_t>(9).num<uint32_t>(5).num<uint64_t>(v.size());
    for (int32_t x : v) num<int32_t>(x);
    return *this;
  }
  Writer& tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset) {
    str(name).num<uint32_t>(uint32_t(dims.size()));
    for (uint64_t d : dims) num<uint64_t>(d);
    return num<uint32_t>(type).num<uint64_t>(offset);
  }
  // Pads to the alignment and appends `n` data bytes.
  Writer& data(uint64_t n, uint64_t alignment = 32) {
    while (bytes.size() % alignment) bytes += '\0';
    bytes.append(n, '\x11');
    return *this;
  }
};

}  // namespace peerplan::test_gguf
