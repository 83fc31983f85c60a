// The HTTP transport: the only user of cpp-httplib. Every request goes to
// handle_request() (api.h); SSE responses are written through httplib's chunked content
// provider. A client that hangs up is noticed by peeking at its socket, so waiting and
// non-streaming requests are cancelled too, not only streams whose next write fails.
#pragma once
#include <memory>
#include <string>

#include "ds/status.h"
#include "server/api.h"

namespace ds {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;     // 0: any free port (see HttpServer::port())
  int n_threads = 16;  // connections served at once
  size_t max_body_bytes = 8u << 20;
  int read_timeout_s = 30;
  int write_timeout_s = 30;
};

class HttpServer {
 public:
  HttpServer(ServerContext& ctx, HttpServerOptions opts);
  ~HttpServer();
  Status bind();     // binds host:port; errors name them
  int port() const;  // the bound port
  void run();        // serves until stop(); returns after in-flight requests end
  void stop();       // stops accepting; thread-safe, callable from a signal thread

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds
