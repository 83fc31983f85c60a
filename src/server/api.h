// The API layer between HTTP and the engine loop: plain request/response structs, so that
// every route is testable without sockets (tests/server) and socket handling stays inside
// http_server.cpp. A response either carries a body or a `stream` callback that writes
// Server-Sent Events through a sink until the generation ends or the client goes away.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ds/engine.h"
#include "ds/version.h"
#include "serve/engine_loop.h"
#include "server/text_codec.h"

namespace ds {

struct HttpRequest {
  std::string method;  // GET, POST, ...
  std::string path;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
  std::function<bool()> alive;  // false once the client hung up
};

struct StreamSink {
  std::function<bool(std::string_view)> write;  // false: the client is gone
  std::function<bool()> alive;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::function<void(StreamSink&)> stream;  // set for SSE responses
};

struct ApiOptions {
  std::string api_key;      // empty: no authentication
  std::string model_alias;  // the model id reported by /v1/models and responses
  int n_ctx = 4096;         // per-sequence context (for props and validation)
  int n_parallel = 4;
  int retry_after_s = 1;  // Retry-After on 503
  size_t max_body_bytes = 8u << 20;
  std::string chat_template;  // --chat-template override (for /props)
  std::string build_info = "ds-server";
  // llama-server compatibility (config.h): more keys, CORS, server-wide sampling defaults.
  std::vector<std::string> api_keys;  // accepted besides api_key
  std::string cors_origins = "*";     // "*" or a comma-separated list of origins
  std::string model_path;             // the model file, for /props
  SamplingParams sampling;            // defaults of requests that do not set a field
  bool random_seed = true;            // no --seed: each request draws one
  int n_predict = -1;
  bool reasoning_in_content = false;  // --reasoning-format none
  bool slots_endpoint = true;
  std::string system_fingerprint = std::string("ds-server-") + kVersion;
};

// Counters kept by the API layer for /metrics.
struct ApiCounters {
  std::atomic<int64_t> http_requests{0};
  std::atomic<int64_t> http_errors_4xx{0};
  std::atomic<int64_t> http_errors_5xx{0};
  std::atomic<int64_t> completions_ok{0};
  std::atomic<int64_t> client_disconnects{0};
  std::atomic<int64_t> rejected_busy{0};
};

// Everything a route needs. loop/codec/model are null until the model is loaded.
struct ServerContext {
  ApiOptions opts;
  std::atomic<bool> ready{false};
  EngineLoop* loop = nullptr;
  const TextCodec* codec = nullptr;
  const ModelInfo* model = nullptr;
  ApiCounters counters;
  std::atomic<int64_t> next_task_id{1};
};

// Dispatches one request (authentication, routing, errors). Thread-safe.
HttpResponse handle_request(ServerContext& ctx, const HttpRequest& req);
// The CORS headers (--cors-origins) for a request with these headers; the transport adds them
// to the replies it writes itself (refused and shut-down requests), as handle_request does.
void add_cors_headers(const ServerContext& ctx, const std::map<std::string, std::string>& req_headers, HttpResponse* r);

// {"error":{"code":status,"message":...,"type":...}} with the status set.
HttpResponse error_response(int status, std::string_view message, std::string_view type);
// Error type names used by llama.cpp-compatible clients.
std::string_view error_type_for(int status);

}  // namespace ds
