// Numeric command-line values for ds-cli: the whole string must be a number within the
// option's range (no trailing text, no NaN or infinity), else a usage error
// (Status::invalid_argument, exit code 2) naming the option and the accepted range.
#pragma once
#include <cstdint>
#include <string>

#include "ds/status.h"

namespace ds::cli {

// Most compute threads any subcommand accepts; the system may allow fewer, which is then
// a clear error from the thread pool rather than an abort.
inline constexpr int64_t kMaxCliThreads = 4096;
// Most tokens of a context (or to generate) any subcommand accepts.
inline constexpr int64_t kMaxCliTokens = int64_t{1} << 24;

Status parse_int_arg(const std::string& flag, const std::string& value, int64_t lo, int64_t hi, int64_t* out);
Status parse_int_arg(const std::string& flag, const std::string& value, int64_t lo, int64_t hi, int* out);
Status parse_float_arg(const std::string& flag, const std::string& value, double lo, double hi, float* out);

}  // namespace ds::cli
