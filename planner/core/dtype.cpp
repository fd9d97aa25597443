#include "planner/core/dtype.hpp"

#include <algorithm>
#include <cctype>

namespace peerplan {

double dtype_bits(DType t) {
  switch (t) {
    case DType::BF16:
    case DType::FP16: return 16;
    case DType::FP8_E4M3:
    case DType::INT8: return 8;
    case DType::INT4:
    case DType::MXFP4: return 4;
  }
  return 16;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::BF16: return "bf16";
    case DType::FP16: return "fp16";
    case DType::FP8_E4M3: return "fp8";
    case DType::INT8: return "int8";
    case DType::INT4: return "int4";
    case DType::MXFP4: return "mxfp4";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  std::string v(s);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (v == "bf16" || v == "bfloat16") return DType::BF16;
  if (v == "fp16" || v == "float16" || v == "half") return DType::FP16;
  if (v == "fp8" || v == "fp8_e4m3" || v == "e4m3" || v == "float8_e4m3fn") return DType::FP8_E4M3;
  if (v == "int8" || v == "w8a8") return DType::INT8;
  if (v == "int4" || v == "w4a16" || v == "uint4") return DType::INT4;
  if (v == "mxfp4") return DType::MXFP4;
  return std::nullopt;
}

}  // namespace peerplan
