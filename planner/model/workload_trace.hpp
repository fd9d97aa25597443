#pragma once
// Request traces: arrival timestamps with optional per-request prompt/output lengths. Read as
// users have them, chosen by content (not extension) and, for CSV, by the header row's names:
//  - peerplan's own CSV: timestamp_s (seconds) and optionally prompt_tokens, output_tokens;
//  - the Azure LLM inference traces (2023 and 2024, code and conversation):
//    TIMESTAMP (a date-time, "2023-11-16 18:15:46.6805900" or "2024-05-12 00:00:00.001163+00:00"),
//    ContextTokens, GeneratedTokens;
//  - BurstGPT: Timestamp (seconds), Model, Request tokens, Response tokens, Total tokens, Log Type;
//  - JSON: an array of objects with timestamp_s (and optionally the two lengths), or
//    {"requests": [...]}.
// CSV and JSON are both streamed: memory follows the columns, not the file.
#include <cstdint>
#include <string>
#include <vector>

namespace peerplan {

struct Trace {
  std::string file;
  std::string format;                   // "peerplan", "Azure LLM inference", "BurstGPT", "json"
  std::vector<double> timestamps_s;     // non-decreasing; date-times as seconds since the first row's whole second
  std::vector<int64_t> prompt_tokens;   // empty when the trace has no such column
  std::vector<int64_t> output_tokens;   // empty when the trace has no such column
  // Azure and BurstGPT rows with 0 prompt or output tokens are requests that were not served
  // (BurstGPT's failures): skipped, counted, and reported with skipped_note().
  int64_t skipped_rows = 0;
  int first_skipped_line = 0;
  std::string skipped_note() const;     // "" when none was skipped
};

// Throws InputError naming the file, the line (CSV) or element (JSON) and the column for: empty
// trace, a header of none of the formats above, missing timestamp, non-numeric or negative values,
// a malformed date-time, decreasing timestamps, a length column present in some rows only,
// lengths < 1 (peerplan's own and JSON) or < 0 (Azure, BurstGPT), over 1e8.
Trace load_trace(const std::string& path);
Trace parse_trace(const std::string& text, const std::string& origin);

}  // namespace peerplan
