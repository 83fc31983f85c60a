// sd_notify from libsystemd; the watchdog pings run on a thread of their own, at half the
// interval systemd asks for, so a stuck process (not a busy one) is what the watchdog catches.
#include "server/service_notify.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <cstdint>
#include <string>

namespace ds {

ServiceNotifier::ServiceNotifier() {
  uint64_t usec = 0;
  // sd_watchdog_enabled checks that WATCHDOG_PID (if set) names this process.
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) watchdog_ = std::chrono::microseconds(usec / 2);
}

ServiceNotifier::~ServiceNotifier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (pinger_.joinable()) pinger_.join();
}

void ServiceNotifier::send(std::string_view state) {
  const std::string s(state);
  int rc = sd_notify(0, s.c_str());
  if (rc < 0) spdlog::warn("sd_notify({}) failed: error {}", s, -rc);
}

void ServiceNotifier::ready(std::string_view status) {
  send("READY=1\nSTATUS=" + std::string(status));
  if (watchdog_.count() > 0 && !pinger_.joinable()) pinger_ = std::thread([this] { ping_loop(); });
}

void ServiceNotifier::stopping() {
  send("STOPPING=1\nSTATUS=draining in-flight requests");
}

void ServiceNotifier::ping_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    lock.unlock();
    send("WATCHDOG=1");
    lock.lock();
    cv_.wait_for(lock, watchdog_, [this] { return done_; });
  }
}

}  // namespace ds
