// Reading request traces (CSV or JSON). Every error names the file, the row and the column.
#include "planner/model/workload_trace.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"

namespace peerplan {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream ss(line);
  while (std::getline(ss, cell, ',')) out.push_back(trim(cell));
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

// Appends one row; checks that timestamps do not decrease and that every row has the length
// columns the first row has.
void append_row(Trace& t, double ts, std::optional<int64_t> p, std::optional<int64_t> o, const std::string& where,
                const std::string& ts_field) {
  size_t n = t.timestamps_s.size();
  if (n > 0) {
    bool had_p = t.prompt_tokens.size() == n, had_o = t.output_tokens.size() == n;
    if (had_p != p.has_value() || had_o != o.has_value())
      throw InputError(t.file, where, "every row must have the same length columns (prompt_tokens, output_tokens) as the first row");
    if (ts < t.timestamps_s.back())
      throw InputError(t.file, ts_field, "timestamps must not decrease; found " + std::to_string(ts) + " after " +
                                             std::to_string(t.timestamps_s.back()) + " (sort the trace by time)");
  }
  t.timestamps_s.push_back(ts);
  if (p) t.prompt_tokens.push_back(*p);
  if (o) t.output_tokens.push_back(*o);
}

Trace parse_csv(const std::string& text, const std::string& origin) {
  Trace t;
  t.file = origin;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  int col_ts = -1, col_prompt = -1, col_output = -1;
  size_t ncols = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++lineno;
    std::string s = trim(line);
    if (s.empty() || s[0] == '#') continue;
    auto cells = split_commas(s);
    std::string where = "line " + std::to_string(lineno);
    if (!header) {
      header = true;
      ncols = cells.size();
      for (size_t i = 0; i < cells.size(); ++i) {
        if (cells[i] == "timestamp_s") col_ts = int(i);
        else if (cells[i] == "prompt_tokens") col_prompt = int(i);
        else if (cells[i] == "output_tokens") col_output = int(i);
      }
      if (col_ts < 0)
        throw InputError(origin, where, "the header row must name a timestamp_s column (optional: prompt_tokens, "
                                        "output_tokens), e.g. 'timestamp_s,prompt_tokens,output_tokens'");
      continue;
    }
    if (cells.size() != ncols)
      throw InputError(origin, where, "expected " + std::to_string(ncols) + " comma-separated values as in the header; found " +
                                          std::to_string(cells.size()));
    auto number = [&](int col, const char* name) {
      const std::string& c = cells[size_t(col)];
      errno = 0;
      char* end = nullptr;
      double v = std::strtod(c.c_str(), &end);
      if (c.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
        throw InputError(origin, where + ", column " + name, "expected a number, found '" + c + "'");
      return v;
    };
    auto length = [&](int col, const char* name) {
      double v = number(col, name);
      if (v < 1 || v != std::floor(v) || v > 1e8)
        throw InputError(origin, where + ", column " + name, "expected a whole number of tokens in [1, 1e8], found '" +
                                                                 cells[size_t(col)] + "'");
      return int64_t(v);
    };
    double ts = number(col_ts, "timestamp_s");
    if (ts < 0) throw InputError(origin, where + ", column timestamp_s", "expected seconds >= 0, found " + cells[size_t(col_ts)]);
    std::optional<int64_t> p, o;
    if (col_prompt >= 0) p = length(col_prompt, "prompt_tokens");
    if (col_output >= 0) o = length(col_output, "output_tokens");
    append_row(t, ts, p, o, where, where + ", column timestamp_s");
  }
  if (t.timestamps_s.empty())
    throw InputError(origin, "", "trace has no requests; expected a header row and at least one data row");
  return t;
}

Trace parse_json_trace(const std::string& text, const std::string& origin) {
  json j = parse_json_text(text, origin);
  JsonIn root(j, origin);
  JsonIn rows = root.is_array() ? root : root.array("requests");
  Trace t;
  t.file = origin;
  for (size_t i = 0; i < rows.size(); ++i) {
    JsonIn r = rows[i];
    if (!r.is_object()) r.fail("", "expected an object with timestamp_s (and optionally prompt_tokens, output_tokens)");
    double ts = r.nonnegative("timestamp_s");
    std::optional<int64_t> p, o;
    for (const char* key : {"prompt_tokens", "output_tokens"}) {
      if (!r.has(key)) continue;
      int64_t v = r.positive_int(key);
      if (v > 100'000'000) r.fail(key, "at most 100000000 tokens per request is accepted; found " + std::to_string(v));
      (std::string(key) == "prompt_tokens" ? p : o) = v;
    }
    std::string where = r.pointer().substr(1);
    append_row(t, ts, p, o, where, r.field("timestamp_s"));
  }
  if (t.timestamps_s.empty())
    throw InputError(origin, root.is_array() ? "" : "requests", "trace has no requests; expected at least one");
  return t;
}

}  // namespace

Trace parse_trace(const std::string& text, const std::string& origin) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) throw InputError(origin, "", "trace file is empty; expected CSV with a timestamp_s column or JSON");
  if (text[first] == '[' || text[first] == '{') return parse_json_trace(text, origin);
  return parse_csv(text, origin);
}

Trace load_trace(const std::string& path) { return parse_trace(read_text_file(path), path); }

}  // namespace peerplan
