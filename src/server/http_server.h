// The HTTP/1.1 transport. One event-loop thread (epoll) accepts connections and reads
// requests; only a complete request (http_parser.h) goes to one of `n_threads` handler
// threads, which call handle_request() (api.h) and write the response, SSE streams as
// chunked transfer. So a slow or idle client holds a file descriptor and a buffer, never a
// thread, and every limit (header size, per-request deadline, connections per address) is
// enforced before any handler runs. Requests on one connection are answered in order
// (pipelining). Every request, refused ones included, gets one access line (logging.h).
#pragma once
#include <memory>
#include <string>

#include "ds/status.h"
#include "server/api.h"

namespace ds {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;     // 0: any free port (see HttpServer::port())
  int n_threads = 16;  // requests handled at once
  size_t max_body_bytes = 8u << 20;
  size_t max_header_bytes = 64u << 10;
  int request_timeout_s = 60;      // a request must arrive whole within this, from its first byte
  int keep_alive_timeout_s = 30;   // a connection with no request in progress closes after this
  int write_timeout_s = 600;       // a response write that makes no progress this long drops the client
  int max_conns_per_client = 256;  // open connections from one address; 0: no limit
};

class HttpServer {
 public:
  HttpServer(ServerContext& ctx, HttpServerOptions opts);
  ~HttpServer();
  Status bind();     // binds host:port and starts the handler threads; errors name the cause
  int port() const;  // the bound port
  void run();        // serves until stop(); returns once no request is being handled
  // Closes the listener and every connection without a request being handled, at once;
  // requests already handled may finish, further requests on their connections get 503.
  // Thread-safe, callable from a signal thread.
  void stop();
  // After stop(), once the grace period is over: a second later, shuts down the connections
  // still being handled, so that writes to clients that do not read fail at once.
  void abort();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds
