// Bounded JSON parsing for request bodies and the config file. A SAX pass over the text checks
// nesting depth and number range before any tree is built: nlohmann's tree is copied, dumped and
// destroyed recursively, so a body nested 100,000 levels deep would exhaust the stack in any of
// those, and an out-of-range number (1e400) would throw out of the DOM parser. Errors name the
// field by its path ("messages[2].content") and quote at most a few dozen bytes of the input, so
// neither megabytes nor the JSON library's own exception text reach the client.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "ds/status.h"

namespace ds {

// Deepest nesting of arrays and objects accepted in a request body or config file. Every field
// of the API is at most 4 levels deep (messages[i].content[j].text); 64 leaves room for clients
// that send extra structured fields, which are ignored.
inline constexpr int kMaxJsonDepth = 64;

// Parses `text` into *out after checking it with a depth- and range-checking SAX pass.
// The error message is a complete sentence fragment such as
//   invalid JSON at byte 17 (near "tru,")
//   "messages[0].content" nests deeper than 64 levels
//   "temperature": the number 1e400 is out of range
Status parse_json_bounded(std::string_view text, nlohmann::ordered_json* out, int max_depth = kMaxJsonDepth);

// A one-line description of a value for error messages, at most about 64 bytes: scalars as
// JSON (long strings cut with "..."), arrays and objects by their size. Not recursive.
std::string json_preview(const nlohmann::ordered_json& j);

}  // namespace ds
