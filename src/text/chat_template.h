// Chat templates: built-in renderers for the DeepSeek chat formats (../shared/SPEC.md "Chat
// formats", docs/chat.md) instead of a Jinja interpreter. A file's tokenizer.chat_template is
// recognized exactly when it is one of the published DeepSeek templates (R1-Distill, V3.1,
// V3.2, V4, V4-Flash), else mapped by distinctive substrings with a warning, else rendered
// with the deepseek3 fallback and a warning; a user can override by name. The rendered prompt
// starts with the BOS text where the format has one, so it is tokenized with add_bos = false
// and parse_special = true.
//
// ReasoningSplitter separates R1-style output into reasoning (between <think> and </think>)
// and content, both for a whole text and incrementally while streaming.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ds/status.h"
#include "text/chat_input.h"
#include "text/tool_call_parser.h"

namespace ds {

class GgufFile;
class Tokenizer;

enum class ChatFormat {
  kDeepseek3,      // "deepseek3": V3 (and V2.5 files with the same markers)
  kDeepseekR1,     // "deepseek-r1": R1, R1-Distill-Qwen/Llama (<think>\n after the marker)
  kDeepseek2,      // "deepseek2" (alias "deepseek-llm"): V2/V2.5 chat, deepseek-llm chat
  kDeepseekCoder,  // "deepseek-coder": deepseek-coder instruct
  kChatml,         // "chatml": Qwen2-style <|im_start|>role\n...<|im_end|>
  // The published templates, rendered exactly (chat_deepseek_formats.cpp):
  kDeepseekR1DistillLlama,  // "deepseek-r1-distill-llama"
  kDeepseekR1DistillQwen,   // "deepseek-r1-distill-qwen"
  kDeepseekV3_1,            // "deepseek-v3.1": thinking switch, NAME<｜tool▁sep｜>{json} calls
  kDeepseekV3_2,            // "deepseek-v3.2": DSML function_calls
  kDeepseekV4,              // "deepseek-v4": DSML tool_calls, reasoning effort, response format
  kDeepseekV4Flash,         // "deepseek-v4-flash": V4-Flash-0731 (two reasoning-effort levels)
};

class ChatTemplate {
 public:
  // Names accepted by from_name / --chat-template, for help and error messages.
  static const std::vector<std::string>& names();
  // Maps a Jinja template text to a format by its markers; an unrecognized text is an error
  // listing names().
  static Result<ChatFormat> recognize(std::string_view template_text);
  // The format whose published template is exactly this text (surrounding whitespace aside).
  static std::optional<ChatFormat> recognize_exact(std::string_view template_text);
  // bos_text / eos_text: the texts of the model's BOS and EOS tokens ("" when none).
  static Result<ChatTemplate> from_name(std::string_view name, std::string bos_text, std::string eos_text);
  // The file's tokenizer.chat_template, or `override_name` when not empty. A file without a
  // template and no override is an error that lists the names. A template that is not one of
  // the published ones is rendered by its markers' format, or else with deepseek3; warning()
  // then says so.
  static Result<ChatTemplate> from_gguf(const GgufFile& file, const Tokenizer& tokenizer,
                                        std::string_view override_name = "");
  // A Jinja template's text (what: where it came from, for the warning), recognized as
  // from_gguf recognizes the file's template, with the same fallback and warning.
  static ChatTemplate from_text(std::string_view tmpl, std::string_view what, std::string bos_text,
                                std::string eos_text);
  // The built-in format for a file without tokenizer.chat_template, by general.architecture:
  // "deepseek2" for deepseek (DeepSeek-MoE 16B chat uses the deepseek-llm format),
  // "deepseek-r1" for qwen3 (R1-0528-Qwen3's template has the R1 markers and reasoning),
  // "deepseek3" for every other architecture.
  static const char* fallback_name(std::string_view architecture);

  ChatTemplate(ChatFormat format, std::string bos_text, std::string eos_text);

  // Renders the conversation. Unknown roles are an error naming the role and the message index.
  Result<std::string> render(const ChatInput& input) const;
  Result<std::string> render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  ChatFormat format() const { return format_; }
  const char* name() const;
  // R1 family and later: outputs carry <think>...</think> reasoning.
  bool has_reasoning() const;
  // The legacy R1 format always opens <think> in the generation prompt.
  bool prompt_opens_reasoning() const { return format_ == ChatFormat::kDeepseekR1; }
  // Whether a rendered prompt ends inside an opened reasoning section ("<think>" or
  // "<think>\n" last), so the output starts with reasoning.
  static bool opens_reasoning(std::string_view prompt);
  // How the model writes tool calls in this format (NONE: the format has no tool syntax).
  ToolCallFormat tool_call_format() const;
  // Set by from_gguf when the file's template was not recognized exactly ("" otherwise).
  const std::string& warning() const { return warning_; }
  // ChatML only: system prompt used when the conversation has none ("" = none).
  void set_default_system(std::string text) { default_system_ = std::move(text); }

 private:
  ChatFormat format_;
  std::string bos_;
  std::string eos_;
  std::string default_system_;
  std::string warning_;
};

// Splits "<think>reasoning</think>content". When started inside the reasoning (the prompt
// ended with "<think>\n"), text up to "</think>" is reasoning; otherwise a leading "<think>"
// (after optional whitespace) opens it and any other start means there is no reasoning.
// Whitespace right after "</think>" is dropped from the content. Streaming: push() returns
// what is certain so far and holds back text that may be the start of a tag.
class ReasoningSplitter {
 public:
  struct Delta {
    std::string reasoning;
    std::string content;
  };
  explicit ReasoningSplitter(bool starts_in_reasoning);
  Delta push(std::string_view text);
  Delta flush();
  // Whole-text convenience: the same as one push() and flush().
  static Delta split(std::string_view text, bool starts_in_reasoning);

 private:
  enum class State { kStart, kReasoning, kAfterThink, kContent };
  void step(Delta& out, bool final);
  State state_;
  std::string held_;
};

}  // namespace ds
