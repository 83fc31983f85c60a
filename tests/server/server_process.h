// Runs the real ds-server binary for the end-to-end tests: started on a free loopback port
// (--port 0, the bound port read from its log), waited for until /health says ok, and
// stopped with SIGTERM (the exit status is returned). Also a raw-socket HTTP client for the
// cases a library client cannot express (hanging up mid-stream, invalid UTF-8 bodies).
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace ds::test {

class ServerProcess {
 public:
  // args: after "ds-server" (e.g. {"--model", path, "--parallel", "4"}); --port 0 and
  // --host 127.0.0.1 are added. Fails the test (and returns false) when it does not come up.
  bool start(const std::vector<std::string>& args);
  // SIGTERM, wait up to timeout_s; returns the exit status (or -1 when it had to be killed).
  int stop(int timeout_s = 60);
  ~ServerProcess();

  // Waits up to timeout_ms for the process to exit by itself; its exit status as stop()
  // gives it, or -1 when it still runs.
  int wait_exit(int timeout_ms);

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_; }
  std::string log() const;

 private:
  pid_t pid_ = -1;
  int port_ = -1;
  std::string log_;
};

struct RawResponse {
  int status = 0;
  std::string headers;
  std::string body;  // de-chunked
};

// Sends one request over a fresh connection and reads the whole response.
RawResponse raw_request(int port, const std::string& method, const std::string& path, const std::string& body,
                        const std::vector<std::string>& extra_headers = {});
// Starts a streaming request, reads until `n_events` SSE events arrived, then closes the
// socket. Returns the number of events read.
int stream_then_hang_up(int port, const std::string& path, const std::string& body, int n_events);

}  // namespace ds::test
