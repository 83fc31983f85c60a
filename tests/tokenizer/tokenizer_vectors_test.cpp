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
#include <sstream>

#include "gguf/gguf_file.h"
#include "model/tokenizer.h"
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

struct VectorParam {
  const char* vocab;
  const char* suffix;  // "gguf" or "extra"
  size_t n_cases;
  bool nfc;
};

class TokenizerVectors : public ::testing::TestWithParam<VectorParam> {
 protected:
  std::vector<Case> cases() const {
    const auto& p = GetParam();
    auto c = load_cases(test::shared_path(std::string("tokenizer/ggml-vocab-") + p.vocab + "." + p.suffix));
    EXPECT_EQ(c.size(), p.n_cases);
    return c;
  }
};

TEST_P(TokenizerVectors, EncodeMatchesReferenceIds) {
  const Tokenizer& tok = tokenizer(GetParam().vocab);
  size_t passed = 0;
  const auto all = cases();
  for (size_t i = 0; i < all.size(); ++i) {
    auto got = tok.encode(all[i].text, /*add_bos=*/false);
    ASSERT_TRUE(got) << got.message();
    if (got.value() == all[i].ids) {
      ++passed;
      continue;
    }
    ADD_FAILURE() << "case " << i << ": " << escaped(all[i].text) << "\n  expected:" << join(all[i].ids)
                  << "\n  got:     " << join(got.value());
  }
  EXPECT_EQ(passed, all.size());
}

TEST_P(TokenizerVectors, DecodeRoundTrips) {
  const Tokenizer& tok = tokenizer(GetParam().vocab);
  for (const auto& c : cases()) {
    auto ids = tok.encode(c.text, false);
    ASSERT_TRUE(ids);
    auto text = tok.decode(ids.value());
    ASSERT_TRUE(text) << text.message();
    const std::string expected = GetParam().nfc ? icu_nfc(c.text) : c.text;
    EXPECT_EQ(text.value(), expected) << escaped(c.text);
    if (GetParam().nfc) {
      EXPECT_EQ(tok.decode(c.ids).value(), expected) << "reference ids: " << escaped(c.text);
    }
  }
}

TEST_P(TokenizerVectors, StreamingDecodeEqualsFullDecode) {
  const Tokenizer& tok = tokenizer(GetParam().vocab);
  for (const auto& c : cases()) {
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

INSTANTIATE_TEST_SUITE_P(Shared, TokenizerVectors,
                         ::testing::Values(VectorParam{"deepseek-llm", "gguf", kStandardCases, false},
                                           VectorParam{"deepseek-llm", "extra", kExtraCases, false},
                                           VectorParam{"deepseek-coder", "gguf", kStandardCases, false},
                                           VectorParam{"deepseek-coder", "extra", kExtraCases, false},
                                           VectorParam{"deepseek-v3", "gguf", kStandardCases, false},
                                           VectorParam{"deepseek-v3", "extra", kExtraCases, false},
                                           VectorParam{"qwen2", "gguf", kStandardCases, true},
                                           VectorParam{"qwen2", "extra", kExtraCases, true}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.vocab) + "_" + info.param.suffix;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// Facts about the files the tokenizer must honour (README: metadata and special handling).
TEST(TokenizerFiles, MetadataIsRead) {
  const Tokenizer& v3 = tokenizer("deepseek-v3");
  EXPECT_EQ(v3.n_vocab(), 129280);
  EXPECT_EQ(v3.bos(), 0);
  EXPECT_EQ(v3.eos(), 1);
  EXPECT_EQ(v3.pre_name(), "deepseek-v3");
  EXPECT_TRUE(v3.is_special(0));
  EXPECT_TRUE(v3.is_eog(1));
  EXPECT_EQ(v3.find_token("<｜Assistant｜>"), std::optional<int32_t>(128804));
  const Tokenizer& qwen = tokenizer("qwen2");
  EXPECT_FALSE(qwen.add_bos());
  EXPECT_TRUE(qwen.is_eog(151645));  // <|im_end|>
  EXPECT_TRUE(qwen.is_eog(151643));  // <|endoftext|>
  const Tokenizer& coder = tokenizer("deepseek-coder");
  EXPECT_EQ(coder.bos(), 32013);
  EXPECT_TRUE(coder.add_bos());
}

TEST(TokenizerFiles, BosIsAddedOnRequest) {
  const Tokenizer& coder = tokenizer("deepseek-coder");
  auto with = coder.encode("Hello", true).value();
  auto without = coder.encode("Hello", false).value();
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with[0], 32013);
  // qwen2 files say add_bos_token = false: nothing is added.
  const Tokenizer& qwen = tokenizer("qwen2");
  EXPECT_EQ(qwen.encode("Hello", true).value(), qwen.encode("Hello", false).value());
}

TEST(TokenizerFiles, ParseSpecialOffTokenizesControlTokensAsText) {
  const Tokenizer& v3 = tokenizer("deepseek-v3");
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
  const Tokenizer& coder = tokenizer("deepseek-coder");
  EXPECT_EQ(coder.encode("<|EOT|>", false, false).value(), std::vector<int32_t>{32021});
}

TEST(TokenizerFiles, KeepSpecialFalseDropsControlTokens) {
  const Tokenizer& v3 = tokenizer("deepseek-v3");
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
