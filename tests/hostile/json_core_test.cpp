// Hostile inputs for the core JSON reader (planner/core/json_in) that every loader uses: each must
// end in an InputError that names the file (and the field, where there is one) and says what was
// expected.
#include <cmath>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/core/json_in.hpp"
#include "tests/hostile/hostile_support.hpp"

using peerplan::InputError;
using peerplan::JsonIn;
using peerplan::json;
using peerplan::hostile::ScratchDir;

namespace {

// Loads `path` and returns the InputError it must throw (fails the test if it throws anything else).
InputError load_error(const std::string& path, const peerplan::FileKind& kind = peerplan::file_kind::kAny) {
  try {
    (void)peerplan::load_json_file(path, kind);
  } catch (const InputError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError naming " << path << ", got another exception: " << e.what();
    return InputError(path, "", "<wrong exception>");
  }
  ADD_FAILURE() << "expected InputError for " << path << ", but the file was accepted";
  return InputError(path, "", "<accepted>");
}

TEST(JsonCoreHostile, EmptyFileSaysEmptyAndNamesTheFile) {
  ScratchDir d;
  auto e = load_error(d.write("config.json", ""));
  EXPECT_EQ(e.file(), (d / "config.json").string());
  EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
}

TEST(JsonCoreHostile, WhitespaceOnlyFileCountsAsEmpty) {
  ScratchDir d;
  auto e = load_error(d.write("w.json", " \n\t\r\n  "));
  EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
}

TEST(JsonCoreHostile, TruncatedFileGivesLineAndColumn) {
  ScratchDir d;
  // Cut mid-array on line 3: the message must point at line 3 so the user can open the file there.
  auto e = load_error(d.write("t.json", "{\n  \"gpus\": [\n    {\"id\": 0, \"memory_bytes\": 1"));
  EXPECT_EQ(e.file(), (d / "t.json").string());
  EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
}

TEST(JsonCoreHostile, MissingFileSaysSo) {
  ScratchDir d;
  auto e = load_error((d / "nope.json").string());
  EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
}

TEST(JsonCoreHostile, DirectoryInsteadOfFileIsNotCalledEmpty) {
  // `--model models/llm/x` instead of `.../config.json` is an easy slip; "file is empty" misled
  // (found 2026-11-30, fixed in 0075ba9).
  ScratchDir d;
  auto e = load_error(d.path().string());
  EXPECT_EQ(std::string(e.what()).find("empty"), std::string::npos)
      << "a directory is reported as an empty file: " << e.what();
}

TEST(JsonCoreHostile, TenThousandNestedArraysAreRefusedWithoutCrashing) {
  ScratchDir d;
  auto e = load_error(d.write("deep.json", peerplan::hostile::deep_array(10000)));
  EXPECT_NE(std::string(e.what()).find("nested deeper than"), std::string::npos) << e.what();
}

TEST(JsonCoreHostile, TenThousandNestedObjectsAreRefusedWithoutCrashing) {
  ScratchDir d;
  auto e = load_error(d.write("deep.json", peerplan::hostile::deep_object(10000)));
  EXPECT_NE(std::string(e.what()).find("nested deeper than"), std::string::npos) << e.what();
}

TEST(JsonCoreHostile, OverflowingNumberIsAnInputError) {
  // 1e999 is not representable: nlohmann throws out_of_range.406, which the reader must turn into
  // an InputError naming the file. Found by fuzz_json_in 2026-11-30, fixed in ea85f22.
  ScratchDir d;
  auto e = load_error(d.write("n.json", "{\"hidden_size\": 1e999}"));
  EXPECT_EQ(e.file(), (d / "n.json").string());
}

TEST(JsonCoreHostile, NanLiteralIsASyntaxError) {
  ScratchDir d;
  auto e = load_error(d.write("n.json", "{\"hbm_gbps\": NaN}"));
  EXPECT_NE(std::string(e.what()).find("malformed JSON at line 1"), std::string::npos) << e.what();
}

TEST(JsonCoreHostile, NanAsAStringIsRefusedByTypedGettersNamingTheField) {
  json j = peerplan::parse_json_text(R"({"gpu": {"hbm_gbps": "NaN", "memory_bytes": "inf"}})", "m.json");
  JsonIn gpu = JsonIn(j, "m.json").object("gpu");
  try {
    (void)gpu.positive("hbm_gbps");
    FAIL() << "\"NaN\" accepted as a number";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "m.json");
    EXPECT_EQ(e.field(), "gpu/hbm_gbps");
    EXPECT_NE(std::string(e.what()).find("expected a number"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)gpu.positive_int("memory_bytes"), InputError);
}

TEST(JsonCoreHostile, NegativeAndZeroAreRefusedByPositiveGetters) {
  json j = peerplan::parse_json_text(R"({"a": 0, "b": -1, "c": -0.0, "d": 1e-320})", "x.json");
  JsonIn r(j, "x.json");
  EXPECT_THROW((void)r.positive("a"), InputError);
  EXPECT_THROW((void)r.positive("b"), InputError);
  EXPECT_THROW((void)r.positive("c"), InputError);
  EXPECT_GT(r.positive("d"), 0.0);  // denormal but positive: accepted, the loader bounds it if it must
  EXPECT_THROW((void)r.nonnegative("b"), InputError);
  EXPECT_THROW((void)r.positive_int("a"), InputError);
}

TEST(JsonCoreHostile, IntegersTooLargeOrFractionalAreRefused) {
  json j = peerplan::parse_json_text(R"({"u": 18446744073709551615, "f": 2.5, "big": 1e30})", "x.json");
  JsonIn r(j, "x.json");
  EXPECT_THROW((void)r.integer("u"), InputError);
  EXPECT_THROW((void)r.integer("f"), InputError);
  EXPECT_THROW((void)r.integer("big"), InputError);
}

TEST(JsonCoreHostile, WrongTypesNameTheFieldAndTheTypeFound) {
  json j = peerplan::parse_json_text(R"({"gpus": {"0": 1}, "name": 7, "p2p": "yes"})", "m.json");
  JsonIn r(j, "m.json");
  try {
    (void)r.array("gpus");
    FAIL() << "object accepted as an array";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "gpus");
    EXPECT_NE(std::string(e.what()).find("found an object"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)r.str("name"), InputError);
  EXPECT_THROW((void)r.boolean("p2p"), InputError);
}

TEST(JsonCoreHostile, InvalidUtf8AndNulBytesAreSyntaxErrors) {
  ScratchDir d;
  (void)load_error(d.write("u.json", std::string("{\"name\": \"\xff\xfe\"}")));
  // A NUL inside the document (a file cut by a crash and zero-filled) must not parse. (nlohmann
  // treats NUL as end of input, so NUL padding AFTER a complete document is accepted: harmless.)
  (void)load_error(d.write("z.json", std::string("{\"name\": \"ab\0cd\"}", 17)));
  (void)load_error(d.write("z2.json", std::string("{\"name\": 1\0\0\0\0", 15)));
}

TEST(JsonCoreHostile, HundredMegabyteFileIsHandledAndTheFieldIsNamed) {
  // Generated here, never committed: a 100 MB string field, then a wrong-typed field after it.
  // Read as a metrics file (128 MiB cap): within the cap, the parser must cope.
  ScratchDir d;
  std::string big = "{\"padding\": \"" + std::string(100u << 20, 'x') + "\", \"hidden_size\": \"big\"}";
  std::string path = d.write("huge.json", big);
  big.clear();
  big.shrink_to_fit();
  json j = peerplan::load_json_file(path, peerplan::file_kind::kMetrics);
  try {
    (void)JsonIn(j, path).positive_int("hidden_size");
    FAIL() << "string accepted as an integer";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.field(), "hidden_size");
  }
}

TEST(JsonCoreHostile, AHundredMegabyteFileOverItsKindsCapIsRefusedBeforeParsing) {
  // The same file as a model config (16 MiB cap): refused by its size, naming size and cap.
  ScratchDir d;
  std::string path = d.write("config.json", "{");
  ASSERT_EQ(truncate(path.c_str(), 100LL << 20), 0);
  auto e = load_error(path, peerplan::file_kind::kModelConfig);
  EXPECT_NE(std::string(e.what()).find("100.0 MiB (104857600 bytes), over the 16.0 MiB cap"), std::string::npos) << e.what();
}

TEST(JsonCoreHostile, HundredMegabyteTruncatedFileGivesAPosition) {
  ScratchDir d;
  std::string big = "[" ;
  big.reserve(100u << 20);
  while (big.size() < (100u << 20)) big += "\"abcdefghijklmnopqrstuvwxyz0123456789\",\n";
  std::string path = d.write("huge.json", big);  // never closed
  big.clear();
  big.shrink_to_fit();
  auto e = load_error(path, peerplan::file_kind::kMetrics);  // within its 128 MiB cap
  EXPECT_NE(std::string(e.what()).find("malformed JSON at line"), std::string::npos) << std::string(e.what()).substr(0, 300);
}

}  // namespace
