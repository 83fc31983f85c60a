// spdlog configuration; JSON lines escape the message with a custom pattern flag (%*).
// Access lines go through a second logger whose JSON pattern takes ready-made fields, so
// they carry typed fields instead of one message string.
#include "server/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>

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

}  // namespace

void setup_logging(const std::string& format) {
  g_format = format;
  auto logger = spdlog::stderr_logger_mt("ds-server");
  spdlog::set_default_logger(logger);

  if (format == "json") {
    auto f = std::make_unique<spdlog::pattern_formatter>();
    f->add_flag<JsonEscapedPayload>('*').set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","msg":"%*"})");
    spdlog::set_formatter(std::move(f));
  } else {
    spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %l %v");
  }
  spdlog::flush_on(spdlog::level::info);
  // After the global pattern, which spdlog applies to every logger registered so far.
  auto access = spdlog::stderr_logger_mt("access");
  access->flush_on(spdlog::level::info);
  if (format == "json") {
    access->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","msg":"access",%v})");
  } else {
    access->set_pattern("%Y-%m-%d %H:%M:%S.%e %l access %v");
  }
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
