// HttpServer: an epoll reader that hands complete requests to handler threads; see
// http_server.h.
//
// Ownership: the loop thread owns every connection while it is being read and is the only
// thread that closes descriptors; a handler thread owns a connection from the moment it is
// given a request until it hands the connection back (the loop does not watch it in
// between: EPOLLONESHOT). Leftover bytes after a request are the next pipelined request,
// parsed when the connection comes back, so answers go out in request order.
//
// Why an own reader instead of cpp-httplib's thread per connection (measured on 2 shared
// cores, tiny test model, 14 handler threads; cpp-httplib 0.11 -> this file):
//   /health with 100 clients sending 1 byte/s    failed 8 of 8 (5 s timeout) -> 5 ms worst
//   /health with 42 idle connections              12.7 s -> 1 ms
//   kept-alive POST /tokenize, median              43.3 ms -> 0.03 ms (TCP_NODELAY)
// A thread per connection is starved by any client that holds connections open, whatever the
// timeouts; and header limits, framing checks and pipelining need the reader anyway.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/http_parser.h"
#include "server/logging.h"

namespace ds {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64u << 10;
// After a refusal the connection is half-closed and what the client still sends is read and
// dropped for this long, so that the answer is not destroyed by a reset (RFC 9112 9.6).
constexpr auto kLinger = std::chrono::seconds(2);
constexpr int kAcceptPauseMs = 100;  // no new connections for this long after accept() ran out of fds
// abort(): how long handlers still get to write the last event of a cancelled request before
// the connections they write to are shut down.
constexpr auto kAbortDelay = std::chrono::seconds(1);
constexpr int kMaxEvents = 256;

const char* reason(int status) {
  static const std::pair<int, const char*> kReasons[] = {
      {100, "Continue"},
      {200, "OK"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {408, "Request Timeout"},
      {411, "Length Required"},
      {413, "Content Too Large"},
      {414, "URI Too Long"},
      {417, "Expectation Failed"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {503, "Service Unavailable"},
      {505, "HTTP Version Not Supported"},
  };
  for (const auto& [code, text] : kReasons) {
    if (code == status) return text;
  }
  return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
}

std::string address_of(const sockaddr_storage& a, int* port) {
  char buf[INET6_ADDRSTRLEN] = {0};
  *port = 0;
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &in.sin_addr, buf, sizeof(buf));
    *port = ntohs(in.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof(buf));
    *port = ntohs(in6.sin6_port);
  }
  return buf;
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The message of an {"error":{"message"}} body, for the access log.
std::string error_message_of(const std::string& body) {
  if (body.size() > (64u << 10)) return "";
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
  const auto& m = j["error"].value("message", nlohmann::json());
  return m.is_string() ? m.get<std::string>() : "";
}

// Method and target of a request line that was not (fully) parsed, for the access log.
void first_line_fields(std::string_view in, std::string* method, std::string* target) {
  in = in.substr(0, std::min(in.size(), in.find('\n')));
  const size_t sp1 = in.find(' ');
  *method = sp1 == std::string_view::npos || sp1 == 0 || sp1 > 32 ? "-" : std::string(in.substr(0, sp1));
  if (sp1 == std::string_view::npos) return;
  const std::string_view rest = in.substr(sp1 + 1);
  *target = std::string(rest.substr(0, rest.find(' ')));
  if (target->empty()) *target = "-";
}

}  // namespace

struct HttpConn {
  enum class State { kReading, kHandling, kLingering };

  HttpConn(int f, const HttpLimits& limits) : fd(f), parser(limits) {}

  // Handler thread: false once the client is gone. A client that only closed its sending
  // side (half-close) still wants the answer, but a client that closed the whole socket
  // looks the same until something is written to it; so at the first end-of-stream before
  // the response starts, an interim "100 Continue" (which HTTP/1.1 clients must accept) is
  // sent: a closed socket answers it with a reset, seen at the next check.
  bool alive() {
    if (write_failed) return false;
    pollfd p{.fd = fd, .events = POLLIN | POLLRDHUP, .revents = 0};
    if (poll(&p, 1, 0) <= 0) return true;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return false;
    if ((p.revents & POLLRDHUP) && !response_started && !probed && http11) {
      probed = true;
      return write_all("HTTP/1.1 100 Continue\r\n\r\n");
    }
    return true;
  }

  // Handler thread: writes everything or gives up after write_timeout of no progress.
  bool write_all(std::string_view data) {
    size_t off = 0;
    while (off < data.size() && !write_failed) {
      const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<size_t>(n);
        bytes_out += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
        const int r = poll(&p, 1, write_timeout_ms);
        if (r > 0 || (r < 0 && errno == EINTR)) continue;  // writable, or an error send() will report
      }
      write_failed = true;
    }
    return !write_failed;
  }

  const int fd;
  std::string client;  // "address:port"
  std::string addr;    // the address, for --max-conns-per-client
  bool counted = false;
  bool registered = false;  // in the epoll set
  State state = State::kReading;
  std::string in;  // received, not yet consumed
  RequestParser parser;
  bool continue_sent = false;
  Clock::time_point since;          // accept or the end of the last response
  Clock::time_point request_start;  // first byte of the request being read
  Clock::time_point linger_until;
  bool close_after = false;  // set by the handler: close instead of reading the next request
  // Handler thread only.
  int write_timeout_ms = 600000;
  bool http11 = true;
  bool response_started = false;
  bool probed = false;
  bool write_failed = false;
  size_t bytes_out = 0;
};

struct HttpServer::Impl {
  struct Job {
    std::shared_ptr<HttpConn> conn;
    ParsedRequest req;
    Clock::time_point start;
  };

  ServerContext& ctx;
  HttpServerOptions opts;
  HttpLimits limits;
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  int port = -1;
  size_t max_conns = 1024;
  std::atomic<bool> stopping{false}, aborting{false};
  std::atomic<uint64_t> next_id{1};

  // Loop thread only.
  std::unordered_map<int, std::shared_ptr<HttpConn>> conns;
  std::unordered_map<std::string, int> per_addr;
  int n_handling = 0;
  std::vector<char> read_buf = std::vector<char>(kReadChunk);
  bool stop_done = false, abort_done = false;
  Clock::time_point abort_at{};
  Clock::time_point accept_paused_until{};
  // No deadline (keep-alive, request timeout, linger, paused accept, abort) is before this;
  // scan_deadlines() makes it exact, due() brings it forward.
  Clock::time_point next_due = Clock::time_point::max();

  // Shared with the handler threads, under mu.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job> jobs;
  std::vector<std::shared_ptr<HttpConn>> returned;
  bool quit = false;
  std::vector<std::thread> threads;

  Impl(ServerContext& c, HttpServerOptions o) : ctx(c), opts(std::move(o)) {
    limits.max_body_bytes = opts.max_body_bytes;
    limits.max_header_bytes = opts.max_header_bytes;
  }

  ~Impl() {
    join_handlers();
    for (auto& [fd, c] : conns) close(fd);
    for (int fd : {listen_fd, epoll_fd, wake_fd}) {
      if (fd >= 0) close(fd);
    }
  }

  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd, &one, sizeof(one));
  }

  void join_handlers() {
    {
      std::lock_guard lk(mu);
      quit = true;
    }
    cv.notify_all();
    for (auto& t : threads) t.join();
    threads.clear();
  }

  // ---- the loop thread ----

  void watch(HttpConn& c) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.fd = c.fd;
    epoll_ctl(epoll_fd, c.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c.fd, &ev);
    c.registered = true;
  }

  void uncount(HttpConn& c) {
    if (!c.counted) return;
    c.counted = false;
    if (auto it = per_addr.find(c.addr); it != per_addr.end() && --it->second <= 0) per_addr.erase(it);
  }

  void close_conn(const std::shared_ptr<HttpConn>& c) {
    uncount(*c);
    close(c->fd);  // also leaves the epoll set
    conns.erase(c->fd);
  }

  // Half-closes and drains for kLinger, then closes (see kLinger).
  void linger(const std::shared_ptr<HttpConn>& c) {
    uncount(*c);
    shutdown(c->fd, SHUT_WR);
    c->state = HttpConn::State::kLingering;
    c->linger_until = Clock::now() + kLinger;
    due(c->linger_until);
    c->in.clear();
    c->in.shrink_to_fit();
    watch(*c);
  }

  // Answers a request that is refused before any handler sees it, logs it, and closes.
  void reject(const std::shared_ptr<HttpConn>& c, int status, const std::string& message) {
    const uint64_t id = next_id++;
    HttpResponse resp = error_response(status, message, error_type_for(status));
    // Headers parsed so far (none when the head itself was refused) choose the CORS origin.
    std::map<std::string, std::string> req_headers;
    if (c->parser.head_done()) {
      for (const auto& [k, v] : c->parser.request().headers) req_headers[k] = v;
    }
    add_cors_headers(ctx, req_headers, &resp);
    std::string out =
        "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
        "\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: " + std::to_string(resp.body.size()) +
        "\r\nConnection: close\r\nX-Request-Id: " + std::to_string(id) + (status == 503 ? "\r\nRetry-After: 1" : "");
    for (const auto& [k, v] : resp.headers) out += "\r\n" + k + ": " + v;
    out += "\r\n\r\n" + resp.body;
    const ssize_t n = send(c->fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    std::string method = "-", target = "-";
    if (c->parser.head_done()) {
      method = c->parser.request().method;
      target = c->parser.request().target;
    } else if (!c->in.empty()) {
      first_line_fields(c->in, &method, &target);
    }
    const bool had_bytes = !c->in.empty();
    log_access({.id = id,
                .client = c->client,
                .method = method,
                .target = target,
                .status = status,
                .bytes_in = c->in.size(),
                .bytes_out = n > 0 ? static_cast<size_t>(n) : 0,
                .ms = ms_since(had_bytes ? c->request_start : c->since),
                .error = message});
    ctx.counters.http_requests++;
    (status >= 500 ? ctx.counters.http_errors_5xx : ctx.counters.http_errors_4xx)++;
    linger(c);
  }

  void accept_all() {
    while (true) {
      sockaddr_storage sa{};
      socklen_t len = sizeof(sa);
      const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          // Out of descriptors or memory: stop accepting for a tick instead of spinning.
          spdlog::warn("accept failed: {}; pausing new connections for {} ms", std::strerror(errno), kAcceptPauseMs);
          epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
          accept_paused_until = Clock::now() + std::chrono::milliseconds(kAcceptPauseMs);
          due(accept_paused_until);
        }
        return;
      }
      const int one = 1;  // answers and SSE events go out at once, not after a delayed ACK
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      auto c = std::make_shared<HttpConn>(fd, limits);
      int peer_port = 0;
      c->addr = address_of(sa, &peer_port);
      c->client =
          (c->addr.find(':') != std::string::npos ? "[" + c->addr + "]" : c->addr) + ":" + std::to_string(peer_port);
      c->since = Clock::now();
      due(c->since + std::chrono::seconds(opts.keep_alive_timeout_s));
      c->write_timeout_ms = opts.write_timeout_s * 1000;
      conns[fd] = c;
      if (conns.size() > max_conns) {
        reject(c, 503, "too many open connections (" + std::to_string(max_conns) + ")");
        continue;
      }
      int& n_addr = per_addr[c->addr];
      if (opts.max_conns_per_client > 0 && n_addr >= opts.max_conns_per_client) {
        reject(c, 503,
               "too many connections from " + c->addr + " (--max-conns-per-client " +
                   std::to_string(opts.max_conns_per_client) + ")");
        continue;
      }
      ++n_addr;
      c->counted = true;
      watch(*c);
    }
  }

  void dispatch(const std::shared_ptr<HttpConn>& c) {
    Job job{.conn = c, .req = std::move(c->parser.request()), .start = c->request_start};
    c->in.erase(0, job.req.consumed);
    if (c->in.capacity() > 2 * kReadChunk && c->in.size() < kReadChunk) c->in.shrink_to_fit();
    c->parser.reset();
    c->continue_sent = false;
    c->state = HttpConn::State::kHandling;
    ++n_handling;
    {
      std::lock_guard lk(mu);
      jobs.push_back(std::move(job));
    }
    cv.notify_one();
  }

  // Parses what is buffered: dispatches, refuses, or waits for more bytes.
  void advance(const std::shared_ptr<HttpConn>& c) {
    if (c->in.empty()) return watch(*c);
    const ParseOutcome o = c->parser.parse(c->in);
    if (o.state == ParseOutcome::kError) return reject(c, o.status, o.message);
    if (o.state == ParseOutcome::kComplete) return dispatch(c);
    if (c->parser.head_done() && c->parser.request().expect_continue && !c->continue_sent) {
      c->continue_sent = true;
      const std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
      send(c->fd, cont.data(), cont.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    watch(*c);
  }

  void on_readable(const std::shared_ptr<HttpConn>& c) {
    if (c->state == HttpConn::State::kLingering) {  // drop what arrives, a bounded amount per wake-up
      ssize_t n = 0;
      for (int i = 0; i < 4 && (n = recv(c->fd, read_buf.data(), read_buf.size(), 0)) > 0; ++i) {
      }
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return close_conn(c);
      return watch(*c);
    }
    if (c->state != HttpConn::State::kReading) return;
    // One chunk per wake-up: a fast sender cannot monopolize the loop, and the parser sees
    // every chunk (a header block over the limit is refused after at most one extra chunk).
    // Read into the loop's buffer, so an idle connection keeps no 64 KiB of its own.
    const ssize_t n = recv(c->fd, read_buf.data(), read_buf.size(), 0);
    if (n > 0) {
      if (c->in.empty()) {
        c->request_start = Clock::now();
        due(c->request_start + std::chrono::seconds(opts.request_timeout_s));
      }
      c->in.append(read_buf.data(), static_cast<size_t>(n));
      return advance(c);
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return watch(*c);
    if (n == 0 && !c->in.empty()) {
      return reject(c, 400, "the client closed the connection before the request was complete");
    }
    close_conn(c);  // closed between requests, or reset
  }

  void on_returned(const std::shared_ptr<HttpConn>& c) {
    --n_handling;
    if (c->close_after || stopping) return linger(c);
    c->state = HttpConn::State::kReading;
    c->since = c->request_start = Clock::now();  // a pipelined request's deadline starts now
    due(c->since + std::chrono::seconds(std::min(opts.keep_alive_timeout_s, opts.request_timeout_s)));
    advance(c);
  }

  void begin_stop() {
    stop_done = true;
    if (listen_fd >= 0) {
      close(listen_fd);
      listen_fd = -1;
    }
    std::vector<std::shared_ptr<HttpConn>> reading;
    for (auto& [fd, c] : conns) {
      if (c->state == HttpConn::State::kReading) reading.push_back(c);
    }
    for (auto& c : reading) {
      if (c->in.empty()) {
        close_conn(c);
      } else {
        reject(c, 503, "the server is shutting down");
      }
    }
  }

  void scan_deadlines() {
    const auto now = Clock::now();
    const auto keep_alive = std::chrono::seconds(opts.keep_alive_timeout_s);
    const auto request_timeout = std::chrono::seconds(opts.request_timeout_s);
    std::vector<std::shared_ptr<HttpConn>> idle, late, done;
    for (auto& [fd, c] : conns) {
      if (c->state == HttpConn::State::kLingering && now >= c->linger_until) done.push_back(c);
      if (c->state != HttpConn::State::kReading) continue;
      if (c->in.empty() && now - c->since >= keep_alive) idle.push_back(c);
      if (!c->in.empty() && now - c->request_start >= request_timeout) late.push_back(c);
    }
    for (auto& c : idle) close_conn(c);
    for (auto& c : done) close_conn(c);
    for (auto& c : late) {
      reject(c, 408,
             "the request did not arrive whole within " + std::to_string(opts.request_timeout_s) +
                 " s (--request-timeout)");
    }
    if (listen_fd >= 0 && accept_paused_until != Clock::time_point{} && now >= accept_paused_until) {
      accept_paused_until = {};
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = listen_fd;
      epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
    }
    next_due = Clock::time_point::max();
    for (auto& [fd, c] : conns) {
      if (c->state == HttpConn::State::kLingering) due(c->linger_until);
      if (c->state != HttpConn::State::kReading) continue;
      due(c->in.empty() ? c->since + keep_alive : c->request_start + request_timeout);
    }
    if (accept_paused_until != Clock::time_point{}) due(accept_paused_until);
    if (aborting && !abort_done && abort_at != Clock::time_point{}) due(abort_at);
  }

  // The next deadline is at t or earlier.
  void due(Clock::time_point t) { next_due = std::min(next_due, t); }

  // epoll_wait's timeout: until the earliest deadline, or none (-1). An idle server without
  // connections sleeps until a client or wake_fd (stop, a handler's returned connection) comes.
  int wait_ms() const {
    if (next_due == Clock::time_point::max()) return -1;
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(next_due - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000));
  }

  void loop() {
    epoll_event events[kMaxEvents];
    while (true) {
      const int n = epoll_wait(epoll_fd, events, kMaxEvents, wait_ms());
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listen_fd) {
          accept_all();
        } else if (fd == wake_fd) {
          uint64_t v;
          [[maybe_unused]] ssize_t r = read(wake_fd, &v, sizeof(v));
        } else if (auto it = conns.find(fd); it != conns.end()) {
          on_readable(std::shared_ptr<HttpConn>(it->second));
        }
      }
      std::vector<std::shared_ptr<HttpConn>> back;
      {
        std::lock_guard lk(mu);
        back.swap(returned);
      }
      for (auto& c : back) on_returned(c);
      if (stopping && !stop_done) begin_stop();
      if (aborting && abort_at == Clock::time_point{}) abort_at = Clock::now() + kAbortDelay;
      if (aborting && !abort_done) due(abort_at);
      if (aborting && !abort_done && Clock::now() >= abort_at) {
        abort_done = true;
        for (auto& [fd, c] : conns) {
          if (c->state == HttpConn::State::kHandling) shutdown(fd, SHUT_RDWR);
        }
      }
      if (Clock::now() >= next_due) scan_deadlines();
      if (stop_done && n_handling == 0) break;
    }
  }

  // ---- handler threads ----

  void handler_main() {
    while (true) {
      Job job;
      {
        std::unique_lock lk(mu);
        cv.wait(lk, [&] { return quit || !jobs.empty(); });
        if (jobs.empty()) return;
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      serve(job);
      {
        std::lock_guard lk(mu);
        returned.push_back(std::move(job.conn));
      }
      wake();
    }
  }

  void serve(Job& job) {
    HttpConn& c = *job.conn;
    ParsedRequest& pr = job.req;
    c.http11 = pr.minor_version >= 1;
    c.response_started = c.probed = c.write_failed = false;
    c.bytes_out = 0;
    const uint64_t id = next_id++;
    const bool head_only = pr.method == "HEAD";
    HttpResponse resp;
    if (stopping) {
      // Queued but not started when the shutdown began: only started requests drain.
      resp = error_response(503, "the server is shutting down", error_type_for(503));
      resp.headers.emplace_back("Retry-After", "1");
      std::map<std::string, std::string> req_headers(pr.headers.begin(), pr.headers.end());
      add_cors_headers(ctx, req_headers, &resp);
      ctx.counters.http_requests++;
      ctx.counters.http_errors_5xx++;
    } else {
      HttpRequest req;
      req.method = head_only ? "GET" : pr.method;  // HEAD: the GET route's headers, no body
      req.path = pr.path;
      req.body = std::move(pr.body);
      for (auto& [k, v] : pr.headers) req.headers[k] = v;
      req.alive = [&c] { return c.alive(); };
      resp = handle_request(ctx, req);
    }
    bool close_after = !pr.keep_alive || stopping;
    const bool chunked = resp.stream && c.http11;
    if (resp.stream && !c.http11) close_after = true;  // an HTTP/1.0 stream ends with the connection
    std::string head = "HTTP/1.1 " + std::to_string(resp.status) + " " + reason(resp.status) +
                       "\r\nContent-Type: " + resp.content_type + "\r\n";
    for (const auto& [k, v] : resp.headers) head += k + ": " + v + "\r\n";
    head += "X-Request-Id: " + std::to_string(id) + "\r\n";
    if (resp.stream) {
      head += "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n";
      if (chunked) head += "Transfer-Encoding: chunked\r\n";
    } else {
      head += "Content-Length: " + std::to_string(resp.body.size()) + "\r\n";
    }
    if (close_after) {
      head += "Connection: close\r\n";
    } else if (!c.http11) {
      head += "Connection: keep-alive\r\n";
    }
    head += "\r\n";
    std::string error;
    if (!resp.stream) {
      c.response_started = true;
      c.write_all(head_only ? head : head + resp.body);
      if (resp.status >= 400) error = error_message_of(resp.body);
    } else {
      c.response_started = true;
      c.write_all(head);
      StreamSink sink{.write =
                          [&](std::string_view data) {
                            if (data.empty() || c.write_failed) return !c.write_failed;
                            if (!chunked) return c.write_all(data);
                            char size[24];
                            std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
                            std::string chunk = size;
                            chunk.append(data);
                            chunk += "\r\n";
                            return c.write_all(chunk);
                          },
                      .alive = [&] { return c.alive(); }};
      resp.stream(sink);
      if (chunked) c.write_all("0\r\n\r\n");
    }
    if (c.write_failed) {
      close_after = true;
      if (error.empty()) error = "the client went away before the response was written";
    }
    c.close_after = close_after;
    log_access({.id = id,
                .client = c.client,
                .method = pr.method,
                .target = pr.target,
                .status = resp.status,
                .bytes_in = pr.consumed,
                .bytes_out = c.bytes_out,
                .ms = ms_since(job.start),
                .error = error});
  }

  Status start_handlers() {
    const int n = std::max(1, opts.n_threads);
    try {
      threads.reserve(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) threads.emplace_back([this] { handler_main(); });
    } catch (const std::system_error& e) {
      const size_t started = threads.size();
      join_handlers();
      return Status::error("cannot start " + std::to_string(n) + " HTTP handler threads (" + std::to_string(started) +
                           " started: " + e.what() +
                           "); lower --http-threads or --max-queue, or raise the thread limit (TasksMax)");
    }
    return Status::ok();
  }
};

HttpServer::HttpServer(ServerContext& ctx, HttpServerOptions opts)
    : impl_(std::make_unique<Impl>(ctx, std::move(opts))) {}

HttpServer::~HttpServer() = default;

Status HttpServer::bind() {
  Impl& im = *impl_;
  const std::string where = im.opts.host + ":" + std::to_string(im.opts.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* list = nullptr;
  if (getaddrinfo(im.opts.host.c_str(), std::to_string(im.opts.port).c_str(), &hints, &list) != 0) {
    return Status::error("cannot listen on " + where + " (not an address of this machine)");
  }
  for (addrinfo* a = list; a && im.listen_fd < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) {
      im.listen_fd = fd;
    } else {
      close(fd);
    }
  }
  freeaddrinfo(list);
  if (im.listen_fd < 0) {
    return Status::error("cannot listen on " + where + " (address in use, or not an address of this machine)");
  }
  sockaddr_storage sa{};
  socklen_t len = sizeof(sa);
  getsockname(im.listen_fd, reinterpret_cast<sockaddr*>(&sa), &len);
  address_of(sa, &im.port);

  // Connections cost a descriptor each: use the hard limit, keep some for model files.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
      getrlimit(RLIMIT_NOFILE, &rl);
    }
    const rlim_t usable = rl.rlim_cur > 256 ? rl.rlim_cur - 128 : 128;
    im.max_conns = static_cast<size_t>(std::min<rlim_t>(usable, 1u << 20));
  }
  im.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  im.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (im.epoll_fd < 0 || im.wake_fd < 0) return Status::error(std::string("cannot set up epoll: ") + strerror(errno));
  for (int fd : {im.listen_fd, im.wake_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(im.epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }
  return im.start_handlers();
}

int HttpServer::port() const {
  return impl_->port;
}

void HttpServer::run() {
  impl_->loop();
  impl_->join_handlers();
}

void HttpServer::stop() {
  impl_->stopping = true;
  impl_->wake();
}

void HttpServer::abort() {
  impl_->aborting = true;
  impl_->wake();
}

}  // namespace ds
