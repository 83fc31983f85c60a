// Log set-up for ds-server: spdlog to stderr (the journal under systemd), as text lines or
// one JSON object per line (--log-format json). Every HTTP request, refused ones included,
// gets one access line (log_access) with its own fields in either format.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds {

void setup_logging(const std::string& format);

struct AccessRecord {
  uint64_t id = 0;          // also sent as X-Request-Id
  std::string_view client;  // "address:port"
  std::string_view method;  // "-" when the request line was unreadable
  std::string_view target;  // the request target as sent ("-" when unreadable)
  int status = 0;
  size_t bytes_in = 0;     // request line, headers and body as received
  size_t bytes_out = 0;    // everything written back, headers and framing included
  double ms = 0;           // from the request's first byte to its last response byte
  std::string_view error;  // why it was refused or failed; empty on success
};

// One access line: text `access id=... client=... method=... path="..." status=... in=...
// out=... ms=... [error="..."]`, or JSON {"time","level","msg":"access","id",...}.
void log_access(const AccessRecord& r);

}  // namespace ds
