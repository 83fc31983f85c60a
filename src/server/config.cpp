// Option parsing for ds-server; see config.h. One table lists every option once, with its
// type, target and help line, so flags, the config file and --help cannot drift apart.
#include "server/config.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/json_parse.h"

namespace ds {

namespace {

struct Option {
  const char* name;  // flag without "--"; config key (also with '_' for '-')
  const char* arg;   // "N", "S", "" for switches
  const char* help;
  std::function<Status(ServerConfig&, const std::string&)> set;
};

Status to_int(const std::string& name, const std::string& v, int lo, int hi, int* out) {
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used == v.size() && x >= lo && x <= hi) {
      *out = static_cast<int>(x);
      return Status::ok();
    }
  } catch (...) {
  }
  return Status::error("--" + name + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                       "] (got '" + v + "')");
}

Status one_of(const std::string& name, const std::string& v, std::initializer_list<const char*> allowed,
              std::string* out) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) {
      *out = v;
      return Status::ok();
    }
    list += list.empty() ? a : std::string("|") + a;
  }
  return Status::error("--" + name + " must be one of " + list + " (got '" + v + "')");
}

#define INT_OPT(NAME, FIELD, LO, HI, HELP)                                                                   \
  {                                                                                                          \
    NAME, "N", HELP, [](ServerConfig& c, const std::string& v) { return to_int(NAME, v, LO, HI, &c.FIELD); } \
  }
#define STR_OPT(NAME, FIELD, HELP)                               \
  {                                                              \
    NAME, "S", HELP, [](ServerConfig& c, const std::string& v) { \
      c.FIELD = v;                                               \
      return Status::ok();                                       \
    }                                                            \
  }

const std::vector<Option>& options() {
  static const std::vector<Option> opts = {
      STR_OPT("model", model, "GGUF model file (first shard of a split model). Required."),
      STR_OPT("alias", alias, "Model id reported by the API (default: the file name)."),
      STR_OPT("host", host, "Address to listen on (default 127.0.0.1; 0.0.0.0 for all)."),
      INT_OPT("port", port, 0, 65535, "TCP port (default 8080; 0 picks a free one)."),
      INT_OPT("ctx-size", ctx_size, 16, 1 << 24, "Most tokens per sequence, prompt + output (default 4096)."),
      INT_OPT("parallel", parallel, 1, 1024,
              "Sequences decoded at once; the KV cache holds ctx-size x parallel tokens (default 4)."),
      INT_OPT("threads", threads, 0, 4096, "Compute threads (default 0: one per physical core)."),
      {"kv-type", "T", "KV cache type: f32|f16|bf16|q8_0 (default f16).",
       [](ServerConfig& c, const std::string& v) {
         return one_of("kv-type", v, {"f32", "f16", "bf16", "q8_0"}, &c.kv_type);
       }},
      {"numa", "MODE", "NUMA placement: none|distribute|isolate (default none).",
       [](ServerConfig& c, const std::string& v) {
         return one_of("numa", v, {"none", "distribute", "isolate"}, &c.numa);
       }},
      {"api-key", "S",
       "Require this key (Authorization: Bearer KEY or X-Api-Key: KEY) on every route but /health. Also read "
       "from $DS_API_KEY. An empty key is an error (omit the option to run without one).",
       [](ServerConfig& c, const std::string& v) {
         if (v.empty()) return Status::error("--api-key must not be empty (omit it to run without a key)");
         c.api_key = v;
         return Status::ok();
       }},
      {"log-format", "F", "Log lines as text or json (default text).",
       [](ServerConfig& c, const std::string& v) {
         return one_of("log-format", v, {"text", "json"}, &c.log_format);
       }},
      INT_OPT("batch-tokens", batch_tokens, 1, 1 << 20,
              "Token budget of one engine step: decode tokens first, then prompt chunks (default 512)."),
      INT_OPT("max-queue", max_queue, 0, 1 << 20,
              "Requests that may wait for a slot; beyond it requests get 503 (default 64)."),
      STR_OPT("chat-template", chat_template,
              "Chat format instead of the model's: deepseek3, deepseek-r1, deepseek2, deepseek-coder, chatml, "
              "deepseek-r1-distill-llama, deepseek-r1-distill-qwen, deepseek-v3.1, deepseek-v3.2, deepseek-v4, "
              "deepseek-v4-flash."),
      {"no-repack", "",
       "Keep the K-quant weights in the file's layout instead of repacking them into 16-row panels at load "
       "(AVX-512 CPUs; repacking makes prefill and batched decode faster and takes about a second per GB).",
       [](ServerConfig& c, const std::string& v) {
         c.repack = v == "false";
         return Status::ok();
       }},
      {"no-prefix-cache", "", "Do not share KV blocks between requests with the same prompt prefix.",
       [](ServerConfig& c, const std::string& v) {
         c.prefix_cache = v == "false";
         return Status::ok();
       }},
      INT_OPT("http-threads", http_threads, 0, 65536,
              "Requests handled at once (default parallel + max-queue + 8); idle or slow connections hold "
              "no thread."),
      INT_OPT("grace", grace_s, 0, 86400,
              "Seconds in-flight requests may take after SIGTERM/SIGINT before they are cancelled (default 30)."),
      INT_OPT("max-body-kb", max_body_kb, 1, 1 << 20, "Largest request body in KiB; larger gets 413 (default 8192)."),
      INT_OPT("max-header-kb", max_header_kb, 1, 1 << 16,
              "Largest request line + headers in KiB; larger, or more than 100 header fields, gets 431 "
              "(default 64)."),
      INT_OPT("request-timeout", request_timeout_s, 1, 86400,
              "Seconds a request may take to arrive whole (headers and body) from its first byte; later gets "
              "408 (default 60)."),
      INT_OPT("keep-alive-timeout", keep_alive_timeout_s, 1, 86400,
              "Seconds a connection may stay idle between requests before it is closed (default 30)."),
      INT_OPT("max-conns-per-client", max_conns_per_client, 0, 1 << 20,
              "Open connections from one client address; more get 503 and are closed (default 256; 0: no "
              "limit; raise it behind a proxy)."),
      INT_OPT("timeout", timeout_s, 1, 86400,
              "Seconds a response write may make no progress (the client stopped reading) before the "
              "connection is dropped and its request cancelled (default 600)."),
  };
  return opts;
}

const Option* find_option(std::string key) {
  for (char& ch : key) ch = ch == '_' ? '-' : ch;
  for (const Option& o : options()) {
    if (key == o.name) return &o;
  }
  return nullptr;
}

}  // namespace

Status load_config_file(const std::string& path, ServerConfig* cfg) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    return Status::error("the config file " + path + " is not a regular file");
  }
  std::ifstream f(path);
  if (!f) return Status::error("cannot read the config file " + path);
  std::stringstream text;
  text << f.rdbuf();
  nlohmann::ordered_json j;
  if (Status st = parse_json_bounded(text.str(), &j); !st) {
    return Status::error("config file " + path + ": " + st.message());
  }
  if (!j.is_object()) return Status::error("config file " + path + " must hold a JSON object");
  for (auto& [key, value] : j.items()) {
    const Option* o = find_option(key);
    if (!o) return Status::error("config file " + path + ": unknown option \"" + key + "\" (see --help)");
    std::string v;
    if (value.is_string())
      v = value.get<std::string>();
    else if (value.is_number_integer())
      v = std::to_string(value.get<int64_t>());
    else if (value.is_boolean() && !*o->arg)
      v = value.get<bool>() ? "true" : "false";
    else
      return Status::error("config file " + path + ": \"" + key + "\" has the wrong type");
    if (!*o->arg && v != "true" && v != "false") {
      return Status::error("config file " + path + ": \"" + key + "\" must be true or false");
    }
    if (!*o->arg && v == "false") continue;
    if (Status s = o->set(*cfg, *o->arg ? v : "true"); !s)
      return Status::error("config file " + path + ": " + s.message());
  }
  return Status::ok();
}

Result<ParsedArgs> parse_server_args(const std::vector<std::string>& args) {
  ParsedArgs out;
  if (const char* key = std::getenv("DS_API_KEY"); key && *key) out.config.api_key = key;
  // The config file first, wherever --config appears, so that flags override it.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) return Status::error("--config needs a file name");
      DS_RETURN_IF_ERROR(load_config_file(args[i + 1], &out.config));
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--help" || a == "-h") {
      out.help = true;
      continue;
    }
    if (a == "--version") {
      out.version = true;
      continue;
    }
    if (a == "--config") {
      ++i;
      continue;
    }
    if (a == "-m") a = "--model";
    std::string value;
    bool has_value = false;
    if (const size_t eq = a.find('='); eq != std::string::npos) {
      value = a.substr(eq + 1), a = a.substr(0, eq), has_value = true;
    }
    const Option* o = a.rfind("--", 0) == 0 ? find_option(a.substr(2)) : nullptr;
    if (!o) return Status::error("unknown option '" + args[i] + "' (see --help)");
    if (*o->arg && !has_value) {
      if (i + 1 >= args.size()) return Status::error(a + " needs a value");
      value = args[++i];
    }
    DS_RETURN_IF_ERROR(o->set(out.config, *o->arg ? value : "true"));
  }
  if (!out.help && !out.version && out.config.model.empty()) {
    return Status::error("--model FILE is required (see --help)");
  }
  return out;
}

std::string help_text() {
  std::ostringstream o;
  o << "usage: ds-server --model FILE [options]\n\n"
       "Serves a GGUF DeepSeek model over HTTP: llama.cpp-compatible /completion and\n"
       "/tokenize, OpenAI-compatible /v1/completions, /v1/chat/completions and /v1/models,\n"
       "/health, /props, /slots and Prometheus /metrics.\n\noptions:\n";
  for (const Option& opt : options()) {
    std::string flag = std::string("--") + opt.name + (*opt.arg ? std::string(" ") + opt.arg : "");
    o << "  " << flag << std::string(flag.size() < 22 ? 22 - flag.size() : 1, ' ') << opt.help << '\n';
  }
  o << "  --config FILE         JSON file with any of the options above (\"ctx-size\": 8192, ...);\n"
       "                        flags given on the command line override it.\n"
       "  --help                This text.\n  --version             Print the version.\n\n"
       "Signals: SIGTERM/SIGINT close the listener and idle or partly received connections at\n"
       "once, let requests already being handled finish for --grace seconds, cancel the rest and\n"
       "exit 0; a second SIGTERM/SIGINT exits 1 at once.\n";
  return o.str();
}

}  // namespace ds
