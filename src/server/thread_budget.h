// How many threads ds-server will start, against how many more the system lets this process
// start (cgroup pids.max, e.g. systemd's TasksMax; RLIMIT_NPROC; kernel.threads-max). One
// HTTP thread per connection served at once means that `--max-queue 4090` under the shipped
// unit's TasksMax would fail to create threads; checking at start turns that into a clear
// error instead of an abort from inside the HTTP library.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "ds/status.h"
#include "server/config.h"

namespace ds {

struct ThreadLimit {
  int64_t available = 0;  // threads this process may still start
  std::string source;     // which limit, for the error message
};

// The tightest known limit, or nullopt when none applies (root without cgroup limits).
std::optional<ThreadLimit> thread_limit();

// Threads the configuration starts: HTTP threads, compute threads and a few of our own.
int64_t threads_needed(const ServerConfig& cfg, int n_http_threads);

// An error naming the options to lower when threads_needed exceeds thread_limit().
Status check_thread_budget(const ServerConfig& cfg, int n_http_threads);

}  // namespace ds
