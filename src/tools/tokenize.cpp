// ds-cli tokenize: text -> token ids with the model's own tokenizer. Prints one line per
// token (id and the bytes it stands for, escaped), or with --ids exactly one line of
// space-separated ids for scripts. --file reads the text byte-exact (no newline stripping).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "ds/tokenizer.h"
#include "tools/command.h"
#include "util/files.h"

namespace ds::cli {
namespace {

void print_usage() {
  std::printf(
      "usage: ds-cli tokenize --model FILE [--ids] [--no-bos] [--no-special] [--pre NAME] (TEXT | --file F)\n"
      "  Tokenizes TEXT (or the bytes of file F) with the model's tokenizer.\n"
      "  --ids         print only the ids, space-separated, on one line\n"
      "  --no-bos      do not add the BOS/EOS tokens the model asks for\n"
      "  --no-special  treat control tokens written in the text as plain text\n"
      "  --pre NAME    force the pre-tokenizer (deepseek-llm, deepseek-coder, deepseek-v3,\n"
      "                qwen2, deepseek-r1-qwen, llama-bpe)\n");
}

// Printable form of a token's bytes: control characters and invalid UTF-8 as escapes.
std::string escape_piece(const std::string& bytes) {
  std::string out;
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    const char* escape = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : c == '\\' ? "\\\\" : nullptr;
    if (escape || (c >= 0x20 && c < 0x7F)) {
      if (escape)
        out += escape;
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    const std::string_view ch = std::string_view(bytes).substr(i, len);
    if (len > 1 && ch.size() == len && !utf8_find_invalid(ch)) {
      out.append(ch);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      len = 1;
    }
    i += len;
  }
  return out;
}

struct Args {
  std::string model, text, file, pre;
  bool ids_only = false, bos = true, special = true, have_text = false, help = false;
};

Status parse_args(const std::vector<std::string>& args, Args& a) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&](std::string& dst) {
      if (i + 1 >= args.size()) return Status::invalid_argument(s + " needs a value");
      dst = args[++i];
      return Status::ok();
    };
    if (s == "--help" || s == "-h") {
      a.help = true;
      return Status::ok();
    }
    if (s == "--model" || s == "-m") {
      DS_RETURN_IF_ERROR(value(a.model));
    } else if (s == "--file" || s == "-f") {
      DS_RETURN_IF_ERROR(value(a.file));
    } else if (s == "--pre") {
      DS_RETURN_IF_ERROR(value(a.pre));
    } else if (s == "--ids")
      a.ids_only = true;
    else if (s == "--no-bos")
      a.bos = false;
    else if (s == "--no-special")
      a.special = false;
    else if (s == "--") {
      if (i + 1 < args.size()) {
        a.text = args[++i];
        a.have_text = true;
      }
    } else if (s.size() > 1 && s[0] == '-') {
      return Status::invalid_argument("unknown option " + s);
    } else if (!a.have_text) {
      a.text = s;
      a.have_text = true;
    } else {
      return Status::invalid_argument("more than one TEXT given (quote it)");
    }
  }
  if (a.model.empty()) return Status::invalid_argument("needs --model");
  if (a.have_text == !a.file.empty()) return Status::invalid_argument("needs either TEXT or --file, not both");
  return Status::ok();
}

Status cmd_tokenize(const std::vector<std::string>& argv) {
  Args a;
  DS_RETURN_IF_ERROR(parse_args(argv, a));
  if (a.help) {
    print_usage();
    return Status::ok();
  }
  if (!a.file.empty()) {
    auto text = read_regular_file(a.file);  // a directory or FIFO is an error
    if (!text) return text.status();
    a.text = std::move(*text);
  }
  auto file = GgufFile::open(a.model);
  if (!file) return file.status();
  auto tok = Tokenizer::from_gguf(**file, TokenizerOptions{.force_pre = a.pre});
  if (!tok) return tok.status();
  auto ids = (*tok)->encode(a.text, a.bos, a.special);
  if (!ids) return ids.status();
  if (a.ids_only) {
    std::string line;
    for (size_t i = 0; i < ids->size(); ++i) line += (i ? " " : "") + std::to_string((*ids)[i]);
    std::printf("%s\n", line.c_str());
    return Status::ok();
  }
  for (int32_t id : *ids) {
    std::printf("%8d  '%s'%s\n", id, escape_piece((*tok)->token_bytes(id)).c_str(),
                (*tok)->is_special(id) ? "  (control)" : "");
  }
  std::printf("%zu tokens (pre-tokenizer %s)\n", ids->size(), (*tok)->pre_name().c_str());
  return Status::ok();
}

}  // namespace

DS_CLI_COMMAND(tokenize, "text -> token ids with a model's tokenizer", cmd_tokenize);

}  // namespace ds::cli
