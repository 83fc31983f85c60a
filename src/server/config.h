// ds-server options: command-line flags and a JSON config file (--config FILE) with the
// same names (either "ctx-size" or "ctx_size"). The file is read first, flags override it.
// --help prints help_text(), which documents every option. llama-server's spellings are
// accepted too (-c, -np, -ctk, ...): short aliases map to the same options, and flags that
// only mean something on a GPU (-ngl, -sm, ...) are accepted with a notice.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ds/status.h"

namespace ds {

struct ServerConfig {
  std::string model;
  std::string alias;  // model id in responses (default: the file name)
  std::string host = "127.0.0.1";
  int port = 8080;
  int ctx_size = 4096;
  int parallel = 4;
  int threads = 0;
  std::string kv_type = "f16";
  std::string numa = "none";
  bool repack = true;
  bool mlock = false;  // lock the weights in RAM after load
  std::string api_key;
  std::string log_format = "text";
  int batch_tokens = 512;
  int max_queue = 64;
  std::string chat_template;
  bool prefix_cache = true;
  int http_threads = 0;  // 0: parallel + max_queue + 8
  int grace_s = 30;      // SIGTERM: how long in-flight requests may take
  int max_body_kb = 8192;
  int max_header_kb = 64;          // request line + headers; larger gets 431
  int request_timeout_s = 60;      // a request must arrive whole within this, from its first byte
  int keep_alive_timeout_s = 30;   // an idle connection closes after this
  int max_conns_per_client = 256;  // open connections from one address; 0: no limit
  int timeout_s = 600;             // a response write that makes no progress this long drops the client
  // llama-server compatibility. ctx_size above is the per-sequence context that the engine
  // gets; it is set by --ctx-per-seq, or derived from --ctx-size (the total over all slots,
  // as in llama-server) divided by --parallel.
  int ctx_total = 0;                       // --ctx-size / -c; 0: not given
  int ctx_per_seq = 0;                     // --ctx-per-seq; 0: not given
  int ubatch = 0;                          // --ubatch-size / -ub; 0: not given
  std::string cache_type_k, cache_type_v;  // -ctk / -ctv
  float temperature = -1e30f;              // server-wide sampling defaults; the sentinel: not given
  int top_k = -2;
  float top_p = -1, min_p = -1;
  int64_t seed = -2;
  int n_predict = -2;
  std::string chat_template_file;
  std::string reasoning_format = "auto";  // auto | deepseek | deepseek-legacy | none
  bool slots_endpoint = true;
  std::vector<std::string> api_keys;  // --api-key-file: one key a line
  std::string cors_origins = "*";     // comma-separated origins, or *
};

struct ParsedArgs {
  ServerConfig config;
  bool help = false;
  bool version = false;
  std::vector<std::string> notices;  // accepted flags that have no effect here, one line each
};

Result<ParsedArgs> parse_server_args(const std::vector<std::string>& args);
// notices (optional): a line for each accepted key that has no effect here (GPU-only options).
Status load_config_file(const std::string& path, ServerConfig* cfg, std::vector<std::string>* notices = nullptr);
std::string help_text();

}  // namespace ds
