// StopTextStream: stop strings are cut exactly, text that may start a stop string is held
// back, UTF-8 characters are never split, and streaming pieces concatenate to the whole.
#include <gtest/gtest.h>

#include "server/text_stream.h"

namespace ds {
namespace {

std::string feed(StopTextStream& s, const std::vector<std::string>& pieces, std::vector<std::string>* out = nullptr) {
  std::string all;
  for (const auto& p : pieces) {
    std::string o = s.push(p);
    EXPECT_TRUE(utf8_valid(o)) << "invalid UTF-8 sent for piece '" << p << "'";
    if (out) out->push_back(o);
    all += o;
  }
  return all + s.flush();
}

TEST(TextStream, HoldsBackStopPrefixAndCutsAtStop) {
  StopTextStream s({"STOP", "\n\n"});
  std::vector<std::string> out;
  EXPECT_EQ(feed(s, {"hello ", "ST", "O", "P and more"}, &out), "hello ");
  EXPECT_EQ(out[0], "hello ");
  EXPECT_EQ(out[1], "");  // "ST" may start STOP
  EXPECT_EQ(out[2], "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.stop_word(), "STOP");
}

TEST(TextStream, ReleasesFalseAlarm) {
  StopTextStream s({"STOP"});
  std::vector<std::string> out;
  EXPECT_EQ(feed(s, {"a S", "T", "x"}, &out), "a STx");
  EXPECT_EQ(out[0], "a ");
  EXPECT_EQ(out[2], "STx");
  EXPECT_FALSE(s.stopped());
}

TEST(TextStream, EarliestStopWins) {
  StopTextStream s({"world", "lo w"});
  EXPECT_EQ(feed(s, {"hello world"}), "hel");
  EXPECT_EQ(s.stop_word(), "lo w");
}

TEST(TextStream, NeverSplitsUtf8) {
  StopTextStream s({});
  std::vector<std::string> out;
  // "é" = C3 A9, "€" = E2 82 AC, "😀" = F0 9F 98 80, fed one byte at a time.
  const std::string text =
      "a\xC3\xA9"
      "b\xE2\x82\xAC\xF0\x9F\x98\x80";
  std::vector<std::string> bytes;
  for (char c : text) bytes.push_back(std::string(1, c));
  EXPECT_EQ(feed(s, bytes, &out), text);
  EXPECT_EQ(out[1], "");
  EXPECT_EQ(out[2], "\xC3\xA9");
  EXPECT_EQ(out[4], "");
  EXPECT_EQ(out[5], "");
  EXPECT_EQ(out[6], "\xE2\x82\xAC");
}

TEST(TextStream, InvalidBytesBecomeReplacementCharacter) {
  StopTextStream s({});
  EXPECT_EQ(feed(s, {"a\xFF", "b\xC3"}),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
  EXPECT_EQ(utf8_sanitize("\xED\xA0\x80z"), "\xEF\xBF\xBDz");  // surrogate: one U+FFFD
  EXPECT_EQ(utf8_sanitize("\x80\x80\xE7\xA5z"), "\xEF\xBF\xBD\xEF\xBF\xBDz");
  EXPECT_FALSE(utf8_valid("\xC0\xAF"));  // overlong
  EXPECT_TRUE(utf8_valid("\xF4\x8F\xBF\xBF"));
}

TEST(TextStream, StopStringWithMultibyteText) {
  StopTextStream s({"\xC3\xA9!"});
  EXPECT_EQ(feed(s, {"caf", "\xC3", "\xA9", "!", "x"}), "caf");
  EXPECT_TRUE(s.stopped());
}

}  // namespace
}  // namespace ds
