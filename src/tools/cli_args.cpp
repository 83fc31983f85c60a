// See cli_args.h.
#include "tools/cli_args.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ds::cli {

bool parse_int_arg(const char* cmd, const std::string& flag, const std::string& value, int64_t lo, int64_t hi,
                   int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    std::fprintf(stderr, "ds-cli %s: %s must be an integer in [%lld, %lld] (got '%s')\n", cmd, flag.c_str(),
                 static_cast<long long>(lo), static_cast<long long>(hi), value.c_str());
    return false;
  }
  *out = v;
  return true;
}

bool parse_int_arg(const char* cmd, const std::string& flag, const std::string& value, int64_t lo, int64_t hi,
                   int* out) {
  int64_t v = 0;
  if (!parse_int_arg(cmd, flag, value, lo, hi, &v)) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parse_float_arg(const char* cmd, const std::string& flag, const std::string& value, double lo, double hi,
                     float* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < lo || v > hi) {
    std::fprintf(stderr, "ds-cli %s: %s must be a number in [%g, %g] (got '%s')\n", cmd, flag.c_str(), lo, hi,
                 value.c_str());
    return false;
  }
  *out = static_cast<float>(v);
  return true;
}

}  // namespace ds::cli
