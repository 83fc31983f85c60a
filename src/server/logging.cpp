// spdlog configuration; JSON lines escape the message with a custom pattern flag (%*).
// Access lines go through a second logger whose JSON pattern takes ready-made fields, so
// they carry typed fields instead of one message string.
#include "server/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

namespace ds {

namespace {

std::string g_format = "text";

void append_json_escaped(std::string_view text, spdlog::memory_buf_t& dest) {
  for (char c : text) {
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
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          dest.append(std::string_view(buf));
        } else {
          dest.push_back(c);
        }
    }
  }
}

// A client-chosen string for a log line: escaped as JSON (also in text lines, so a request
// target cannot forge a line) and cut at 256 bytes.
std::string quoted(std::string_view s) {
  spdlog::memory_buf_t buf;
  append_json_escaped(s.substr(0, 256), buf);
  return "\"" + std::string(buf.data(), buf.size()) + (s.size() > 256 ? "...\"" : "\"");
}

class JsonEscapedPayload final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    append_json_escaped(std::string_view(msg.payload.data(), msg.payload.size()), dest);
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
  struct stat st {};
  if (fstat(2, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev && static_cast<unsigned long long>(st.st_ino) == ino;
}

}  // namespace

void setup_logging(const std::string& format) {
  g_format = format;
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
  // After the global pattern, which spdlog applies to every logger registered so far.
  auto access = spdlog::stderr_logger_mt("access");
  access->flush_on(spdlog::level::info);
  auto af = std::make_unique<spdlog::pattern_formatter>();
  af->add_flag<SyslogPriority>('Q');
  if (format == "json") {
    af->set_pattern(prefix + R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","msg":"access",%v})");
  } else {
    af->set_pattern(prefix + "%Y-%m-%d %H:%M:%S.%e %l access %v");
  }
  access->set_formatter(std::move(af));
}

void log_access(const AccessRecord& r) {
  auto logger = spdlog::get("access");
  if (!logger) return;  // logging not set up (unit tests)
  const auto level = r.status >= 500 ? spdlog::level::warn : spdlog::level::info;
  if (g_format == "json") {
    logger->log(level,
                R"("id":{},"client":{},"method":{},"path":{},"status":{},"bytes_in":{},"bytes_out":{},"ms":{:.1f}{}{})",
                r.id, quoted(r.client), quoted(r.method), quoted(r.target), r.status, r.bytes_in, r.bytes_out, r.ms,
                r.error.empty() ? "" : ",\"error\":", r.error.empty() ? "" : quoted(r.error));
  } else {
    logger->log(level, "id={} client={} method={} path={} status={} in={} out={} ms={:.1f}{}{}", r.id, r.client,
                quoted(r.method), quoted(r.target), r.status, r.bytes_in, r.bytes_out, r.ms,
                r.error.empty() ? "" : " error=", r.error.empty() ? "" : quoted(r.error));
  }
}

}  // namespace ds
