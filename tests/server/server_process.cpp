#include "server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "test_util.h"

namespace ds::test {

using namespace std::chrono_literals;

bool ServerProcess::start(const std::vector<std::string>& args) {
  const std::string bin = binary_dir() + "/src/ds-server";
  log_ = make_temp_dir("ds_server") + "/server.log";
  std::vector<std::string> argv_s = {bin, "--host", "127.0.0.1", "--port", "0"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  close(fd);
  const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
  for (int i = 0; i < 600; ++i) {  // 60 s
    std::smatch m;
    const std::string text = log();
    if (port_ < 0 && std::regex_search(text, m, listening)) port_ = std::stoi(m[1]);
    if (port_ > 0 && raw_request(port_, "GET", "/health", "").status == 200) return true;
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      ADD_FAILURE() << "ds-server exited during start-up:\n" << text;
      return false;
    }
    std::this_thread::sleep_for(100ms);
  }
  ADD_FAILURE() << "ds-server did not become healthy in 60 s:\n" << log();
  return false;
}

int ServerProcess::stop(int timeout_s) {
  if (pid_ < 0) return -1;
  kill(pid_, SIGTERM);
  for (int i = 0; i < timeout_s * 10; ++i) {
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    std::this_thread::sleep_for(100ms);
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

int ServerProcess::wait_exit(int timeout_ms) {
  if (pid_ < 0) return -1;
  for (int i = 0; i <= timeout_ms / 10; ++i) {
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    std::this_thread::sleep_for(10ms);
  }
  return -1;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) stop(10);
}

std::string ServerProcess::log() const {
  return read_file_text(log_);
}

static int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{.tv_sec = 120, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

static std::string request_text(int port, const std::string& method, const std::string& path, const std::string& body,
                                const std::vector<std::string>& extra) {
  std::ostringstream o;
  o << method << ' ' << path << " HTTP/1.1\r\nHost: 127.0.0.1:" << port << "\r\nConnection: close\r\n";
  for (const auto& h : extra) o << h << "\r\n";
  if (!body.empty() || method == "POST") {
    o << "Content-Type: application/json\r\nContent-Length: " << body.size() << "\r\n";
  }
  o << "\r\n" << body;
  return o.str();
}

static std::string dechunk(const std::string& s) {
  std::string out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t eol = s.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t n = std::stoul(s.substr(pos, eol - pos), nullptr, 16);
    if (n == 0) break;
    out += s.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return out;
}

RawResponse raw_request(int port, const std::string& method, const std::string& path, const std::string& body,
                        const std::vector<std::string>& extra_headers) {
  RawResponse r;
  const int fd = connect_loopback(port);
  if (fd < 0) return r;
  if (!send_all(fd, request_text(port, method, path, body, extra_headers))) {
    close(fd);
    return r;
  }
  std::string all;
  char buf[65536];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) all.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t head_end = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.1 ", 0) != 0 || head_end == std::string::npos) return r;
  r.status = std::stoi(all.substr(9, 3));
  r.headers = all.substr(0, head_end);
  r.body = all.substr(head_end + 4);
  if (r.headers.find("Transfer-Encoding: chunked") != std::string::npos) r.body = dechunk(r.body);
  return r;
}

int stream_then_hang_up(int port, const std::string& path, const std::string& body, int n_events) {
  // Returns the events received when it hung up: at least n_events unless the stream ended
  // first; more when the last read brought several at once.
  const int fd = connect_loopback(port);
  if (fd < 0) return 0;
  send_all(fd, request_text(port, "POST", path, body, {}));
  std::string all;
  char buf[4096];
  int events = 0;
  for (int i = 0; i < 100000 && events < n_events; ++i) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
    events = 0;
    for (size_t p = all.find("data: "); p != std::string::npos; p = all.find("data: ", p + 1)) ++events;
  }
  close(fd);
  return events;
}

}  // namespace ds::test
