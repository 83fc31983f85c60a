// See cli_args.h.
#include "tools/cli_args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "util/strings.h"

namespace ds::cli {

Status parse_int_arg(const std::string& flag, const std::string& value, int64_t lo, int64_t hi, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    return Status::invalid_argument(str_format("%s must be an integer in [%lld, %lld] (got '%s')", flag.c_str(),
                                               static_cast<long long>(lo), static_cast<long long>(hi), value.c_str()));
  }
  *out = v;
  return Status::ok();
}

Status parse_int_arg(const std::string& flag, const std::string& value, int64_t lo, int64_t hi, int* out) {
  int64_t v = 0;
  DS_RETURN_IF_ERROR(parse_int_arg(flag, value, lo, hi, &v));
  *out = static_cast<int>(v);
  return Status::ok();
}

Status parse_float_arg(const std::string& flag, const std::string& value, double lo, double hi, float* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < lo || v > hi) {
    return Status::invalid_argument(
        str_format("%s must be a number in [%g, %g] (got '%s')", flag.c_str(), lo, hi, value.c_str()));
  }
  *out = static_cast<float>(v);
  return Status::ok();
}

}  // namespace ds::cli
