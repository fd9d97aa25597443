#pragma once
// Request traces: arrival timestamps with optional per-request prompt/output lengths, from CSV
// (a header row naming timestamp_s and optionally prompt_tokens, output_tokens) or JSON (an array
// of objects with those keys, or {"requests": [...]}). Recognised by content, not extension.
#include <cstdint>
#include <string>
#include <vector>

namespace peerplan {

struct Trace {
  std::string file;
  std::vector<double> timestamps_s;     // non-decreasing, as read (not shifted)
  std::vector<int64_t> prompt_tokens;   // empty when the trace has no such column
  std::vector<int64_t> output_tokens;   // empty when the trace has no such column
};

// Throws InputError naming the file, the line (CSV) or element (JSON) and the column for: empty
// trace, missing timestamp_s, non-numeric or negative values, decreasing timestamps, a length
// column present in some rows only, lengths < 1.
Trace load_trace(const std::string& path);
Trace parse_trace(const std::string& text, const std::string& origin);

}  // namespace peerplan
