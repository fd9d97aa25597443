// Public request traces read as they are (issue 19): the Azure LLM inference traces 2023 and
// 2024 and BurstGPT, chosen by the header row; --trace-window / --trace-speedup; JSON traces
// streamed (issue 21). Fixtures: tests/data/model/{azure-*,burstgpt}.csv, written by
// make_public_trace_fixtures.py in the published header and value formats.
#include <gtest/gtest.h>

#include <cmath>

#include "model_test_util.hpp"
#include "planner/core/error.hpp"
#include "planner/model/workload.hpp"
#include "planner/model/workload_trace.hpp"

namespace peerplan {
namespace {

using test::expect_input_error;
using test::test_data;

Workload trace_workload(const std::string& file) {
  nlohmann::json j = {{"arrival", {{"process", "trace"}, {"file", file}}}};
  return parse_workload(j.dump(), test_data("workload-under-test.json"));
}

void expect_error_at(const std::string& text, const std::string& field, const std::string& part) {
  InputError e = expect_input_error([&] { parse_trace(text, "t.csv"); });
  EXPECT_EQ(e.field(), field) << e.what();
  EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
}

TEST(TraceFormats, Azure2023CodeAndConversationLoadAsPublished) {
  // 2023-11-16 18:17:04.0430526,2414,2 then 18:17:04.6203778,418,36 (7-digit fractions, no zone).
  Trace code = load_trace(test_data("azure-code-2023.csv"));
  EXPECT_EQ(code.format, "Azure LLM inference");
  ASSERT_EQ(code.timestamps_s.size(), 40u);
  EXPECT_NEAR(code.timestamps_s[0], 0.0430526, 1e-9) << "seconds since the first row's whole second";
  EXPECT_NEAR(code.timestamps_s[1] - code.timestamps_s[0], 0.6203778 - 0.0430526, 1e-9)
      << "all 7 digits of the fraction kept";
  EXPECT_EQ(code.prompt_tokens[0], 2414);
  EXPECT_EQ(code.output_tokens[1], 36);
  Trace conv = load_trace(test_data("azure-conv-2023.csv"));
  EXPECT_EQ(conv.timestamps_s.size(), 36u);
  EXPECT_EQ(conv.skipped_rows, 0);
}

TEST(TraceFormats, Azure2024WithZoneAndWithoutFractionLoads) {
  // 2024 files mix "2024-05-10 00:00:00.311104+00:00" and "2024-05-10 00:00:03+00:00".
  for (const char* f : {"azure-code-2024.csv", "azure-conv-2024.csv"}) {
    Trace t = load_trace(test_data(f));
    SCOPED_TRACE(f);
    EXPECT_EQ(t.format, "Azure LLM inference");
    EXPECT_GE(t.timestamps_s.size(), 36u);
    for (size_t i = 1; i < t.timestamps_s.size(); ++i) EXPECT_GE(t.timestamps_s[i], t.timestamps_s[i - 1]);
  }
  Trace code = load_trace(test_data("azure-code-2024.csv"));
  EXPECT_NEAR(code.timestamps_s[8], 3.0, 1e-12) << "line 10, '2024-05-10 00:00:03+00:00': no fraction";
  // Zones are honoured: 02:00:01+02:00 is 00:00:01 UTC, one second before 00:00:02Z.
  Trace z = parse_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-12 02:00:01+02:00,10,2\n"
                        "2024-05-12T00:00:02Z,20,3\n",
                        "z.csv");
  EXPECT_NEAR(z.timestamps_s[1] - z.timestamps_s[0], 1.0, 1e-12);
}

TEST(TraceFormats, BurstGptLoadsAndSkipsFailedRequestsWithACount) {
  // 40 rows; rows 8, 24 and 32 (lines 9, 25, 33) have Response tokens 0: BurstGPT's failures.
  Trace t = load_trace(test_data("burstgpt.csv"));
  EXPECT_EQ(t.format, "BurstGPT");
  EXPECT_EQ(t.timestamps_s.size(), 37u);
  EXPECT_EQ(t.skipped_rows, 3);
  EXPECT_EQ(t.first_skipped_line, 9);
  EXPECT_DOUBLE_EQ(t.timestamps_s[0], 5.0);
  EXPECT_EQ(t.prompt_tokens[0], 224);  // "5,ChatGPT,224,224,448,Conversation log"
  EXPECT_EQ(t.output_tokens[0], 224);
  EXPECT_NE(t.skipped_note().find("skipped 3 rows"), std::string::npos) << t.skipped_note();
  // Through a workload: the lengths replay, the note reaches the user.
  Workload w = trace_workload("burstgpt.csv");
  EXPECT_EQ(w.num_requests, 37);
  ASSERT_EQ(w.notes.size(), 1u);
  EXPECT_NE(w.notes[0].find("burstgpt.csv"), std::string::npos) << w.notes[0];
  const auto r = w.generate();
  ASSERT_EQ(r.size(), 37u);
  EXPECT_DOUBLE_EQ(r[0].arrival_s, 0.0);
  EXPECT_EQ(r[0].prompt_tokens, 224);
}

TEST(TraceFormats, ErrorsNameTheLineAndTheTracesOwnColumn) {
  const std::string azure = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n";
  expect_error_at(azure + "2023-13-16 18:15:50.9951690,396,109\n", "line 3, column TIMESTAMP", "date-time");
  expect_error_at(azure + "1700158550.99,396,109\n", "line 3, column TIMESTAMP", "'1700158550.99'");
  expect_error_at(azure + "2023-11-16 18:15:40.0000000,396,109\n", "line 3, column TIMESTAMP", "must not decrease");
  expect_error_at(azure + "2023-11-16 18:15:50.9951690,lots,109\n", "line 3, column ContextTokens", "'lots'");
  expect_error_at(azure + "2023-11-16 18:15:50.9951690,396,-1\n", "line 3, column GeneratedTokens", "[0, 1e8]");
  const std::string burst = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";
  expect_error_at(burst + "5,ChatGPT,472,18,490,Conversation log\n45,GPT-4,1.5,2,3,API log\n",
                  "line 3, column Request tokens", "whole number");
  expect_error_at(burst + "x,ChatGPT,472,18,490,Conversation log\n", "line 2, column Timestamp", "'x'");
  expect_error_at(burst + "5,ChatGPT,472,18,490\n", "line 2", "expected 6 comma-separated values");
  // A header of no known format names all three.
  InputError h = expect_input_error([] { parse_trace("time,ContextTokens,GeneratedTokens\n1,2,3\n", "t.csv"); });
  for (const char* name : {"timestamp_s", "TIMESTAMP,ContextTokens,GeneratedTokens", "Request tokens"})
    EXPECT_NE(std::string(h.what()).find(name), std::string::npos) << h.what();
  // Only failures: nothing left.
  InputError all = expect_input_error([&] { parse_trace(burst + "5,ChatGPT,472,0,472,API log\n", "t.csv"); });
  EXPECT_NE(std::string(all.what()).find("failed requests"), std::string::npos) << all.what();
}

TEST(TraceWindow, ReplaysTheRequestsArrivingInTheWindowFromZero) {
  Workload full = trace_workload("azure-code-2023.csv");
  const auto all = full.generate();
  Workload w = trace_workload("azure-code-2023.csv");
  WorkloadOverrides o;
  o.trace_window = parse_trace_window("2:6");
  apply_overrides(w, o);
  size_t first = 0, n = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].arrival_s >= 2 && all[i].arrival_s < 6) {
      if (n++ == 0) first = i;
    }
  ASSERT_GT(n, 3u);
  EXPECT_EQ(w.num_requests, int64_t(n));
  const auto r = w.generate();
  ASSERT_EQ(r.size(), n);
  EXPECT_DOUBLE_EQ(r[0].arrival_s, 0.0) << "the window's first request arrives at 0";
  for (size_t k = 0; k < n; ++k) {
    EXPECT_NEAR(r[k].arrival_s, all[first + k].arrival_s - all[first].arrival_s, 1e-9);
    EXPECT_EQ(r[k].prompt_tokens, all[first + k].prompt_tokens) << "row " << first + k << "'s recorded length";
    EXPECT_EQ(r[k].output_tokens, all[first + k].output_tokens);
  }
  ASSERT_FALSE(w.notes.empty());
  EXPECT_NE(w.notes.back().find("[2, 6)"), std::string::npos) << w.notes.back();
}

TEST(TraceWindow, SpeedupCompressesArrivalsAndKeepsTheRequests) {
  Workload base = trace_workload("burstgpt.csv");
  Workload w = trace_workload("burstgpt.csv");
  WorkloadOverrides o;
  o.trace_speedup = 4;
  apply_overrides(w, o);
  const auto a = base.generate(), b = w.generate();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i].arrival_s, a[i].arrival_s / 4, 1e-9);
    EXPECT_EQ(b[i].prompt_tokens, a[i].prompt_tokens);
  }
  EXPECT_NEAR(w.rate_rps, base.rate_rps * 4, 1e-9 * w.rate_rps);
  // Window then speed-up, and --requests below the window's count.
  Workload c = trace_workload("burstgpt.csv");
  o.trace_window = parse_trace_window("100:");
  o.num_requests = 3;
  apply_overrides(c, o);
  EXPECT_EQ(c.num_requests, 3);
}

TEST(TraceWindow, MistakesNameTheOption) {
  auto refusal = [](Workload w, const WorkloadOverrides& o) {
    try {
      apply_overrides(w, o);
    } catch (const InputError& e) {
      return e.field() + ": " + e.expected();
    }
    return std::string();
  };
  WorkloadOverrides win;
  win.trace_window = std::pair<double, double>{1e6, 2e6};
  EXPECT_NE(refusal(trace_workload("burstgpt.csv"), win).find("--trace-window: a window holding requests"),
            std::string::npos);
  win.trace_window = std::pair<double, double>{0, 10};
  EXPECT_NE(refusal(load_workload(resolve_workload_path("chat")), win).find("--trace-window: a workload whose arrivals"),
            std::string::npos);
  WorkloadOverrides fast;
  fast.trace_speedup = 2;
  fast.rate_rps = 5;
  EXPECT_NE(refusal(trace_workload("burstgpt.csv"), fast).find("--trace-speedup: either"), std::string::npos);
  fast.rate_rps = 0;
  fast.trace_speedup = std::nan("");
  EXPECT_NE(refusal(trace_workload("burstgpt.csv"), fast).find("--trace-speedup: a factor"), std::string::npos);
  for (const char* bad : {"10", "5:5", "6:2", "a:b", "-1:3", "1:2:3", "nan:4"}) {
    InputError e = expect_input_error([&] { parse_trace_window(bad); });
    EXPECT_EQ(e.field(), "--trace-window") << bad;
  }
  EXPECT_EQ(parse_trace_window(":30").first, 0.0);
  EXPECT_TRUE(std::isinf(parse_trace_window("30:").second));
}

TEST(JsonTrace, StreamedReaderNamesElementAndKey) {
  // Unknown keys (with nested values) are passed over; the rows are read as before.
  Trace t = parse_trace(R"({"source": {"a": [1, {"b": 2}]}, "requests": [
      {"timestamp_s": 0, "prompt_tokens": 10, "output_tokens": 2, "meta": {"user": [1, 2]}},
      {"timestamp_s": 0.5, "prompt_tokens": 20, "output_tokens": 3}], "count": 2})",
                        "t.json");
  ASSERT_EQ(t.timestamps_s.size(), 2u);
  EXPECT_EQ(t.prompt_tokens[1], 20);
  auto field_of = [](const char* text) {
    try {
      parse_trace(text, "t.json");
    } catch (const InputError& e) {
      return e.field() + ": " + e.expected();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(field_of(R"({"requests": [{"timestamp_s": 0}, {"timestamp_s": "1"}]})").rfind("requests/1/timestamp_s: expected a number", 0), 0u);
  EXPECT_EQ(field_of(R"([{"timestamp_s": 0, "prompt_tokens": 2.5}])").rfind("0/prompt_tokens: expected a positive integer", 0), 0u);
  EXPECT_EQ(field_of(R"([{"timestamp_s": 0}, {"prompt_tokens": 3}])").rfind("1/timestamp_s: required field is missing", 0), 0u);
  EXPECT_EQ(field_of(R"([{"timestamp_s": 0}, 7])").rfind("1: expected an object", 0), 0u);
  EXPECT_EQ(field_of(R"({"rows": []})").rfind("requests: required field is missing", 0), 0u);
  EXPECT_EQ(field_of(R"({"requests": {}})").rfind("requests: expected an array", 0), 0u);
  EXPECT_EQ(field_of(R"([{"timestamp_s": 0, "output_tokens": 200000000}])").rfind("0/output_tokens: at most", 0), 0u);
  EXPECT_NE(field_of(R"([{"timestamp_s": 0}, )").find("malformed JSON"), std::string::npos);
  EXPECT_NE(field_of(R"([{"timestamp_s": 1e999}])").find("malformed JSON"), std::string::npos);
  std::string deep = "[{\"x\": ";
  for (int i = 0; i < 100; ++i) deep += "[";
  EXPECT_NE(field_of(deep.c_str()).find("nested deeper than 64"), std::string::npos);
}

}  // namespace
}  // namespace peerplan
