#pragma once
// What this binary was built with. Values come from compile definitions set by CMake (not a
// generated header, so every build directory compiles identical command lines and ccache shares them).
namespace peerplan::build {
inline constexpr const char* version = PEERPLAN_VERSION;
inline constexpr const char* source_dir = PEERPLAN_SOURCE_DIR;
#ifdef PEERPLAN_WITH_CUDA
inline constexpr bool with_cuda = true;
#else
inline constexpr bool with_cuda = false;
#endif
}  // namespace peerplan::build
