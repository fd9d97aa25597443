#pragma once
// File helpers shared by every command that writes output.
#include <string>

namespace peerplan {

// Writes `content` to `path` atomically: a temporary file in the same directory, fsync, rename.
// A crash or a failed write never leaves a partial or corrupted file at `path`.
void write_file_atomic(const std::string& path, const std::string& content);

// Reads a whole text file; throws InputError naming the file if it cannot be read.
std::string read_text_file(const std::string& path);

// Locates a shipped data file (models/..., plugins/...). Search order: the path as given; relative
// to $PEERPLAN_HOME; relative to the source tree the binary was built from.
std::string find_data_file(const std::string& relpath);

}  // namespace peerplan
