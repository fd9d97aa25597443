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

// Cells of one CSV line as spreadsheet programs write them (RFC 4180): a cell in double quotes
// may hold commas, and "" inside it is one quote. A quoted cell spanning lines is refused.
void split_cells(const std::string& line, std::vector<std::string>& out, const std::string& origin, int lineno) {
  auto where = [&] { return "line " + std::to_string(lineno); };
  size_t n = 0;
  auto next_cell = [&]() -> std::string& {
    if (out.size() <= n) out.emplace_back();
    std::string& c = out[n++];
    c.clear();
    return c;
  };
  size_t i = 0;
  for (;;) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::string& cell = next_cell();
    if (i < line.size() && line[i] == '"') {
      ++i;
      for (;;) {
        if (i >= line.size())
          throw InputError(origin, where(), "a quoted cell is not closed on its line (a quote is missing, or a cell spans lines)");
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            cell += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        cell += line[i++];
      }
      while (i < line.size() && line[i] != ',') {
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
          throw InputError(origin, where(), "text after a quoted cell; expected a comma or the end of the line");
        ++i;
      }
    } else {
      size_t comma = line.find(',', i);
      size_t end = comma == std::string::npos ? line.size() : comma;
      size_t last = end;
      while (last > i && (line[last - 1] == ' ' || line[last - 1] == '\t' || line[last - 1] == '\r')) --last;
      cell.assign(line, i, last - i);
      i = end;
    }
    if (i >= line.size()) break;
    ++i;  // the comma
  }
  out.resize(n);
}

// Lines of a stream, each at most kMaxLine bytes (a trace row is tens of bytes: a longer line is
// not a trace, and reading it whole would take memory of the file's size).
constexpr size_t kMaxLine = 64 * 1024;

class LineReader {
 public:
  LineReader(std::istream& in, std::string origin) : sb_(in.rdbuf()), origin_(std::move(origin)) {}
  bool next(std::string& line) {
    line.clear();
    using traits = std::char_traits<char>;
    if (traits::eq_int_type(sb_->sgetc(), traits::eof())) return false;
    ++lineno_;
    for (int c; !traits::eq_int_type(c = sb_->sbumpc(), traits::eof()) && c != '\n';) {
      if (line.size() >= kMaxLine)
        throw InputError(origin_, "line " + std::to_string(lineno_),
                         "longer than " + std::to_string(kMaxLine) + " bytes; expected a CSV trace row");
      line += char(c);
    }
    bytes_ += line.size() + 1;
    if (lineno_ == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);  // UTF-8 byte-order mark
    return true;
  }
  int lineno() const { return lineno_; }
  uint64_t bytes() const { return bytes_; }

 private:
  std::streambuf* sb_;  // read directly: a trace of hundreds of MB goes byte by byte
  std::string origin_;
  int lineno_ = 0;
  uint64_t bytes_ = 0;
};

// Appends one row; checks that timestamps do not decrease and that every row has the length
// columns the first row has.
// `where` and `ts_field` make the names for messages, only when one is needed.
template <class Where, class TsField>
void append_row(Trace& t, double ts, std::optional<int64_t> p, std::optional<int64_t> o, const Where& where,
                const TsField& ts_field) {
  size_t n = t.timestamps_s.size();
  if (n > 0) {
    bool had_p = t.prompt_tokens.size() == n, had_o = t.output_tokens.size() == n;
    if (had_p != p.has_value() || had_o != o.has_value())
      throw InputError(t.file, where(), "every row must have the same length columns (prompt_tokens, output_tokens) as the first row");
    if (ts < t.timestamps_s.back())
      throw InputError(t.file, ts_field(), "timestamps must not decrease; found " + std::to_string(ts) + " after " +
                                             std::to_string(t.timestamps_s.back()) + " (sort the trace by time)");
  }
  t.timestamps_s.push_back(ts);
  if (p) t.prompt_tokens.push_back(*p);
  if (o) t.output_tokens.push_back(*o);
}

// `size_bytes`: the file's size, to reserve the columns once the first rows give the bytes per row.
Trace parse_csv(LineReader& lines, const std::string& origin, uint64_t size_bytes) {
  Trace t;
  t.file = origin;
  std::string s;
  std::vector<std::string> cells;
  int col_ts = -1, col_prompt = -1, col_output = -1;
  size_t ncols = 0;
  bool header = false;
  while (lines.next(s)) {
    size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos || s[b] == '#') continue;
    const int lineno = lines.lineno();
    auto where = [&] { return "line " + std::to_string(lineno); };
    split_cells(s, cells, origin, lineno);
    if (!header) {
      header = true;
      ncols = cells.size();
      for (size_t i = 0; i < cells.size(); ++i) {
        if (cells[i] == "timestamp_s") col_ts = int(i);
        else if (cells[i] == "prompt_tokens") col_prompt = int(i);
        else if (cells[i] == "output_tokens") col_output = int(i);
      }
      if (col_ts < 0)
        throw InputError(origin, where(), "the header row must name a timestamp_s column (optional: prompt_tokens, "
                                          "output_tokens), e.g. 'timestamp_s,prompt_tokens,output_tokens'");
      continue;
    }
    if (cells.size() != ncols)
      throw InputError(origin, where(), "expected " + std::to_string(ncols) + " comma-separated values as in the header; found " +
                                            std::to_string(cells.size()));
    if (t.timestamps_s.size() == 1024 && size_bytes > lines.bytes()) {
      // Columns sized once from the bytes per row so far (+5%): no doubling to twice the need.
      const double per_row = double(lines.bytes()) / 1024.0;
      const size_t rows = size_t(double(size_bytes) / per_row * 1.05) + 1024;
      t.timestamps_s.reserve(rows);
      if (col_prompt >= 0) t.prompt_tokens.reserve(rows);
      if (col_output >= 0) t.output_tokens.reserve(rows);
    }
    auto number = [&](int col, const char* name) {
      const std::string& c = cells[size_t(col)];
      errno = 0;
      char* end = nullptr;
      double v = std::strtod(c.c_str(), &end);
      if (c.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
        throw InputError(origin, where() + ", column " + name, "expected a number, found '" + c + "'");
      return v;
    };
    auto length = [&](int col, const char* name) {
      double v = number(col, name);
      if (v < 1 || v != std::floor(v) || v > 1e8)
        throw InputError(origin, where() + ", column " + name, "expected a whole number of tokens in [1, 1e8], found '" +
                                                                   cells[size_t(col)] + "'");
      return int64_t(v);
    };
    double ts = number(col_ts, "timestamp_s");
    if (ts < 0) throw InputError(origin, where() + ", column timestamp_s", "expected seconds >= 0, found " + cells[size_t(col_ts)]);
    std::optional<int64_t> p, o;
    if (col_prompt >= 0) p = length(col_prompt, "prompt_tokens");
    if (col_output >= 0) o = length(col_output, "output_tokens");
    append_row(t, ts, p, o, where, [&] { return where() + ", column timestamp_s"; });
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
    append_row(t, ts, p, o, [&] { return r.pointer().substr(1); }, [&] { return r.field("timestamp_s"); });
  }
  if (t.timestamps_s.empty())
    throw InputError(origin, root.is_array() ? "" : "requests", "trace has no requests; expected at least one");
  return t;
}

}  // namespace

namespace {

const char* kEmptyTrace = "trace file is empty; expected CSV with a timestamp_s column or JSON";

bool starts_json(const std::string& text) {
  size_t b = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  size_t first = text.find_first_not_of(" \t\r\n", b);
  return first != std::string::npos && (text[first] == '[' || text[first] == '{');
}

}  // namespace

Trace parse_trace(const std::string& text, const std::string& origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw InputError(origin, "", kEmptyTrace);
  if (starts_json(text)) return parse_json_trace(text, origin);
  std::istringstream in(text);
  LineReader lines(in, origin);
  return parse_csv(lines, origin, text.size());
}

// CSV is streamed line by line (a day of production traffic is hundreds of MB); JSON is parsed as
// a tree, so its cap is lower (file_kind::kJsonTrace).
Trace load_trace(const std::string& path) {
  std::string head;
  {
    auto in = open_input_stream(path, file_kind::kCsvTrace);
    char buf[4096];
    in->read(buf, sizeof buf);
    head.assign(buf, size_t(in->gcount()));
    if (in->eof() && head.find_first_not_of(" \t\r\n") == std::string::npos) throw InputError(path, "", kEmptyTrace);
  }
  if (starts_json(head)) return parse_json_trace(read_input_file(path, file_kind::kJsonTrace), path);
  const uint64_t size = check_input_file(path, file_kind::kCsvTrace);
  auto in = open_input_stream(path, file_kind::kCsvTrace);
  LineReader lines(*in, path);
  return parse_csv(lines, path, size);
}

}  // namespace peerplan
