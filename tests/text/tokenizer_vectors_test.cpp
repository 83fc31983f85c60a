// The shared tokenizer vectors (../shared/tokenizer/README.md): every string of every .inp
// encodes (no BOS, special tokens parsed) to exactly the ids of the matching .out line; the
// ids decode back to the string (NFC of it for the normalizing qwen2 tokenizer, computed here
// with ICU directly); streaming decode one token at a time equals the full decode.
#include <gtest/gtest.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "gguf/gguf_file.h"
#include "ds/tokenizer.h"
#include "test_util.h"

namespace ds {
namespace {

constexpr size_t kStandardCases = 46;  // per README
constexpr size_t kExtraCases = 39;

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<std::string> split_on(const std::string& s, const std::string& sep) {
  std::vector<std::string> parts;
  size_t pos = 0;
  for (;;) {
    const size_t next = s.find(sep, pos);
    if (next == std::string::npos) {
      parts.push_back(s.substr(pos));
      return parts;
    }
    parts.push_back(s.substr(pos, next - pos));
    pos = next + sep.size();
  }
}

// Reads NAME.inp / NAME.out in binary mode. Each string is followed by the separator line, so
// the piece after the last separator is empty and is not a case.
std::vector<Case> load_cases(const std::string& base) {
  const std::string inp = test::read_file_text(base + ".inp");
  const std::string out = test::read_file_text(base + ".out");
  auto texts = split_on(inp, "\n__ggml_vocab_test__\n");
  EXPECT_TRUE(!texts.empty() && texts.back().empty()) << base << ".inp does not end with the separator";
  texts.pop_back();
  auto lines = split_on(out, "\n");
  EXPECT_TRUE(!lines.empty() && lines.back().empty()) << base << ".out does not end with a newline";
  lines.pop_back();
  EXPECT_EQ(texts.size(), lines.size()) << base << ": strings vs. id lines";
  std::vector<Case> cases;
  for (size_t i = 0; i < texts.size() && i < lines.size(); ++i) {
    Case c{texts[i], {}};
    std::istringstream in(lines[i]);
    for (int32_t id; in >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string escaped(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

// Expected round trip for a normalizing tokenizer: ICU's NFC of the input.
std::string icu_nfc(const std::string& s) {
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* n = unorm2_getNFCInstance(&err);
  std::vector<UChar> u(s.size() + 1), v(s.size() * 3 + 8);
  int32_t ul = 0;
  u_strFromUTF8(u.data(), static_cast<int32_t>(u.size()), &ul, s.data(), static_cast<int32_t>(s.size()), &err);
  int32_t vl = unorm2_normalize(n, u.data(), ul, v.data(), static_cast<int32_t>(v.size()), &err);
  std::string out(static_cast<size_t>(vl) * 3 + 4, '\0');
  int32_t ol = 0;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &ol, v.data(), vl, &err);
  EXPECT_TRUE(U_SUCCESS(err));
  out.resize(static_cast<size_t>(ol));
  return out;
}

const Tokenizer& tokenizer(const std::string& vocab) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[vocab];
  if (!slot) {
    auto file = GgufFile::open(test::shared_path("tokenizer/ggml-vocab-" + vocab + ".gguf"));
    if (!file) throw std::runtime_error(file.message());
    auto tok = Tokenizer::from_gguf(**file);
    if (!tok) throw std::runtime_error(tok.message());
    slot = std::move(tok).value();
  }
  return *slot;
}

// One test per vocabulary (each test is its own process under ctest, and loading a vocabulary
// is the expensive part): both files, all three checks.
struct VectorParam {
  const char* vocab;
  bool nfc;  // the tokenizer normalizes to NFC: decode gives the NFC form of the input
};

void check_encode(const Tokenizer& tok, const std::string& file, const std::vector<Case>& all) {
  size_t passed = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    auto got = tok.encode(all[i].text, /*add_bos=*/false);
    ASSERT_TRUE(got) << got.message();
    if (got.value() == all[i].ids) {
      ++passed;
      continue;
    }
    ADD_FAILURE() << file << " case " << i << ": " << escaped(all[i].text) << "\n  expected:" << join(all[i].ids)
                  << "\n  got:     " << join(got.value());
  }
  EXPECT_EQ(passed, all.size()) << file;
}

void check_round_trip(const Tokenizer& tok, bool nfc, const std::vector<Case>& all) {
  for (const auto& c : all) {
    auto ids = tok.encode(c.text, false);
    ASSERT_TRUE(ids);
    auto text = tok.decode(ids.value());
    ASSERT_TRUE(text) << text.message();
    const std::string expected = nfc ? icu_nfc(c.text) : c.text;
    EXPECT_EQ(text.value(), expected) << escaped(c.text);
    if (nfc) {
      EXPECT_EQ(tok.decode(c.ids).value(), expected) << "reference ids: " << escaped(c.text);
    }
  }
}

void check_streaming(const Tokenizer& tok, const std::vector<Case>& all) {
  for (const auto& c : all) {
    const std::string full = tok.decode(c.ids).value();
    StreamDecoder dec(tok);
    std::string streamed;
    for (int32_t id : c.ids) {
      const std::string part = dec.push(id);
      EXPECT_FALSE(utf8_find_invalid(part).has_value()) << "partial UTF-8 emitted: " << escaped(c.text);
      streamed += part;
    }
    streamed += dec.flush();
    EXPECT_EQ(streamed, full) << escaped(c.text);
  }
}

// Seeded random UTF-8 text that stresses the pre-tokenizers and literal matching: ASCII,
// whitespace runs, digits, CJK, Hangul, emoji, combining marks, control characters and pieces
// of special-token texts.
std::vector<Case> random_cases(uint32_t seed, size_t n) {
  static const char* atoms[] = {" ",
                                "  ",
                                "\t",
                                "\n",
                                "\r\n",
                                "a",
                                "Z",
                                "ing",
                                "'s",
                                "'LL",
                                "0",
                                "123",
                                "4567",
                                ".",
                                ",",
                                "!?",
                                "~",
                                "--",
                                "==>",
                                "(",
                                "]",
                                "{",
                                "\\",
                                "\"",
                                "中",
                                "文字",
                                "한국어",
                                "ひらがな",
                                "カタカナ",
                                "é",
                                "e\xCC\x81",
                                "\xCC\x88",
                                "ß",
                                "Ω",
                                "😀",
                                "👩‍💻",
                                "🇯🇵",
                                "\xE3\x80\x80",
                                "\xC2\xA0",
                                "\xE2\x80\x8B",
                                "\x01",
                                "\x7F",
                                "<",
                                "<｜",
                                "｜>",
                                "<｜User｜>",
                                "<|im_end|>",
                                "[PAD",
                                "<|EOT|>",
                                "ø",
                                "\xF0\x9F\x8F\xBB"};
  std::mt19937 rng(seed);
  std::vector<Case> cases(n);
  for (auto& c : cases) {
    const size_t len = rng() % 40;
    for (size_t k = 0; k < len; ++k) c.text += atoms[rng() % (sizeof(atoms) / sizeof(atoms[0]))];
  }
  return cases;
}

class TokenizerVectors : public ::testing::TestWithParam<VectorParam> {};

TEST_P(TokenizerVectors, EncodeRoundTripAndStream) {
  const Tokenizer& tok = tokenizer(GetParam().vocab);
  for (auto [suffix, n_cases] : {std::pair{"gguf", kStandardCases}, std::pair{"extra", kExtraCases}}) {
    const std::string file = std::string("tokenizer/ggml-vocab-") + GetParam().vocab + "." + suffix;
    const auto all = load_cases(test::shared_path(file));
    EXPECT_EQ(all.size(), n_cases) << file;
    check_encode(tok, file, all);
    check_round_trip(tok, GetParam().nfc, all);
    check_streaming(tok, all);
  }
  // Properties on random text (no reference ids): round trip, and streaming of the ids.
  auto random = random_cases(1234, 300);
  for (auto& c : random) c.ids = tok.encode(c.text, false).value();
  check_round_trip(tok, GetParam().nfc, random);
  check_streaming(tok, random);
}

INSTANTIATE_TEST_SUITE_P(Shared, TokenizerVectors,
                         ::testing::Values(VectorParam{"deepseek-llm", false}, VectorParam{"deepseek-coder", false},
                                           VectorParam{"deepseek-v3", false}, VectorParam{"qwen2", true}),
                         [](const auto& info) {
                           std::string n = info.param.vocab;
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

// Facts about the files the tokenizer must honour (README: metadata and special handling).
// Metadata and special-token handling on the real files (one process: loads are expensive).
TEST(TokenizerFiles, MetadataAndSpecialTokens) {
  const Tokenizer& v3 = tokenizer("deepseek-v3");
  const Tokenizer& qwen = tokenizer("qwen2");
  const Tokenizer& coder = tokenizer("deepseek-coder");
  EXPECT_EQ(v3.n_vocab(), 129280);
  EXPECT_EQ(v3.bos(), 0);
  EXPECT_EQ(v3.eos(), 1);
  EXPECT_EQ(v3.pre_name(), "deepseek-v3");
  EXPECT_TRUE(v3.is_special(0));
  EXPECT_TRUE(v3.is_eog(1));
  EXPECT_EQ(v3.find_token("<｜Assistant｜>"), std::optional<int32_t>(128804));
  EXPECT_FALSE(qwen.add_bos());
  EXPECT_TRUE(qwen.is_eog(151645));  // <|im_end|>
  EXPECT_TRUE(qwen.is_eog(151643));  // <|endoftext|>
  EXPECT_EQ(coder.bos(), 32013);
  EXPECT_TRUE(coder.add_bos());
  EXPECT_TRUE(coder.is_eog(32021));   // <|EOT|> (user-defined) ends an instruct answer
  EXPECT_FALSE(coder.is_eog(32019));  // <|User|>

  // BOS on request when the file asks for it; qwen2 files say add_bos_token = false.
  auto with = coder.encode("Hello", true).value();
  auto without = coder.encode("Hello", false).value();
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with[0], 32013);
  EXPECT_EQ(qwen.encode("Hello", true).value(), qwen.encode("Hello", false).value());

  // parse_special off: control tokens written in the text are plain text.
  const std::string text = "<｜User｜>hi";
  auto on = v3.encode(text, false, true).value();
  auto off = v3.encode(text, false, false).value();
  ASSERT_FALSE(on.empty());
  EXPECT_EQ(on[0], 128803);  // <｜User｜>
  EXPECT_GT(off.size(), on.size());
  for (int32_t id : off) EXPECT_FALSE(v3.is_special(id)) << id;
  EXPECT_EQ(v3.decode(off).value(), text);
  // User-defined tokens stay literal even with parse_special off (the reference's non-special
  // added tokens): deepseek-coder's <|EOT|> is user-defined.
  EXPECT_EQ(coder.encode("<|EOT|>", false, false).value(), std::vector<int32_t>{32021});

  // keep_special = false drops control tokens, in full and streaming decode.
  auto ids = v3.encode("<｜begin▁of▁sentence｜>Hi<｜end▁of▁sentence｜>", false).value();
  EXPECT_EQ(v3.decode(ids, true).value(), "<｜begin▁of▁sentence｜>Hi<｜end▁of▁sentence｜>");
  EXPECT_EQ(v3.decode(ids, false).value(), "Hi");
  StreamDecoder dec(v3, /*keep_special=*/false);
  std::string s;
  for (int32_t id : ids) s += dec.push(id);
  EXPECT_EQ(s + dec.flush(), "Hi");
}

// The reference models' prompt (../shared/refdata/README.md): tokenized with BOS by the
// reference into the `tokens` of each model's JSON.
TEST(TokenizerFiles, RefdataPromptTokens) {
  const std::string prompt = test::read_file_text(test::shared_path("refdata/prompt.txt"));
  for (const char* model :
       {"tiny-llama-Q4_K_M", "tiny-qwen2-Q5_K_S", "tiny-dsv2-Q4_K_M", "tiny-dsv2-legacy-Q4_K_M", "tiny-dsv3-Q4_K_M"}) {
    const auto meta =
        nlohmann::json::parse(test::read_file_text(test::shared_path(std::string("refdata/") + model + ".json")));
    const auto expected = meta.at("tokens").get<std::vector<int32_t>>();
    auto file = GgufFile::open(test::shared_path(std::string("refdata/") + model + ".gguf"));
    ASSERT_TRUE(file) << file.message();
    auto tok = Tokenizer::from_gguf(**file);
    ASSERT_TRUE(tok) << model << ": " << tok.message();
    auto got = (*tok)->encode(prompt, /*add_bos=*/true);
    ASSERT_TRUE(got) << got.message();
    EXPECT_EQ(got.value(), expected) << model << "\n  expected:" << join(expected)
                                     << "\n  got:     " << join(got.value());
  }
}

}  // namespace
}  // namespace ds
