// Small string helpers shared across the code base.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ds {

// printf-style formatting into a std::string.
std::string str_format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Escapes control characters for display (\n, \t, \r, other bytes below 0x20 and 0x7F as \xNN);
// bytes of 0x80 and up, valid UTF-8 or not, pass through unchanged.
std::string escape_for_display(std::string_view s);
std::vector<std::string> str_split(std::string_view s, char sep);
bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);
// "1.5 GiB", "12.0 MiB", "512 B"
std::string human_bytes(double bytes);

}  // namespace ds
