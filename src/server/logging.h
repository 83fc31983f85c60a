// Log set-up for ds-server: spdlog to stderr (the journal under systemd), as text lines or
// one JSON object per line (--log-format json).
#pragma once
#include <string>

namespace ds {

void setup_logging(const std::string& format);

}  // namespace ds
