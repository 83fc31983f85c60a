// Tokenizer behaviour on small hand-made vocabularies: merge order by rank (not position),
// leftmost tie-breaking, longest literal match, parse_special, BOS/EOS, error messages for
// invalid UTF-8 / out-of-range ids / unknown pre-tokenizers, and the streaming decoder's
// handling of characters split across tokens.
#include <gtest/gtest.h>

#include <thread>

#include "text/pretokenizer.h"
#include "ds/tokenizer.h"

namespace ds {
namespace {

// GPT-2's byte alphabet, written here from its definition (independent of the library).
std::string byte_char(int b) {
  int cp = b;
  if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80)
    s += static_cast<char>(cp);
  else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// ids 0..255: the bytes; then merged tokens and literals at known ids.
enum : int32_t { LL = 256, HE, HELL, HELLO, SP_W, EL, BOS, EOS, U_SHORT, U_LONG, C_SHORT, C_LONG };

TokenizerVocab small_vocab() {
  TokenizerVocab v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_char(b));
  v.tokens.insert(v.tokens.end(), {"ll", "he", "hell", "hello", byte_char(' ') + "w", "el", "<s>", "</s>", "<u>",
                                   "<uu>", "<|a|>", "<|ab|>"});
  v.types.assign(v.tokens.size(), TokenType::kNormal);
  v.types[BOS] = v.types[EOS] = v.types[C_SHORT] = v.types[C_LONG] = TokenType::kControl;
  v.types[U_SHORT] = v.types[U_LONG] = TokenType::kUserDefined;
  v.merges = {"l l", "h e", "e l", "he ll", "hell o", byte_char(' ') + " w"};
  v.pre = "deepseek-v3";
  v.bos = BOS;
  v.eos = EOS;
  return v;
}

std::unique_ptr<Tokenizer> make(TokenizerVocab v = small_vocab(), TokenizerOptions o = {}) {
  auto t = Tokenizer::from_vocab(std::move(v), o);
  EXPECT_TRUE(t) << t.message();
  return t ? std::move(t).value() : nullptr;
}

std::vector<int32_t> ids(const Tokenizer& t, std::string_view s, bool bos = false, bool special = true) {
  auto r = t.encode(s, bos, special);
  EXPECT_TRUE(r) << r.message();
  return r ? r.value() : std::vector<int32_t>{};
}

TEST(TokenizerUnit, MergesFollowRankNotPosition) {
  auto t = make();
  EXPECT_EQ(ids(*t, "hello"), (std::vector<int32_t>{HELLO}));
  // "e l" (rank 2) is leftmost but "l l" (rank 0) fires first.
  EXPECT_EQ(ids(*t, "ell"), (std::vector<int32_t>{'e', LL}));
  // Equal ranks: the leftmost pair merges first.
  EXPECT_EQ(ids(*t, "lll"), (std::vector<int32_t>{LL, 'l'}));
  EXPECT_EQ(ids(*t, "hello world"), (std::vector<int32_t>{HELLO, SP_W, 'o', 'r', 'l', 'd'}));
}

TEST(TokenizerUnit, LongWordsAreLinearNotQuadratic) {
  auto t = make();
  const std::string word(200000, 'l');
  auto r = ids(*t, word);
  ASSERT_EQ(r.size(), 100000u);
  for (int32_t id : r) ASSERT_EQ(id, LL);
}

TEST(TokenizerUnit, LiteralTokensLongestMatch) {
  auto t = make();
  EXPECT_EQ(ids(*t, "a<uu>b<u>c"), (std::vector<int32_t>{'a', U_LONG, 'b', U_SHORT, 'c'}));
  EXPECT_EQ(ids(*t, "<|ab|><|a|>"), (std::vector<int32_t>{C_LONG, C_SHORT}));
  EXPECT_EQ(ids(*t, "<s>hello</s>"), (std::vector<int32_t>{BOS, HELLO, EOS}));
  // parse_special off: control tokens are text; user-defined ones stay literal.
  auto off = ids(*t, "<s><u>", false, false);
  EXPECT_EQ(off.back(), U_SHORT);
  EXPECT_EQ(off.size(), 4u);  // '<' 's' '>' (no merges for them) + <u>
  EXPECT_EQ(t->decode(off).value(), "<s><u>");
}

TEST(TokenizerUnit, BosAndEosFollowTheFileFlags) {
  auto t = make();
  EXPECT_EQ(ids(*t, "he", true), (std::vector<int32_t>{BOS, HE}));
  auto v = small_vocab();
  v.add_bos = false;
  v.add_eos = true;
  auto t2 = make(v);
  EXPECT_EQ(ids(*t2, "he", true), (std::vector<int32_t>{HE, EOS}));
  EXPECT_EQ(ids(*t2, "he", false), (std::vector<int32_t>{HE}));
  EXPECT_TRUE(t2->is_eog(EOS));
  EXPECT_FALSE(t2->is_eog(BOS));
}

TEST(TokenizerUnit, InvalidUtf8IsAClearError) {
  auto t = make();
  for (std::string bad : {std::string("abc\xFF"), std::string("abc\xC3"), std::string("abc\xC0\x80"),
                          std::string("abc\xED\xA0\x80"), std::string("abc\xF4\x90\x80\x80")}) {
    auto r = t->encode(bad, false);
    ASSERT_FALSE(r);
    EXPECT_NE(r.message().find("not valid UTF-8"), std::string::npos) << r.message();
    EXPECT_NE(r.message().find("byte offset 3"), std::string::npos) << r.message();
  }
  EXPECT_TRUE(t->encode("", false));
  EXPECT_TRUE(ids(*t, "").empty());
}

TEST(TokenizerUnit, DecodeRejectsOutOfRangeIds) {
  auto t = make();
  const int32_t bad[] = {HE, 999999};
  auto r = t->decode(bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("999999"), std::string::npos) << r.message();
  const int32_t neg[] = {-1};
  EXPECT_FALSE(t->decode(neg));
  EXPECT_EQ(t->piece(999999), "");
}

TEST(TokenizerUnit, UnknownPreTokenizerNamesItAndCanBeForced) {
  auto v = small_vocab();
  v.pre = "mystery-pre";
  auto r = Tokenizer::from_vocab(v);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("mystery-pre"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("deepseek-v3"), std::string::npos) << r.message();  // lists known
  v.pre = "";  // older files have no tokenizer.ggml.pre
  auto missing = Tokenizer::from_vocab(v);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("tokenizer.ggml.pre"), std::string::npos) << missing.message();
  auto forced = Tokenizer::from_vocab(v, TokenizerOptions{.force_pre = "deepseek-llm"});
  ASSERT_TRUE(forced) << forced.message();
  EXPECT_EQ((*forced)->pre_name(), "deepseek-llm");
}

TEST(TokenizerUnit, BadVocabularyIsRejected) {
  auto v = small_vocab();
  v.types.pop_back();
  EXPECT_FALSE(Tokenizer::from_vocab(v));
  v = small_vocab();
  v.bos = 100000;
  auto r = Tokenizer::from_vocab(v);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("bos_token_id"), std::string::npos) << r.message();
  v = small_vocab();
  v.merges.push_back("nospace");
  EXPECT_FALSE(Tokenizer::from_vocab(v));
}

TEST(TokenizerUnit, StreamDecoderHoldsBackSplitCharacters) {
  auto t = make();
  StreamDecoder d(*t);
  // U+00E9 (C3 A9) and U+1F600 (F0 9F 98 80) arrive one byte token at a time.
  EXPECT_EQ(d.push(0xC3), "");
  EXPECT_EQ(d.push(0xA9), "\xC3\xA9");
  EXPECT_EQ(d.push(0xF0), "");
  EXPECT_EQ(d.push(0x9F), "");
  EXPECT_EQ(d.push(0x98), "");
  EXPECT_EQ(d.push(0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(d.push('a'), "a");
  // A byte that can never start a character comes out as U+FFFD, not raw.
  EXPECT_EQ(d.push(0xFF), "\xEF\xBF\xBD");
  // An unfinished character at the end is flushed as U+FFFD.
  EXPECT_EQ(d.push(0xE4), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(d.flush(), "");
}

TEST(TokenizerUnit, Utf8Helpers) {
  EXPECT_EQ(utf8_find_invalid("abc"), std::nullopt);
  EXPECT_EQ(utf8_find_invalid("a\x80"), std::optional<size_t>(1));
  EXPECT_EQ(utf8_complete_prefix("ab\xE4\xB8"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE4\xB8\xAD"), 5u);
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);  // invalid, not pending: not held back
}

TEST(TokenizerUnit, ConcurrentEncodesAgree) {
  auto t = make();
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "hello world hell ell lll <u> ";
  const auto expected = ids(*t, text);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      auto r = t->encode(text, false);
      ok[static_cast<size_t>(k)] = r && r.value() == expected;
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) EXPECT_TRUE(ok[static_cast<size_t>(k)]) << k;
}

std::vector<std::string> pieces(std::string_view pre, std::string_view text) {
  auto p = PreTokenizer::create(pre);
  EXPECT_TRUE(p) << p.message();
  std::vector<std::string_view> out;
  (*p)->split(text, out);
  return std::vector<std::string>(out.begin(), out.end());
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, KnownNamesAndFlags) {
  for (const auto& name : PreTokenizer::names()) EXPECT_TRUE(PreTokenizer::create(name)) << name;
  EXPECT_EQ(PreTokenizer::names().size(), 6u);
  EXPECT_TRUE(PreTokenizer::create("qwen2").value()->nfc());
  EXPECT_TRUE(PreTokenizer::create("deepseek-r1-qwen").value()->nfc());
  EXPECT_FALSE(PreTokenizer::create("deepseek-v3").value()->nfc());
  EXPECT_TRUE(PreTokenizer::create("llama-bpe").value()->ignore_merges());
  EXPECT_FALSE(PreTokenizer::create("gpt2"));
}

TEST(PreTokenizer, PatternsSplitAsPublished) {
  // Llama 3: digits in runs of at most three; contractions case-insensitive.
  EXPECT_EQ(pieces("llama-bpe", "12345 I'M"), (Pieces{"123", "45", " I", "'M"}));
  // Qwen2: single digits.
  EXPECT_EQ(pieces("qwen2", "x=12"), (Pieces{"x", "=", "1", "2"}));
  // DeepSeek-V3: digits in threes, CJK runs isolated, punctuation + letters joined.
  EXPECT_EQ(pieces("deepseek-v3", "1234你好.foo"), (Pieces{"123", "4", "你好", ".foo"}));
  // '~' is a symbol (\p{S}): " ~~~" is one piece.
  EXPECT_EQ(pieces("deepseek-v3", "a ~~~"), (Pieces{"a", " ~~~"}));
  // deepseek-coder: single digits, letters with one optional leading space.
  EXPECT_EQ(pieces("deepseek-coder", "ab  cd 12"), (Pieces{"ab", " ", " cd", " ", "1", "2"}));
  // deepseek-llm: U+3000 belongs to the punctuation range; not rewritten to a space.
  EXPECT_EQ(pieces("deepseek-llm",
                   "a\xE3\x80\x80"
                   "b"),
            (Pieces{"a", "\xE3\x80\x80", "b"}));
}

}  // namespace
}  // namespace ds
