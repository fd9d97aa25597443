// libFuzzer entry for the "lua" target; the logic lives in target_lua.hpp so the replay test
// (tests/hostile) runs exactly the same code on the regression inputs.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/target_lua.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  peerplan::fuzz::fuzz_lua(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
