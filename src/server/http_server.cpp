// cpp-httplib behind HttpServer; see http_server.h.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace ds {

namespace {

// Finds the socket of a request by its addresses (httplib 0.11 does not expose it), so that
// alive() can notice a client that closed its side while we are still generating.
class ConnectionWatch {
 public:
  explicit ConnectionWatch(const httplib::Request& req) {
    DIR* dir = opendir("/proc/self/fd");  // only the open descriptors
    if (!dir) return;
    while (dirent* e = readdir(dir)) {
      const int fd = std::atoi(e->d_name);
      if (fd > 2 && fd != dirfd(dir) && matches(fd, req)) {
        fd_ = fd;
        break;
      }
    }
    closedir(dir);
  }
  bool alive() const {
    if (fd_ < 0) return true;
    pollfd p{.fd = fd_, .events = POLLIN | POLLRDHUP, .revents = 0};
    if (poll(&p, 1, 0) <= 0) return true;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return false;
    char c;
    return recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0;  // 0: orderly shutdown
  }

 private:
  bool matches(int fd, const httplib::Request& req) {
    sockaddr_storage peer{}, local{};
    socklen_t lp = sizeof(peer), ll = sizeof(local);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &lp) != 0) return false;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
    return port_of(peer) == req.remote_port && port_of(local) == req.local_port && addr_of(peer) == req.remote_addr;
  }
  static int port_of(const sockaddr_storage& a) {
    if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
    if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
    return -1;
  }
  static std::string addr_of(const sockaddr_storage& a) {
    char buf[INET6_ADDRSTRLEN] = {0};
    if (a.ss_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, buf, sizeof(buf));
    } else if (a.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, buf, sizeof(buf));
    }
    return buf;
  }
  int fd_ = -1;
};

}  // namespace

struct HttpServer::Impl {
  ServerContext& ctx;
  HttpServerOptions opts;
  httplib::Server svr;
  int port = -1;

  Impl(ServerContext& c, HttpServerOptions o) : ctx(c), opts(std::move(o)) {}

  void handle(const httplib::Request& hreq, httplib::Response& hres) {
    auto watch = std::make_shared<ConnectionWatch>(hreq);
    HttpRequest req;
    req.method = hreq.method;
    req.path = hreq.path;
    req.body = hreq.body;
    for (const auto& [k, v] : hreq.headers) {
      std::string key = k;
      std::transform(key.begin(), key.end(), key.begin(), [](unsigned char ch) { return std::tolower(ch); });
      req.headers[key] = v;
    }
    req.alive = [watch] { return watch->alive(); };
    HttpResponse resp = handle_request(ctx, req);
    hres.status = resp.status;
    for (const auto& [k, v] : resp.headers) hres.set_header(k, v);
    if (!resp.stream) {
      hres.set_content(resp.body, resp.content_type.c_str());
      return;
    }
    hres.set_header("Cache-Control", "no-cache");
    hres.set_header("X-Accel-Buffering", "no");
    auto stream = std::make_shared<std::function<void(StreamSink&)>>(std::move(resp.stream));
    hres.set_chunked_content_provider(resp.content_type, [stream, watch](size_t, httplib::DataSink& sink) {
      bool ok = true;
      StreamSink s{.write =
                       [&](std::string_view data) {
                         ok = ok && sink.write(data.data(), data.size());
                         return ok;
                       },
                   .alive = [&] { return ok && watch->alive(); }};
      (*stream)(s);
      sink.done();
      return true;
    });
  }

  static httplib::Server::HandlerResponse json_error(const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    // httplib's own refusals (413 payload too large, 400 malformed HTTP, ...).
    const std::string msg = res.status == 413 ? "the request body is too large" : "bad request";
    res.set_content("{\"error\":{\"code\":" + std::to_string(res.status) + ",\"message\":\"" + msg + "\",\"type\":\"" +
                        std::string(error_type_for(res.status)) + "\"}}",
                    "application/json; charset=utf-8");
    return httplib::Server::HandlerResponse::Handled;
  }
};

HttpServer::HttpServer(ServerContext& ctx, HttpServerOptions opts)
    : impl_(std::make_unique<Impl>(ctx, std::move(opts))) {
  Impl& im = *impl_;
  const int n = std::max(4, im.opts.n_threads);
  im.svr.new_task_queue = [n] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
  im.svr.set_payload_max_length(im.opts.max_body_bytes);
  im.svr.set_read_timeout(im.opts.read_timeout_s, 0);
  im.svr.set_write_timeout(im.opts.write_timeout_s, 0);
  im.svr.set_error_handler(httplib::Server::HandlerWithResponse(&Impl::json_error));
  auto h = [&im](const httplib::Request& q, httplib::Response& r) { im.handle(q, r); };
  im.svr.Get(".*", h);
  im.svr.Post(".*", h);
  im.svr.Put(".*", h);
  im.svr.Delete(".*", h);
  im.svr.Patch(".*", h);
  im.svr.Options(".*", h);
}

HttpServer::~HttpServer() = default;

Status HttpServer::bind() {
  Impl& im = *impl_;
  if (im.opts.port == 0) {
    im.port = im.svr.bind_to_any_port(im.opts.host);
  } else {
    im.port = im.svr.bind_to_port(im.opts.host, im.opts.port) ? im.opts.port : -1;
  }
  if (im.port < 0) {
    return Status::error("cannot listen on " + im.opts.host + ":" + std::to_string(im.opts.port) +
                         " (address in use, or not an address of this machine)");
  }
  return Status::ok();
}

int HttpServer::port() const {
  return impl_->port;
}

void HttpServer::run() {
  impl_->svr.listen_after_bind();
}

void HttpServer::stop() {
  impl_->svr.stop();
}

}  // namespace ds
