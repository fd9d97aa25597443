// libFuzzer entry for the "model_config" target; the logic lives in target_model_config.hpp so the replay test
// (tests/hostile) runs exactly the same code on the regression inputs.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/target_model_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  peerplan::fuzz::fuzz_model_config(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
