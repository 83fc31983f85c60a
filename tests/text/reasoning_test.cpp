// ReasoningSplitter: R1 outputs split into reasoning and content, for whole texts (expected
// values by hand) and for every way of cutting the text into streamed chunks.
#include <gtest/gtest.h>

#include "text/chat_template.h"

namespace ds {
namespace {

struct SplitCase {
  std::string text;
  bool starts_in_reasoning;
  std::string reasoning, content;
};

const std::vector<SplitCase> kCases = {
    // Prompt ended with "<think>\n": output starts inside the reasoning.
    {"Let me add.\n</think>\n\nThe answer is 4.", true, "Let me add.\n", "The answer is 4."},
    // The model opens the tag itself.
    {"<think>\nhmm</think>Done", false, "\nhmm", "Done"},
    {"  <think>x</think>  y", false, "x", "y"},
    // No reasoning at all.
    {"Plain answer <b>bold</b>", false, "", "Plain answer <b>bold</b>"},
    {"<thin", false, "", "<thin"},
    // Unterminated reasoning stays reasoning.
    {"still thinking </thi", true, "still thinking </thi", ""},
    // A "</think>" inside the content is content.
    {"r</think>a </think> b", true, "r", "a </think> b"},
    {"", true, "", ""},
};

TEST(ReasoningSplitter, WholeText) {
  for (const auto& c : kCases) {
    auto d = ReasoningSplitter::split(c.text, c.starts_in_reasoning);
    EXPECT_EQ(d.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(d.content, c.content) << c.text;
  }
}

TEST(ReasoningSplitter, StreamingEqualsWholeForEveryChunkSize) {
  for (const auto& c : kCases) {
    for (size_t chunk = 1; chunk <= c.text.size() + 1; ++chunk) {
      ReasoningSplitter s(c.starts_in_reasoning);
      std::string reasoning, content;
      for (size_t pos = 0; pos < c.text.size(); pos += chunk) {
        auto d = s.push(std::string_view(c.text).substr(pos, chunk));
        reasoning += d.reasoning;
        content += d.content;
      }
      auto d = s.flush();
      EXPECT_EQ(reasoning + d.reasoning, c.reasoning) << c.text << " chunk " << chunk;
      EXPECT_EQ(content + d.content, c.content) << c.text << " chunk " << chunk;
    }
  }
}

TEST(ReasoningSplitter, HoldsBackOnlyPossibleTags) {
  ReasoningSplitter s(true);
  auto d = s.push("abc</th");
  EXPECT_EQ(d.reasoning, "abc");  // "</th" may be the closing tag: held
  d = s.push("ought");            // it was not
  EXPECT_EQ(d.reasoning, "</thought");
  d = s.push("</think>\n");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "");  // leading whitespace of the content is dropped
  d = s.push("ok");
  EXPECT_EQ(d.content, "ok");
}

}  // namespace
}  // namespace ds
