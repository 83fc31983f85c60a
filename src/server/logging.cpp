// spdlog configuration; JSON lines escape the message with a custom pattern flag (%*).
#include "server/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

namespace ds {

namespace {

class JsonEscapedPayload final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    for (char c : msg.payload) {
      switch (c) {
        case '"':
          dest.append(std::string_view("\\\""));
          break;
        case '\\':
          dest.append(std::string_view("\\\\"));
          break;
        case '\n':
          dest.append(std::string_view("\\n"));
          break;
        case '\r':
          dest.append(std::string_view("\\r"));
          break;
        case '\t':
          dest.append(std::string_view("\\t"));
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            dest.append(std::string_view(buf));
          } else {
            dest.push_back(c);
          }
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonEscapedPayload>(); }
};

// "<N>" syslog priority prefix: journald reads it as the line's level (SyslogLevelPrefix=,
// on by default) and strips it.
class SyslogPriority final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    char prio = '6';
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug:
        prio = '7';
        break;
      case spdlog::level::warn:
        prio = '4';
        break;
      case spdlog::level::err:
        prio = '3';
        break;
      case spdlog::level::critical:
        prio = '2';
        break;
      default:
        break;
    }
    const char text[3] = {'<', prio, '>'};
    dest.append(text, text + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<SyslogPriority>(); }
};

// True when stderr is the journal's stream: systemd sets JOURNAL_STREAM to "DEV:INODE" of it.
bool stderr_is_journal() {
  const char* js = std::getenv("JOURNAL_STREAM");
  if (!js) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st{};
  if (fstat(2, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev && static_cast<unsigned long long>(st.st_ino) == ino;
}

}  // namespace

void setup_logging(const std::string& format) {
  auto logger = spdlog::stderr_logger_mt("ds-server");
  spdlog::set_default_logger(logger);
  // Under systemd the journal stamps the time itself; each line then starts with its level
  // as a syslog priority so that `journalctl -p warning` filters it.
  const std::string prefix = stderr_is_journal() ? "%Q" : "";
  auto f = std::make_unique<spdlog::pattern_formatter>();
  f->add_flag<JsonEscapedPayload>('*').add_flag<SyslogPriority>('Q');
  if (format == "json") {
    f->set_pattern(prefix + R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","msg":"%*"})");
  } else {
    f->set_pattern(prefix + "%Y-%m-%d %H:%M:%S.%e %l %v");
  }
  spdlog::set_formatter(std::move(f));
  spdlog::flush_on(spdlog::level::info);
}

}  // namespace ds
