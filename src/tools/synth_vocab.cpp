// Synth tokenizer; see synth_vocab.h. Token layout of the trained vocabulary:
// [0, 256) byte tokens, then one token per merge, then the special tokens, then padding.
#include "tools/synth_vocab.h"

#include "gguf/gguf_file.h"
#include "tools/bpe_trainer.h"
#include "tools/synth_corpus.h"
#include "util/strings.h"

namespace ds::cli {
namespace {

constexpr int kMaxMerges = 1500;
constexpr int32_t kTypeNormal = 1, kTypeControl = 3, kTypeUserDefined = 4, kTypeUnused = 5;

// A DeepSeek-V3 style chat template (written for ds-server): system text after BOS,
// then <｜User｜>/<｜Assistant｜> turns, assistant turns closed by EOS.
const char* const kChatTemplate =
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{% set ns = namespace(system='') %}"
    "{% for m in messages %}{% if m['role'] == 'system' %}{% set ns.system = m['content'] %}{% endif %}{% endfor %}"
    "{{ bos_token }}{{ ns.system }}"
    "{% for m in messages %}"
    "{% if m['role'] == 'user' %}{{ '<\xEF\xBD\x9CUser\xEF\xBD\x9C>' + m['content'] }}"
    "{% elif m['role'] == 'assistant' %}"
    "{{ '<\xEF\xBD\x9C"
    "Assistant\xEF\xBD\x9C>' + m['content'] + '<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<\xEF\xBD\x9C"
    "Assistant\xEF\xBD\x9C>' }}{% endif %}";

Result<int64_t> copy_tokenizer(GgufWriter* w, const std::string& path) {
  auto f = GgufFile::open(path);
  if (!f) return f.status();
  int64_t n_tokens = -1;
  for (const auto& [key, value] : (*f)->metadata()) {
    if (!starts_with(key, "tokenizer.")) continue;
    w->set(key, value);
    if (key == "tokenizer.ggml.tokens") {
      if (!value.is_array() || value.elem_type != GgufValueType::kString) {
        return Status::error(path + ": tokenizer.ggml.tokens is not an array of strings");
      }
      n_tokens = static_cast<int64_t>(value.arr_str.size());
    }
  }
  if (n_tokens <= 0) return Status::error(path + ": no tokenizer.ggml.tokens (not a vocabulary file?)");
  return n_tokens;
}

}  // namespace

Result<int64_t> synth_tokenizer(GgufWriter* w, const std::string& vocab_path, int64_t pad_to) {
  if (!vocab_path.empty()) return copy_tokenizer(w, vocab_path);
  BpeVocab v = train_byte_bpe(synth_bpe_corpus(), kMaxMerges);
  std::vector<int32_t> types(v.tokens.size(), kTypeNormal);
  auto special = [&](std::string text, int32_t type) {
    v.tokens.push_back(std::move(text));
    types.push_back(type);
    return static_cast<uint32_t>(v.tokens.size() - 1);
  };
  const uint32_t bos = special(
      "<\xEF\xBD\x9C"
      "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
      kTypeControl);
  const uint32_t eos = special(
      "<\xEF\xBD\x9C"
      "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
      kTypeControl);
  special("<\xEF\xBD\x9CUser\xEF\xBD\x9C>", kTypeUserDefined);
  special(
      "<\xEF\xBD\x9C"
      "Assistant\xEF\xBD\x9C>",
      kTypeUserDefined);
  special("<think>", kTypeUserDefined);
  special("</think>", kTypeUserDefined);
  for (int64_t i = static_cast<int64_t>(v.tokens.size()); i < pad_to; ++i) {
    special("[PAD" + std::to_string(i) + "]", kTypeUnused);
  }
  const int64_t n = static_cast<int64_t>(v.tokens.size());
  w->set("tokenizer.ggml.model", gguf_str("gpt2"));
  w->set("tokenizer.ggml.pre", gguf_str("deepseek-llm"));
  w->set("tokenizer.ggml.tokens", gguf_arr_str(std::move(v.tokens)));
  w->set("tokenizer.ggml.token_type", gguf_arr_i32(types));
  w->set("tokenizer.ggml.merges", gguf_arr_str(std::move(v.merges)));
  w->set("tokenizer.ggml.bos_token_id", gguf_u32(bos));
  w->set("tokenizer.ggml.eos_token_id", gguf_u32(eos));
  w->set("tokenizer.ggml.padding_token_id", gguf_u32(eos));
  w->set("tokenizer.ggml.add_bos_token", gguf_bool(true));
  w->set("tokenizer.ggml.add_eos_token", gguf_bool(false));
  w->set("tokenizer.chat_template", gguf_str(kChatTemplate));
  return n;
}

}  // namespace ds::cli
