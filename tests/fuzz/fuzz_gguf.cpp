// libFuzzer entry for the "gguf" target; the logic lives in target_gguf.hpp so the replay test
// (tests/hostile) runs exactly the same code on the regression inputs.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/target_gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  peerplan::fuzz::fuzz_gguf(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
