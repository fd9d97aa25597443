// libFuzzer entry for the "nccl_xml" target; the logic lives in target_machine.hpp so the replay test
// (tests/hostile) runs exactly the same code on the regression inputs.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/target_machine.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  peerplan::fuzz::fuzz_nccl_xml(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
