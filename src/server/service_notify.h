// systemd service notifications (sd_notify): READY=1 once the model is loaded, STOPPING=1 when
// a drain begins, WATCHDOG=1 pings while the unit asks for a watchdog (WatchdogSec=). Outside
// systemd ($NOTIFY_SOCKET unset) every call does nothing.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string_view>
#include <thread>

namespace ds {

class ServiceNotifier {
 public:
  ServiceNotifier();
  ~ServiceNotifier();
  ServiceNotifier(const ServiceNotifier&) = delete;
  ServiceNotifier& operator=(const ServiceNotifier&) = delete;

  void ready(std::string_view status);  // READY=1 and STATUS=...; starts the watchdog pings
  void stopping();                      // STOPPING=1; the watchdog keeps pinging through the drain
  std::chrono::microseconds watchdog_interval() const { return watchdog_; }

 private:
  void send(std::string_view state);
  void ping_loop();

  std::chrono::microseconds watchdog_{0};  // half of WATCHDOG_USEC, 0 when no watchdog
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread pinger_;
};

}  // namespace ds
