// Hostile HTTP input and connection abuse against the real ds-server binary, over raw
// sockets on 127.0.0.1: header count and size limits (431, memory not kept), framing that a
// proxy could read differently (400/501/505), POST without a length (411 at once), a
// half-closed client (still answered), form-encoded bodies, pipelining (answered in order),
// kept-alive latency (TCP_NODELAY), the idle timeout, the access log in both formats, slow
// clients (per-request deadline, connections per address) and shutdown under load. Other 127/8
// addresses stand in for other clients (Linux routes all of 127/8 to loopback).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "server_process.h"
#include "test_util.h"

namespace ds::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string model() {
  return shared_path("refdata/tiny-llama-Q4_K_M.gguf");
}

// One raw client connection; `source` is the local address it connects from.
class Client {
 public:
  explicit Client(int port, const char* source = "127.0.0.1") {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, source, &local.sin_addr);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
        connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~Client() {
    if (fd_ >= 0) close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return fd_ >= 0; }
  bool send(std::string_view s) {
    while (fd_ >= 0 && !s.empty()) {
      const ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return fd_ >= 0;
  }
  void shut_write() { shutdown(fd_, SHUT_WR); }
  bool readable_now() {
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    return poll(&p, 1, 0) > 0;
  }

  // The next final response (1xx interim responses are skipped); status 0 when the
  // connection closed or no whole response arrived within timeout_ms. `to_head`: the answer
  // to a HEAD request, which has no body whatever its Content-Length.
  RawResponse response(int timeout_ms = 5000, bool to_head = false) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      if (RawResponse r; take_response(&r, to_head)) return r;
      if (eof_ || !fill(deadline)) return {};
    }
  }
  // True when the server closes the connection within timeout_ms.
  bool closed(int timeout_ms = 3000) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!eof_ && fill(deadline)) {
    }
    return eof_;
  }

 private:
  bool fill(Clock::time_point deadline) {
    const int ms =
        static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    if (fd_ < 0 || ms <= 0 || poll(&p, 1, ms) <= 0) return false;
    char buf[65536];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(buf, static_cast<size_t>(n));
    return true;
  }

  bool take_response(RawResponse* r, bool to_head) {
    const size_t he = buf_.find("\r\n\r\n");
    if (he == std::string::npos || buf_.rfind("HTTP/1.", 0) != 0) return false;
    const int status = std::stoi(buf_.substr(9, 3));
    std::string head = buf_.substr(0, he);
    if (status < 200) {
      buf_.erase(0, he + 4);
      return take_response(r, to_head);
    }
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    size_t end = 0;
    std::string body;
    if (to_head) {
      end = he + 4;
    } else if (const size_t cl = lower.find("\r\ncontent-length: "); cl != std::string::npos) {
      const size_t n = std::stoul(lower.substr(cl + 18));
      if (buf_.size() < he + 4 + n) return false;
      body = buf_.substr(he + 4, n);
      end = he + 4 + n;
    } else if (lower.find("\r\ntransfer-encoding: chunked") != std::string::npos) {
      size_t pos = he + 4;
      while (true) {
        const size_t eol = buf_.find("\r\n", pos);
        if (eol == std::string::npos) return false;
        const size_t n = std::stoul(buf_.substr(pos, eol - pos), nullptr, 16);
        if (buf_.size() < eol + 2 + n + 2) return false;
        body += buf_.substr(eol + 2, n);
        pos = eol + 2 + n + 2;
        if (n == 0) break;
      }
      end = pos;
    } else {
      if (!eof_) return false;  // the body runs to the end of the connection
      body = buf_.substr(he + 4);
      end = buf_.size();
    }
    r->status = status;
    r->headers = head;
    r->body = body;
    buf_.erase(0, end);
    return true;
  }

  int fd_ = -1;
  std::string buf_;
  bool eof_ = false;
};

std::string post_text(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

void expect_error(const RawResponse& r, int status, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.headers << "\n" << r.body;
  const json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  EXPECT_EQ(j["error"]["code"], status);
  EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
}

// Sends `request` on a fresh connection and returns the answer; the server must close the
// connection after a refusal (the framing of what follows is unknown).
RawResponse refused(int port, const std::string& request) {
  Client c(port);
  c.send(request);
  RawResponse r = c.response();
  EXPECT_TRUE(c.closed()) << request.substr(0, 80);
  return r;
}

// Seconds a /health request from another client address takes; fails when not 200.
double health_seconds(int port, const char* source = "127.0.0.2") {
  const auto t0 = Clock::now();
  Client c(port, source);
  c.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  const RawResponse r = c.response(5000);
  EXPECT_EQ(r.status, 200) << r.body;
  return seconds_since(t0);
}

long rss_kb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

class HostileHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess();
    server_->start({"--model", model(), "--parallel", "2", "--ctx-size", "256", "--threads", "1", "--http-threads", "4",
                    "--max-header-kb", "16", "--max-body-kb", "64", "--request-timeout", "3", "--keep-alive-timeout",
                    "2"});
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->stop(), 0) << server_->log();
    delete server_;
  }
  void TearDown() override { EXPECT_LT(health_seconds(port()), 1.0); }
  static int port() { return server_->port(); }
  static ServerProcess* server_;
};
ServerProcess* HostileHttp::server_ = nullptr;

TEST_F(HostileHttp, HeaderCountAndSizeLimitsGet431) {
  std::string many = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (int i = 0; i < 150; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
  expect_error(refused(port(), many + "\r\n"), 431, "more than 100 header fields");
  expect_error(
      refused(port(), "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n"), 431,
      "larger than 16384 bytes");

  // A 50 MB header block is refused after its first chunks, and the memory is not kept.
  const long rss_before = rss_kb(server_->pid());
  Client c(port());
  c.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  const std::string filler = "X-Filler: " + std::string(1000, 'f') + "\r\n";
  std::string block;
  while (block.size() < (64u << 10)) block += filler;
  size_t sent = 0;
  while (sent < (50u << 20) && !c.readable_now() && c.send(block)) sent += block.size();
  expect_error(c.response(), 431, "larger than 16384 bytes");
  EXPECT_LT(sent, 4u << 20) << "the refusal came only after " << sent << " bytes";
  EXPECT_LT(rss_kb(server_->pid()) - rss_before, 16 * 1024);
}

TEST_F(HostileHttp, FramingAProxyCouldReadDifferentlyIsRefused) {
  const std::string start = "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  const std::string body = R"({"content":"hello"})";
  expect_error(refused(port(), start + "Content-Length: 19\r\nContent-Length: 20\r\n\r\n" + body), 400,
               "Content-Length");
  expect_error(refused(port(), start + "Content-Length: 19, 20\r\n\r\n" + body), 400, "Content-Length");
  expect_error(refused(port(), start + "Content-Length: -19\r\n\r\n" + body), 400, "Content-Length");
  expect_error(refused(port(), start + "Transfer-Encoding: chunked\r\nContent-Length: 19\r\n\r\n13\r\n" + body +
                                   "\r\n0\r\n\r\n"),
               400, "Transfer-Encoding and Content-Length");
  expect_error(refused(port(), start + "Transfer-Encoding: gzip\r\n\r\n"), 501, "only chunked");
  expect_error(refused(port(), start + "Content-Length: 19\r\nX-Folded: a\r\n b\r\n\r\n" + body), 400, "folding");
  expect_error(refused(port(), "HELLO\r\n\r\n"), 400, "request line");
  expect_error(refused(port(), "GET /health HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n"), 505, "not supported");
  expect_error(refused(port(), "GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400, "Host");
  // The same body in chunks (extensions and trailers allowed) is accepted.
  Client c(port());
  c.send(start +
         "Transfer-Encoding: chunked\r\n\r\n5;ext=1\r\n{\"con\r\ne\r\ntent\":\"hello\"}\r\n0\r\nX-Trailer: t\r\n\r\n");
  const RawResponse r = c.response();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(json::parse(r.body)["tokens"].empty());
}

TEST_F(HostileHttp, PostWithoutContentLengthGets411AtOnce) {
  const auto t0 = Clock::now();
  expect_error(refused(port(), "POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), 411, "Content-Length");
  EXPECT_LT(seconds_since(t0), 1.0);
}

// A refusal written by the transport itself carries the CORS headers too, so a browser client
// can read the error (default --cors-origins *).
TEST_F(HostileHttp, TransportRefusalsCarryCorsHeaders) {
  const RawResponse r =
      refused(port(), "POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://app.example\r\n\r\n");
  EXPECT_EQ(r.status, 411);
  EXPECT_NE(r.headers.find("Access-Control-Allow-Origin: "), std::string::npos) << r.headers;
  const RawResponse big =
      refused(port(), "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(70 * 1024, 'a') + "\r\n\r\n");
  EXPECT_EQ(big.status, 431);
  EXPECT_NE(big.headers.find("Access-Control-Allow-Origin: *"), std::string::npos) << big.headers;
}

TEST_F(HostileHttp, HalfClosedClientStillGetsItsAnswer) {
  for (const std::string& request : {post_text("/tokenize", R"({"content":"half closed"})"),
                                     post_text("/completion", R"({"prompt":"half closed","n_predict":4})"),
                                     std::string("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")}) {
    Client c(port());
    c.send(request);
    c.shut_write();
    const RawResponse r = c.response();
    EXPECT_EQ(r.status, 200) << request << "\n" << r.body;
    EXPECT_FALSE(r.body.empty());
  }
}

TEST_F(HostileHttp, FormEncodedBodiesAreReadLikeJsonUpToTheBodyLimit) {
  // What `curl -d @file` sends: application/x-www-form-urlencoded, here 20 KiB.
  std::string text;
  while (text.size() < 20000) text += "form encoded words ";
  const std::string form = "Content-Type: application/x-www-form-urlencoded\r\n";
  Client c(port());
  c.send("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\n" + form + "Content-Length: " +
         std::to_string(json{{"content", text}}.dump().size()) + "\r\n\r\n" + json{{"content", text}}.dump());
  const RawResponse r = c.response();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_GT(json::parse(r.body)["tokens"].size(), 1000u);
  const std::string big = json{{"content", std::string(70000, 'a')}}.dump();
  expect_error(refused(port(), "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\n" + form +
                                   "Content-Length: " + std::to_string(big.size()) + "\r\n\r\n" + big),
               413, "too large");
}

TEST_F(HostileHttp, PipelinedRequestsAreAnsweredInOrder) {
  Client c(port());
  c.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nHEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" +
         post_text("/tokenize", R"({"content":"one two"})") + "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" +
         post_text("/detokenize", R"({"tokens":[]})", "Connection: close\r\n") +
         "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  RawResponse a = c.response(), h = c.response(5000, true), b = c.response(), m = c.response(), d = c.response();
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(json::parse(a.body)["status"], "ok");
  EXPECT_EQ(h.status, 200);  // HEAD: the headers of GET, no body
  EXPECT_NE(h.headers.find("Content-Length: " + std::to_string(a.body.size())), std::string::npos) << h.headers;
  EXPECT_EQ(b.status, 200);
  EXPECT_TRUE(json::parse(b.body).contains("tokens")) << b.body;
  EXPECT_EQ(m.status, 200);
  EXPECT_TRUE(json::parse(m.body).contains("data")) << m.body;
  EXPECT_EQ(d.status, 200);
  EXPECT_TRUE(json::parse(d.body).contains("content")) << d.body;
  EXPECT_NE(d.headers.find("Connection: close"), std::string::npos);
  // The request after "Connection: close" is not answered: the connection just ends.
  EXPECT_TRUE(c.closed());
  EXPECT_EQ(c.response(100).status, 0);
}

TEST_F(HostileHttp, IdleConnectionsCloseAfterTheKeepAliveTimeout) {
  Client c(port());
  c.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  ASSERT_EQ(c.response().status, 200);
  const auto t0 = Clock::now();
  EXPECT_TRUE(c.closed(4000));
  EXPECT_GT(seconds_since(t0), 1.5);
  EXPECT_LT(seconds_since(t0), 3.5);
}

TEST_F(HostileHttp, KeptAliveRequestsAreNotHeldBackByNagle) {
  // Without TCP_NODELAY every write after the first of a response waits for the client's
  // delayed ACK (40 ms on Linux): a stream's events and answers written in parts were late by
  // that much on a kept-alive connection.
  Client c(port());
  auto median_ms = [&](const std::string& request) {
    std::vector<double> ms;
    for (int i = 0; i < 10; ++i) {
      const auto t0 = Clock::now();
      c.send(request);
      const RawResponse r = c.response();
      EXPECT_EQ(r.status, 200) << r.body;
      ms.push_back(seconds_since(t0) * 1000);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  EXPECT_LT(median_ms(post_text("/tokenize", R"({"content":"latency"})")), 30.0);
  EXPECT_LT(median_ms(post_text("/completion", R"({"prompt":"latency","n_predict":1,"stream":true})")), 35.0);
}

TEST_F(HostileHttp, EveryRequestGetsAnAccessLine) {
  Client ok(port());
  ok.send(post_text("/completions?via=log", R"({"prompt":"logged","n_predict":2})"));
  EXPECT_EQ(ok.response().status, 200);
  Client missing(port());
  missing.send("GET /no/such/route?via=log HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(missing.response().status, 404);
  refused(port(), "POST /completion?via=log411 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  refused(port(),
          "GET /health?via=log431 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
  refused(port(),
          "POST /tokenize?via=log400 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
  refused(port(), "POST /tokenize?via=log413 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999\r\n\r\n");
  std::this_thread::sleep_for(200ms);
  const std::string log = server_->log();
  auto expect_line = [&](const std::string& method, const std::string& path, int status, const std::string& error) {
    const std::regex re(" access id=[0-9]+ client=127\\.0\\.0\\.1:[0-9]+ method=\"" + method + "\" path=\"" +
                        std::regex_replace(path, std::regex("[?/.]"), "\\$&") + "\" status=" + std::to_string(status) +
                        " in=[1-9][0-9]* out=[1-9][0-9]* ms=[0-9.]+" +
                        (error.empty() ? std::string("\n") : " error=\"[^\"]*" + error));
    EXPECT_TRUE(std::regex_search(log, re)) << method << " " << path << " " << status << "\n" << log;
  };
  expect_line("POST", "/completions?via=log", 200, "");
  EXPECT_TRUE(std::regex_search(log, std::regex(" request id=[0-9]+ route=/completions "))) << log;
  expect_line("GET", "/no/such/route?via=log", 404, "no route");
  expect_line("POST", "/completion?via=log411", 411, "needs a Content-Length");
  expect_line("GET", "/health?via=log431", 431, "larger than 16384 bytes");
  expect_line("POST", "/tokenize?via=log400", 400, "conflicting Content-Length");
  expect_line("POST", "/tokenize?via=log413", 413, "too large");
}

// ---- one server per case ----

TEST(HostileHttpAlone, SlowClientsDoNotStarveTheServer) {
  ServerProcess s;
  ASSERT_TRUE(s.start({"--model", model(), "--threads", "1", "--http-threads", "4", "--max-conns-per-client", "60",
                       "--request-timeout", "4"}));
  // 100 connections from one address sending a request at 1 byte/s: each read is quick, but
  // no request can arrive whole within --request-timeout.
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 100; ++i) slow.push_back(std::make_unique<Client>(s.port()));
  const std::string text = "POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 20\r\n\r\n";
  const auto t0 = Clock::now();
  std::atomic<bool> done{false};
  std::thread drip([&] {
    for (size_t i = 0; i < text.size() && !done; ++i) {
      for (auto& c : slow) c->send(text.substr(i, 1));
      for (int k = 0; k < 10 && !done; ++k) std::this_thread::sleep_for(100ms);
    }
  });
  double worst = 0;
  while (seconds_since(t0) < 5.5) {
    worst = std::max(worst, health_seconds(s.port()));
    std::this_thread::sleep_for(250ms);
  }
  done = true;
  drip.join();
  EXPECT_LT(worst, 1.0) << "slowest /health while 100 slow clients were connected";
  int n_503 = 0, n_408 = 0;
  for (auto& c : slow) {
    const RawResponse r = c->response(3000);
    if (r.status == 503) {
      expect_error(r, 503, "too many connections from 127.0.0.1");
      ++n_503;
    } else {
      expect_error(r, 408, "did not arrive whole within 4 s");
      ++n_408;
    }
  }
  EXPECT_EQ(n_503, 40);
  EXPECT_EQ(n_408, 60);
  EXPECT_LT(health_seconds(s.port(), "127.0.0.1"), 1.0);  // the address may connect again
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(HostileHttpAlone, ShutdownUnderLoad) {
  ServerProcess s;
  ASSERT_TRUE(
      s.start({"--model", model(), "--threads", "1", "--parallel", "2", "--grace", "2", "--log-format", "json"}));
  const int port = s.port();
  // Two streams that run past the grace period, one that ends on its own, and requests
  // that are half sent: headers cut off, and a body cut off.
  std::vector<std::unique_ptr<Client>> streams;
  for (const char* body : {R"({"prompt":"a","n_predict":100000,"ignore_eos":true,"stream":true})",
                           R"({"prompt":"b","n_predict":100000,"ignore_eos":true,"stream":true})"}) {
    streams.push_back(std::make_unique<Client>(port));
    streams.back()->send(post_text("/completion", body));
  }
  std::vector<std::unique_ptr<Client>> partial;
  for (int i = 0; i < 3; ++i) {
    partial.push_back(std::make_unique<Client>(port));
    partial.back()->send("POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le");
  }
  partial.push_back(std::make_unique<Client>(port));
  partial.back()->send("POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"prompt\":");
  Client idle(port);
  std::this_thread::sleep_for(300ms);
  EXPECT_LT(health_seconds(port), 1.0);

  const auto t0 = Clock::now();
  kill(s.pid(), SIGTERM);
  // Half-sent requests get 503 and are closed at once; the listener is closed at once.
  for (auto& c : partial) {
    expect_error(c->response(1000), 503, "shutting down");
    EXPECT_TRUE(c->closed(1000));
  }
  EXPECT_TRUE(idle.closed(1000));
  bool refused_new = false;
  while (!refused_new && seconds_since(t0) < 1.0) {
    refused_new = !Client(port, "127.0.0.2").connected();
    if (!refused_new) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(refused_new) << "new connections were still accepted 1 s after SIGTERM";
  // The streams end (cancelled at the end of the grace period) with a final event.
  for (auto& c : streams) {
    const RawResponse r = c->response(5000);
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.body.rfind("data: "), std::string::npos);
  }
  EXPECT_EQ(s.wait_exit(4000), 0) << s.log();
  EXPECT_LT(seconds_since(t0), 4.5);
  // Every access line is one JSON object with the documented fields.
  std::istringstream lines(s.log());
  int n_access = 0, n_503 = 0;
  for (std::string line; std::getline(lines, line);) {
    const json j = json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << line;
    if (j.value("msg", "") != "access") continue;
    ++n_access;
    for (const char* k : {"id", "client", "method", "path", "status", "bytes_in", "bytes_out", "ms"}) {
      EXPECT_TRUE(j.contains(k)) << k << " in " << line;
    }
    if (j.value("error", "") == "the server is shutting down") {
      ++n_503;
      EXPECT_EQ(j["status"], 503) << line;
      EXPECT_EQ(j["path"], "/completion") << line;
    }
  }
  EXPECT_EQ(n_503, 4);
  EXPECT_GE(n_access, 4 + 2 + 2);  // the refusals, the streams, the /health checks
}

TEST(HostileHttpAlone, SecondSignalExitsAtOnce) {
  ServerProcess s;
  ASSERT_TRUE(s.start({"--model", model(), "--threads", "1", "--grace", "60", "--api-key", "k3y"}));
  Client no_key(s.port());
  no_key.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(no_key.response().status, 401);
  Client stream(s.port());
  stream.send(post_text("/completion", R"({"prompt":"a","n_predict":100000,"ignore_eos":true,"stream":true})",
                        "X-Api-Key: k3y\r\n"));
  std::this_thread::sleep_for(300ms);
  kill(s.pid(), SIGTERM);
  std::this_thread::sleep_for(300ms);
  const auto t0 = Clock::now();
  kill(s.pid(), SIGINT);
  EXPECT_EQ(s.wait_exit(2000), 1) << s.log();
  EXPECT_LT(seconds_since(t0), 1.5);
  EXPECT_NE(s.log().find("exiting at once"), std::string::npos);
  // The refused request has its access line too.
  EXPECT_TRUE(std::regex_search(s.log(), std::regex(R"( access id=[0-9]+ client=127\.0\.0\.1:[0-9]+ method="GET" )"
                                                    R"(path="/metrics" status=401 .* error="[^"]+")")))
      << s.log();
}

}  // namespace
}  // namespace ds::test
