// ds-server options: command-line flags and a JSON config file (--config FILE) with the
// same names (either "ctx-size" or "ctx_size"). The file is read first, flags override it.
// --help prints help_text(), which documents every option.
#pragma once
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
};

struct ParsedArgs {
  ServerConfig config;
  bool help = false;
  bool version = false;
};

Result<ParsedArgs> parse_server_args(const std::vector<std::string>& args);
Status load_config_file(const std::string& path, ServerConfig* cfg);
std::string help_text();

}  // namespace ds
