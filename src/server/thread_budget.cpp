// See thread_budget.h. The limits are read from /proc and /sys at start; a limit that cannot
// be read is skipped, so the check never refuses a configuration on a guess.
#include "server/thread_budget.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/numa.h"

namespace ds {

namespace {

constexpr int kOwnThreads = 8;  // engine loop, signal thread, HTTP acceptor, logging, slack

std::optional<int64_t> read_int(const std::string& path) {
  std::ifstream f(path);
  int64_t v = 0;
  if (f >> v) return v;
  return std::nullopt;
}

// This process's "Threads:" line of /proc/self/status.
int64_t own_threads() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoll(line.substr(8));
  }
  return 1;
}

// pids.max - pids.current of this process's cgroup (v2 "0::/path" or v1 "N:pids:/path").
std::optional<ThreadLimit> cgroup_limit() {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::string dir;
    if (line.rfind("0::", 0) == 0)
      dir = "/sys/fs/cgroup" + path;
    else if (controllers == "pids")
      dir = "/sys/fs/cgroup/pids" + path;
    else
      continue;
    auto max = read_int(dir + "/pids.max"), cur = read_int(dir + "/pids.current");
    if (max && cur) return ThreadLimit{*max - *cur, "the cgroup's pids.max of " + std::to_string(*max) + " (TasksMax)"};
  }
  return std::nullopt;
}

}  // namespace

std::optional<ThreadLimit> thread_limit() {
  std::optional<ThreadLimit> best;
  auto consider = [&](std::optional<ThreadLimit> l) {
    if (l && (!best || l->available < best->available)) best = l;
  };
  consider(cgroup_limit());
  rlimit rl{};
  if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    // Counts every process and thread of the user; this process's own threads are the part
    // known here, so the estimate errs on the generous side.
    consider(ThreadLimit{static_cast<int64_t>(rl.rlim_cur) - own_threads(),
                         "RLIMIT_NPROC (ulimit -u) of " + std::to_string(rl.rlim_cur)});
  }
  if (auto max = read_int("/proc/sys/kernel/threads-max")) {
    std::ifstream f("/proc/loadavg");
    std::string a, b, c, running_total;
    if (f >> a >> b >> c >> running_total) {
      const size_t slash = running_total.find('/');
      const int64_t total = slash == std::string::npos ? 0 : std::stoll(running_total.substr(slash + 1));
      consider(ThreadLimit{*max - total, "kernel.threads-max of " + std::to_string(*max)});
    }
  }
  return best;
}

int64_t threads_needed(const ServerConfig& cfg, int n_http_threads) {
  const int compute = cfg.threads > 0 ? cfg.threads : std::max(1, topology().n_cores);
  return int64_t{n_http_threads} + compute + kOwnThreads;
}

Status check_thread_budget(const ServerConfig& cfg, int n_http_threads) {
  const auto limit = thread_limit();
  const int64_t need = threads_needed(cfg, n_http_threads);
  if (!limit || need <= limit->available) return Status::ok();
  std::ostringstream o;
  o << "this configuration needs about " << need << " threads (" << n_http_threads << " HTTP threads: --http-threads, "
    << "by default parallel + max-queue + 8; " << (need - n_http_threads - kOwnThreads)
    << " compute threads: --threads; " << kOwnThreads << " others) but only " << std::max<int64_t>(0, limit->available)
    << " more can be started (" << limit->source
    << "): lower --http-threads or --max-queue, or raise the limit (TasksMax=, ulimit -u)";
  return Status::error(o.str());
}

}  // namespace ds
