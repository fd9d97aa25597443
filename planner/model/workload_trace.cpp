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

constexpr double kMaxTokens = 1e8;  // per prompt or output, as in a workload file

// The CSV layouts read as they are, chosen by the header row's names.
struct CsvFormat {
  const char* name;
  const char* ts;      // the arrival column
  const char* prompt;  // the length columns ("" when optional and absent)
  const char* output;
  bool datetime;       // the arrival is a date-time ("2023-11-16 18:15:46.6805900"), else seconds
  bool public_trace;   // both lengths required; a row with 0 tokens is a failed request: skipped, counted
};
constexpr CsvFormat kPeerplan{"peerplan", "timestamp_s", "prompt_tokens", "output_tokens", false, false};
// Azure LLM inference traces 2023 (AzureLLMInferenceTrace_code.csv, _conv.csv) and 2024
// (_code_1week.csv, _conv_1week.csv): TIMESTAMP,ContextTokens,GeneratedTokens.
constexpr CsvFormat kAzure{"Azure LLM inference", "TIMESTAMP", "ContextTokens", "GeneratedTokens", true, true};
// BurstGPT (BurstGPT_1.csv, ...): Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type;
// "Response tokens" 0 marks a failed request.
constexpr CsvFormat kBurstGpt{"BurstGPT", "Timestamp", "Request tokens", "Response tokens", false, true};

const char* kHeaderHelp =
    "the header row must name the columns of one of: peerplan's own 'timestamp_s[,prompt_tokens][,output_tokens]'; "
    "the Azure LLM inference traces 'TIMESTAMP,ContextTokens,GeneratedTokens'; BurstGPT 'Timestamp,Model,Request "
    "tokens,Response tokens,Total tokens,Log Type'";

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = unsigned(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + int64_t(doe) - 719468;
}

// "YYYY-MM-DD HH:MM:SS[.fraction][Z|+HH:MM|-HH:MM]" ('T' also separates date and time): whole
// seconds since the epoch (UTC) and the fraction apart, so a 7-digit fraction is not lost in a
// double of 1.7e9. False when the text is not such a date-time.
bool parse_datetime(const std::string& s, int64_t& sec, double& frac) {
  size_t i = 0;
  auto digits = [&](size_t n, int& out) {
    if (i + n > s.size()) return false;
    out = 0;
    for (size_t k = 0; k < n; ++k, ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      out = out * 10 + (s[i] - '0');
    }
    return true;
  };
  auto lit = [&](char c) { return i < s.size() && s[i++] == c; };
  int Y, M, D, h, m, sc;
  if (!digits(4, Y) || !lit('-') || !digits(2, M) || !lit('-') || !digits(2, D)) return false;
  if (i >= s.size() || (s[i] != ' ' && s[i] != 'T')) return false;
  ++i;
  if (!digits(2, h) || !lit(':') || !digits(2, m) || !lit(':') || !digits(2, sc)) return false;
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (M < 1 || M > 12 || D < 1 || D > kDays[M - 1] || h > 23 || m > 59 || sc > 60) return false;
  frac = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    double scale = 0.1;
    size_t first = i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, scale /= 10) frac += (s[i] - '0') * scale;
    if (i == first) return false;
  }
  int offset_s = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    const int sign = s[i++] == '-' ? -1 : 1;
    int oh, om;
    if (!digits(2, oh) || !lit(':') || !digits(2, om) || oh > 23 || om > 59) return false;
    offset_s = sign * (oh * 3600 + om * 60);
  }
  if (i != s.size()) return false;
  sec = days_from_civil(Y, unsigned(M), unsigned(D)) * 86400 + h * 3600 + m * 60 + sc - offset_s;
  return true;
}

// `size_bytes`: the file's size, to reserve the columns once the first rows give the bytes per row.
Trace parse_csv(LineReader& lines, const std::string& origin, uint64_t size_bytes) {
  Trace t;
  t.file = origin;
  std::string s;
  std::vector<std::string> cells;
  const CsvFormat* fmt = nullptr;
  int col_ts = -1, col_prompt = -1, col_output = -1;
  size_t ncols = 0;
  int64_t first_sec = 0;  // date-times: seconds are kept relative to the first row's
  while (lines.next(s)) {
    size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos || s[b] == '#') continue;
    const int lineno = lines.lineno();
    auto where = [&] { return "line " + std::to_string(lineno); };
    split_cells(s, cells, origin, lineno);
    if (!fmt) {
      ncols = cells.size();
      auto col = [&](const char* name) {
        for (size_t i = 0; i < cells.size(); ++i)
          if (cells[i] == name) return int(i);
        return -1;
      };
      for (const CsvFormat* f : {&kPeerplan, &kAzure, &kBurstGpt}) {
        col_ts = col(f->ts);
        col_prompt = col(f->prompt);
        col_output = col(f->output);
        if (col_ts >= 0 && (!f->public_trace || (col_prompt >= 0 && col_output >= 0))) {
          fmt = f;
          break;
        }
      }
      if (!fmt) throw InputError(origin, where(), std::string(kHeaderHelp) + "; found '" + s + "'");
      t.format = fmt->name;
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
    auto column = [&](const char* name) { return where() + ", column " + name; };
    auto number = [&](int col, const char* name) {
      const std::string& c = cells[size_t(col)];
      errno = 0;
      char* end = nullptr;
      double v = std::strtod(c.c_str(), &end);
      if (c.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
        throw InputError(origin, column(name), "expected a number, found '" + c + "'");
      return v;
    };
    auto length = [&](int col, const char* name) {
      double v = number(col, name);
      const double lo = fmt->public_trace ? 0 : 1;
      if (v < lo || v != std::floor(v) || v > kMaxTokens)
        throw InputError(origin, column(name), std::string("expected a whole number of tokens in [") +
                                                   (fmt->public_trace ? "0" : "1") + ", 1e8], found '" +
                                                   cells[size_t(col)] + "'");
      return int64_t(v);
    };
    double ts;
    if (fmt->datetime) {
      int64_t sec;
      double frac;
      if (!parse_datetime(cells[size_t(col_ts)], sec, frac))
        throw InputError(origin, column(fmt->ts), "expected a date-time like '2023-11-16 18:15:46.6805900' or "
                                                  "'2024-05-12 00:00:00.001163+00:00', found '" +
                                                      cells[size_t(col_ts)] + "'");
      if (t.timestamps_s.empty() && t.skipped_rows == 0) first_sec = sec;
      ts = double(sec - first_sec) + frac;
    } else {
      ts = number(col_ts, fmt->ts);
      if (ts < 0) throw InputError(origin, column(fmt->ts), "expected seconds >= 0, found " + cells[size_t(col_ts)]);
    }
    std::optional<int64_t> p, o;
    if (col_prompt >= 0) p = length(col_prompt, fmt->prompt);
    if (col_output >= 0) o = length(col_output, fmt->output);
    if (fmt->public_trace && (*p == 0 || *o == 0)) {  // a failed request (BurstGPT marks them so): not served
      if (t.skipped_rows++ == 0) t.first_skipped_line = lineno;
      continue;
    }
    append_row(t, ts, p, o, where, [&] { return column(fmt->ts); });
  }
  if (t.timestamps_s.empty())
    throw InputError(origin, "", t.skipped_rows ? "every row has 0 prompt or output tokens (failed requests); nothing "
                                                  "is left to replay"
                                                : "trace has no requests; expected a header row and at least one data row");
  return t;
}

// JSON traces, streamed with nlohmann's SAX interface (no tree: a JSON trace of millions of rows
// takes the memory of its columns, as a CSV one does): an array of request objects, or an object
// whose "requests" is that array (other keys of it are ignored). In a request, timestamp_s and
// optionally prompt_tokens, output_tokens; other keys are ignored. Errors name the element and
// the key as JSON pointers do ("requests/3/timestamp_s").
class JsonTraceReader : public nlohmann::json_sax<json> {
 public:
  explicit JsonTraceReader(Trace& t) : t_(t) {}
  bool saw_rows() const { return rows_depth_ > 0; }
  bool root_is_array() const { return root_array_; }

  bool null() override { return scalar("null"); }
  bool boolean(bool) override { return scalar("a boolean"); }
  bool number_integer(number_integer_t v) override { return number(double(v), std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override { return number(double(v), std::to_string(v)); }
  bool number_float(number_float_t v, const string_t& text) override { return number(v, text); }
  bool string(string_t& v) override { return scalar("a string ('" + v.substr(0, 40) + "')"); }
  bool binary(binary_t&) override { return scalar("binary data"); }
  bool key(string_t& k) override {
    key_ = k;
    return true;
  }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t byte, const std::string&, const nlohmann::detail::exception& e) override {
    std::string what = e.what();
    auto pos = what.find("] ");
    throw InputError(t_.file, "", "malformed JSON at byte " + std::to_string(byte) + " (" +
                                      (pos == std::string::npos ? what : what.substr(pos + 2)) + ")");
  }

 private:
  static constexpr int kMaxDepth = 64;
  std::string row_field(const std::string& k = "") const {
    std::string f = prefix_ + std::to_string(row_);
    return k.empty() ? f : f + "/" + k;
  }
  [[noreturn]] void fail(const std::string& field, const std::string& expected) const {
    throw InputError(t_.file, field, expected);
  }
  const char* kRowHelp = "expected an object with timestamp_s (and optionally prompt_tokens, output_tokens)";

  // A value (scalar or container) is starting at depth_ (the containers open around it).
  // Returns true when it is to be skipped whole.
  bool skipping() const { return skip_from_ > 0; }
  bool scalar(const std::string& what) {
    if (skipping()) return true;
    if (depth_ == 0) fail("", "expected an array of requests or {\"requests\": [...]}; found " + what);
    if (in_rows_element()) fail(row_field(), std::string(kRowHelp) + "; found " + what);
    if (in_row_field() && known(key_)) fail(row_field(key_), "expected a number, found " + what);
    if (depth_ == 1 && !root_array_ && key_ == "requests")
      fail("requests", "expected an array of request objects; found " + what);
    return true;  // an ignored key's value
  }
  bool number(double v, const std::string& text) {
    if (skipping() || !in_row_field() || !known(key_)) return scalar(text);
    if (!std::isfinite(v)) fail(row_field(key_), "expected a finite number, found " + text);
    if (key_ == "timestamp_s") {
      if (v < 0) fail(row_field(key_), "expected a number >= 0, found " + text);
      ts_ = v;
    } else {
      if (v != std::floor(v) || v < 1) fail(row_field(key_), "expected a positive integer, found " + text);
      if (v > kMaxTokens) fail(row_field(key_), "at most 100000000 tokens per request is accepted; found " + text);
      (key_ == "prompt_tokens" ? p_ : o_) = int64_t(v);
    }
    return true;
  }
  static bool known(const std::string& k) { return k == "timestamp_s" || k == "prompt_tokens" || k == "output_tokens"; }
  bool in_rows_element() const { return rows_depth_ > 0 && depth_ == rows_depth_ && !rows_done_; }
  bool in_row_field() const { return in_row_ && depth_ == rows_depth_ + 1; }

  bool open(bool object) {
    if (depth_ >= kMaxDepth) fail("", "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (!skipping()) {
      if (depth_ == 0) {
        root_array_ = !object;
        if (root_array_) rows_depth_ = 1;
      } else if (depth_ == 1 && !root_array_ && key_ == "requests" && rows_depth_ == 0) {
        if (object) fail("requests", "expected an array of request objects; found an object");
        rows_depth_ = 2;
        prefix_ = "requests/";
      } else if (in_rows_element()) {
        if (!object) fail(row_field(), std::string(kRowHelp) + "; found an array");
        in_row_ = true;
        ts_.reset();
        p_.reset();
        o_.reset();
      } else {
        if (in_row_field() && known(key_)) fail(row_field(key_), std::string("expected a number, found an ") + (object ? "object" : "array"));
        skip_from_ = depth_ + 1;  // an ignored key's container: skipped whole
      }
    }
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    if (skipping()) {
      if (depth_ + 1 == skip_from_) skip_from_ = 0;
      return true;
    }
    if (in_row_ && depth_ == rows_depth_) {  // a request object ends
      in_row_ = false;
      if (!ts_) fail(row_field("timestamp_s"), "required field is missing; " + std::string(kRowHelp));
      append_row(t_, *ts_, p_, o_, [&] { return row_field(); }, [&] { return row_field("timestamp_s"); });
      ++row_;
    } else if (rows_depth_ > 0 && depth_ + 1 == rows_depth_) {
      rows_done_ = true;
    }
    return true;
  }

  Trace& t_;
  int depth_ = 0, rows_depth_ = 0, skip_from_ = 0;
  bool root_array_ = false, in_row_ = false, rows_done_ = false;
  std::string key_, prefix_;
  size_t row_ = 0;
  std::optional<double> ts_;
  std::optional<int64_t> p_, o_;
};

Trace parse_json_trace(std::istream& in, const std::string& origin) {
  Trace t;
  t.file = origin;
  t.format = "json";
  JsonTraceReader reader(t);
  (void)json::sax_parse(in, &reader, json::input_format_t::json, /*strict=*/true, /*ignore_comments=*/false);
  if (!reader.root_is_array() && !reader.saw_rows())
    throw InputError(origin, "requests", "required field is missing; expected an array of request objects");
  if (t.timestamps_s.empty())
    throw InputError(origin, reader.root_is_array() ? "" : "requests", "trace has no requests; expected at least one");
  return t;
}

const char* kEmptyTrace = "trace file is empty; expected CSV (peerplan's timestamp_s columns, an Azure LLM inference "
                          "trace or BurstGPT) or JSON";

bool starts_json(const std::string& text) {
  size_t b = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  size_t first = text.find_first_not_of(" \t\r\n", b);
  return first != std::string::npos && (text[first] == '[' || text[first] == '{');
}

}  // namespace

std::string Trace::skipped_note() const {
  if (skipped_rows == 0) return "";
  return "trace " + file + " (" + format + "): skipped " + std::to_string(skipped_rows) + " row" +
         (skipped_rows == 1 ? "" : "s") + " with 0 prompt or output tokens (failed requests; the first on line " +
         std::to_string(first_skipped_line) + "); " + std::to_string(timestamps_s.size()) + " requests replayed";
}

Trace parse_trace(const std::string& text, const std::string& origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw InputError(origin, "", kEmptyTrace);
  std::istringstream in(text);
  if (starts_json(text)) return parse_json_trace(in, origin);
  LineReader lines(in, origin);
  return parse_csv(lines, origin, text.size());
}

// CSV is streamed line by line and JSON value by value (a day of production traffic is hundreds
// of MB): memory follows the columns kept, not the text.
Trace load_trace(const std::string& path) {
  std::string head;
  {
    auto in = open_input_stream(path, file_kind::kTrace);
    char buf[4096];
    in->read(buf, sizeof buf);
    head.assign(buf, size_t(in->gcount()));
    if (in->eof() && head.find_first_not_of(" \t\r\n") == std::string::npos) throw InputError(path, "", kEmptyTrace);
  }
  const uint64_t size = check_input_file(path, file_kind::kTrace);
  auto in = open_input_stream(path, file_kind::kTrace);
  if (starts_json(head)) return parse_json_trace(*in, path);
  LineReader lines(*in, path);
  return parse_csv(lines, path, size);
}

}  // namespace peerplan
