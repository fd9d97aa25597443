// The one escaper for text from input files (planner/core/text.hpp).
#include <gtest/gtest.h>

#include "planner/core/text.hpp"

namespace peerplan {
namespace {

TEST(EscapeControl, PlainTextAndUtf8PassUnchanged) {
  EXPECT_EQ(escape_control("llama-3.1-8b tp2[0,1]"), "llama-3.1-8b tp2[0,1]");
  EXPECT_EQ(escape_control("caf\xC3\xA9 \xE2\x98\x85"), "caf\xC3\xA9 \xE2\x98\x85") << "é and ★ are text";
}

TEST(EscapeControl, ControlCharactersAreShownNotSent) {
  EXPECT_EQ(escape_control("a\x1b[2Jb"), "a\\x1b[2Jb") << "ESC of a clear-screen sequence";
  EXPECT_EQ(escape_control("x\x07y\x7f"), "x\\x07y\\x7f") << "BEL and DEL";
  EXPECT_EQ(escape_control("a\nb\tc\rd"), "a\\x0ab\\x09c\\x0dd") << "a name holds no layout";
  EXPECT_EQ(escape_control("a\nb\tc\rd", true), "a\nb\tc\rd") << "a document keeps its layout";
  EXPECT_EQ(escape_control("\xC2\x9B" "31m"), "\\u009b31m") << "C1 CSI, UTF-8 encoded";
  EXPECT_EQ(escape_control("\x9B" "31m"), "\\x9b31m") << "a lone 8-bit CSI is not UTF-8";
  EXPECT_EQ(escape_control("\xE2\x98"), "\\xe2\\x98") << "a truncated sequence";
}

TEST(EscapeControl, AStreamSplitInsideACharacterGivesTheSameText) {
  const std::string text = "\xE2\x98\x85 \xC2\x9B\x1b";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ControlEscaper e(false);
    std::string out;
    e.feed(std::string_view(text).substr(0, cut), out);
    e.feed(std::string_view(text).substr(cut), out);
    e.finish(out);
    EXPECT_EQ(out, escape_control(text)) << "cut at " << cut;
  }
}

}  // namespace
}  // namespace peerplan
