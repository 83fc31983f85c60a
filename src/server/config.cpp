// Option parsing for ds-server; see config.h. One table lists every option once, with its
// type, target and help line, so flags, the config file and --help cannot drift apart.
#include "server/config.h"

#include <filesystem>
#include <algorithm>
#include <climits>
#include <cmath>
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
  bool gpu_only = false;  // accepted for llama-server command lines; a notice says it is ignored
};

// llama-server's other spellings of the options below: flag -> option name.
const std::vector<std::pair<const char*, const char*>>& aliases() {
  static const std::vector<std::pair<const char*, const char*>> a = {
      {"-m", "model"},          {"-a", "alias"},           {"-c", "ctx-size"},
      {"-np", "parallel"},      {"-t", "threads"},         {"-b", "batch-size"},
      {"-ub", "ubatch-size"},   {"-ctk", "cache-type-k"},  {"-ctv", "cache-type-v"},
      {"-fa", "flash-attn"},    {"-n", "n-predict"},       {"--predict", "n-predict"},
      {"-cb", "cont-batching"}, {"-ngl", "n-gpu-layers"},  {"--gpu-layers", "n-gpu-layers"},
      {"-sm", "split-mode"},    {"-ts", "tensor-split"},   {"-mg", "main-gpu"},
      {"-dev", "device"},       {"-nkvo", "no-kv-offload"}};
  return a;
}

Status to_float(const std::string& name, const std::string& v, double lo, double hi, float* out) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size() && std::isfinite(x) && x >= lo && x <= hi) {
      *out = static_cast<float>(x);
      return Status::ok();
    }
  } catch (...) {
  }
  return Status::error("--" + name + " must be a number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                       "] (got '" + v + "')");
}

Status read_api_keys(const std::string& path, std::vector<std::string>* keys) {
  std::ifstream f(path);
  if (!f) return Status::error("--api-key-file: cannot read " + path);
  std::string line;
  while (std::getline(f, line)) {
    line.erase(0, line.find_first_not_of(" \t\r"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (!line.empty()) keys->push_back(line);
  }
  if (keys->empty()) return Status::error("--api-key-file: " + path + " holds no key (one key a line)");
  return Status::ok();
}

Status accept(ServerConfig&, const std::string&) {
  return Status::ok();
}

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
      {"ctx-size", "N",
       "Total context over all sequences, as llama-server's -c: each of the --parallel sequences gets "
       "ctx-size / parallel tokens, prompt + output. Also the meaning of \"ctx-size\" in a config file. "
       "Default: --ctx-per-seq 4096.",
       [](ServerConfig& c, const std::string& v) {
         c.ctx_per_seq = 0;
         return to_int("ctx-size", v, 16, 1 << 30, &c.ctx_total);
       }},
      {"ctx-per-seq", "N",
       "Most tokens per sequence, prompt + output (default 4096); the KV cache holds ctx-per-seq x parallel "
       "tokens. Instead of --ctx-size; whichever comes last wins.",
       [](ServerConfig& c, const std::string& v) {
         c.ctx_total = 0;
         return to_int("ctx-per-seq", v, 16, 1 << 24, &c.ctx_per_seq);
       }},
      INT_OPT("parallel", parallel, 1, 1024,
              "Sequences decoded at once; the KV cache holds ctx-per-seq x parallel tokens (default 4)."),
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
       "Require this key (Authorization: Bearer KEY or X-Api-Key: KEY) on every route but /health, /models, "
       "/v1/models and CORS preflights. Also read from $DS_API_KEY. An empty key is an error (omit the option to run "
       "without one).",
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
       "Keep the quantized weights (Q2_K-Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) in the file's layout instead of "
       "repacking them into 16-row panels at load (AVX-512 CPUs; repacking makes decode, batched decode and "
       "prefill faster and takes about a second per GB).",
       [](ServerConfig& c, const std::string& v) {
         c.repack = v == "false";
         return Status::ok();
       }},
      {"mlock", "",
       "Lock the model's weights in RAM after load, so that they are never paged out. Needs a locked-memory "
       "limit of at least the model size (ulimit -l, LimitMEMLOCK= in the systemd unit); otherwise the server "
       "exits 1 with an error naming the limit and the bytes needed.",
       [](ServerConfig& c, const std::string& v) {
         c.mlock = v != "false";
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
      // llama-server's options, with its names and meanings where ds-server does the same thing.
      INT_OPT("batch-size", batch_tokens, 1, 1 << 20, "llama-server's name for --batch-tokens."),
      INT_OPT("ubatch-size", ubatch, 1, 1 << 20,
              "llama-server's physical batch: ds-server computes a step at once, so the step budget is the "
              "smaller of --batch-tokens and this."),
      {"cache-type-k", "T", "llama-server's K cache type; ds-server keeps K and V in one type (--kv-type).",
       [](ServerConfig& c, const std::string& v) {
         return one_of("cache-type-k", v, {"f32", "f16", "bf16", "q8_0"}, &c.cache_type_k);
       }},
      {"cache-type-v", "T", "llama-server's V cache type; must equal --cache-type-k when both are given.",
       [](ServerConfig& c, const std::string& v) {
         return one_of("cache-type-v", v, {"f32", "f16", "bf16", "q8_0"}, &c.cache_type_v);
       }},
      {"flash-attn", "[on|off|auto]",
       "Accepted for llama-server command lines: ds-server has one attention implementation (on CPU).",
       [](ServerConfig&, const std::string& v) {
         std::string unused;
         return one_of("flash-attn", v, {"true", "on", "off", "auto", "1", "0", "enabled", "disabled"}, &unused);
       }},
      {"temp", "F", "Default temperature of requests that do not set one (default 0.8).",
       [](ServerConfig& c, const std::string& v) { return to_float("temp", v, -1e9, 1e9, &c.temperature); }},
      INT_OPT("top-k", top_k, -1, 1 << 30, "Default top_k of requests (default 40; <= 0: off)."),
      {"top-p", "F", "Default top_p of requests (default 0.95; 1: off).",
       [](ServerConfig& c, const std::string& v) { return to_float("top-p", v, 0, 1, &c.top_p); }},
      {"min-p", "F", "Default min_p of requests (default 0.05; 0: off).",
       [](ServerConfig& c, const std::string& v) { return to_float("min-p", v, 0, 1, &c.min_p); }},
      {"seed", "N", "Default sampling seed of requests (default -1: random per request).",
       [](ServerConfig& c, const std::string& v) {
         int s = 0;
         Status st = to_int("seed", v, -1, INT32_MAX, &s);
         c.seed = s;
         return st;
       }},
      INT_OPT("n-predict", n_predict, -1, INT32_MAX,
              "Default most tokens to generate of requests that set no n_predict/max_tokens (default -1: until "
              "the context is full)."),
      {"jinja", "", "Accepted for llama-server command lines: chat templates are always applied (docs/chat.md).",
       accept},
      STR_OPT("chat-template-file", chat_template_file,
              "Chat template (Jinja text) from a file instead of the model's; recognized as one of the known "
              "formats like the model's own template, else rendered as deepseek3 with a warning."),
      {"reasoning-format", "F",
       "auto|deepseek|deepseek-legacy: thinking goes to reasoning_content (default auto); none: it stays in "
       "content.",
       [](ServerConfig& c, const std::string& v) {
         return one_of("reasoning-format", v, {"auto", "deepseek", "deepseek-legacy", "none"}, &c.reasoning_format);
       }},
      {"metrics", "", "Accepted for llama-server command lines: /metrics is always served.", accept},
      {"slots", "", "Serve GET /slots (the default).",
       [](ServerConfig& c, const std::string& v) {
         c.slots_endpoint = v != "false";
         return Status::ok();
       }},
      {"no-slots", "", "Do not serve GET /slots (it answers 501).",
       [](ServerConfig& c, const std::string& v) {
         c.slots_endpoint = v == "false";
         return Status::ok();
       }},
      {"cont-batching", "", "Accepted for llama-server command lines: batching is always continuous.", accept},
      {"no-webui", "", "Accepted for llama-server command lines: ds-server has no web UI.", accept},
      {"api-key-file", "FILE", "Also accept each key in FILE (one a line) as --api-key does.",
       [](ServerConfig& c, const std::string& v) { return read_api_keys(v, &c.api_keys); }},
      STR_OPT("cors-origins", cors_origins,
              "Origins allowed to call from a browser: * (the default) or a comma-separated list such as "
              "https://a.example,https://b.example."),
      {"n-gpu-layers", "N", "GPU only: accepted and ignored (ds-server runs on the CPU).", accept, true},
      {"split-mode", "S", "GPU only: accepted and ignored.", accept, true},
      {"tensor-split", "S", "GPU only: accepted and ignored.", accept, true},
      {"main-gpu", "N", "GPU only: accepted and ignored.", accept, true},
      {"device", "S", "GPU only: accepted and ignored.", accept, true},
      {"no-kv-offload", "", "GPU only: accepted and ignored.", accept, true},
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

Status load_config_file(const std::string& path, ServerConfig* cfg, std::vector<std::string>* notices) {
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
    else if (value.is_number_float() && *o->arg)  // "temp": 0.7
      v = value.dump();
    else if (value.is_boolean() && !*o->arg)
      v = value.get<bool>() ? "true" : "false";
    else if (value.is_boolean() && o->arg[0] == '[')  // "flash-attn": true
      v = value.get<bool>() ? "on" : "off";
    else
      return Status::error("config file " + path + ": \"" + key + "\" has the wrong type");
    if (!*o->arg && v != "true" && v != "false") {
      return Status::error("config file " + path + ": \"" + key + "\" must be true or false");
    }
    if (o->gpu_only && notices) {
      notices->push_back("config file " + path + ": \"" + key +
                         "\" only applies to GPUs; ds-server runs on the CPU and ignores it");
    }
    if (!*o->arg && v == "false") continue;
    if (Status s = o->set(*cfg, *o->arg ? v : "true"); !s)
      return Status::error("config file " + path + ": " + s.message());
  }
  return Status::ok();
}

// The llama-server options that combine with ds-server's own (see ServerConfig).
static Status resolve_llama_options(ServerConfig* c) {
  if (c->ctx_total > 0) {
    c->ctx_size = c->ctx_total / c->parallel;
    if (c->ctx_size < 16) {
      return Status::error("--ctx-size " + std::to_string(c->ctx_total) + " over --parallel " +
                           std::to_string(c->parallel) + " leaves fewer than 16 tokens per sequence");
    }
  } else if (c->ctx_per_seq > 0) {
    c->ctx_size = c->ctx_per_seq;
  }
  if (!c->cache_type_k.empty() && !c->cache_type_v.empty() && c->cache_type_k != c->cache_type_v) {
    return Status::error("--cache-type-k " + c->cache_type_k + " and --cache-type-v " + c->cache_type_v +
                         " differ: ds-server keeps K and V in one type");
  }
  if (!c->cache_type_k.empty()) c->kv_type = c->cache_type_k;
  if (!c->cache_type_v.empty()) c->kv_type = c->cache_type_v;
  if (c->ubatch > 0) c->batch_tokens = std::min(c->batch_tokens, c->ubatch);
  return Status::ok();
}

Result<ParsedArgs> parse_server_args(const std::vector<std::string>& args) {
  ParsedArgs out;
  if (const char* key = std::getenv("DS_API_KEY"); key && *key) out.config.api_key = key;
  // The config file first, wherever --config appears, so that flags override it.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) return Status::error("--config needs a file name");
      DS_RETURN_IF_ERROR(load_config_file(args[i + 1], &out.config, &out.notices));
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
    std::string value;
    bool has_value = false;
    if (const size_t eq = a.find('='); eq != std::string::npos) {
      value = a.substr(eq + 1), a = a.substr(0, eq), has_value = true;
    }
    for (const auto& [alias, name] : aliases()) {
      if (a == alias) a = std::string("--") + name;
    }
    const Option* o = a.rfind("--", 0) == 0 ? find_option(a.substr(2)) : nullptr;
    if (!o) return Status::error("unknown option '" + args[i] + "' (see --help)");
    const bool optional_value = o->arg[0] == '[';  // -fa, or -fa on|off|auto
    if (optional_value && !has_value) {
      has_value = true, value = "true";
      if (i + 1 < args.size() && args[i + 1].rfind("-", 0) != 0) value = args[++i];
    }
    if (*o->arg && !has_value) {
      if (i + 1 >= args.size()) return Status::error(a + " needs a value");
      value = args[++i];
    }
    DS_RETURN_IF_ERROR(o->set(out.config, *o->arg ? value : "true"));
    if (o->gpu_only) {
      out.notices.push_back(a + " only applies to GPUs; ds-server runs on the CPU and ignores it");
    }
  }
  DS_RETURN_IF_ERROR(resolve_llama_options(&out.config));
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
    std::string flag;
    for (const auto& [alias, name] : aliases()) {
      if (std::string_view(name) == opt.name) flag += std::string(alias) + ", ";
    }
    flag += std::string("--") + opt.name + (*opt.arg ? std::string(" ") + opt.arg : "");
    o << "  " << flag << std::string(flag.size() < 22 ? 22 - flag.size() : 1, ' ') << opt.help << '\n';
  }
  o << "  --config FILE         JSON file with any of the options above (\"ctx-per-seq\": 8192, ...);\n"
       "                        flags given on the command line override it.\n"
       "  --help                This text.\n  --version             Print the version.\n\n"
       "Signals: SIGTERM/SIGINT close the listener and idle or partly received connections at\n"
       "once, let requests already being handled finish for --grace seconds, cancel the rest and\n"
       "exit 0; a second SIGTERM/SIGINT exits 1 at once.\n\n"
       "llama-server command lines work: its short flags are listed above with the options they\n"
       "name. Note that -c/--ctx-size is the TOTAL context over all --parallel sequences (as in\n"
       "llama-server); --ctx-per-seq gives each sequence's context directly.\n";
  return o.str();
}

}  // namespace ds
