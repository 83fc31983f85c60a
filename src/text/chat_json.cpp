// chat_tojson: Python json.dumps(ensure_ascii=False) formatting, which the chat templates'
// `tojson` produces and DeepSeek models saw in training: ", " between items, ": " after keys,
// non-ASCII text kept, control characters escaped as \n, \t, ... or \u00XX.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "text/chat_input.h"

namespace ds {

namespace {

// Python's repr(float): the shortest digits that round-trip, in fixed notation when the
// decimal exponent is in [-4, 16), else d.ddde+XX (at least two exponent digits); integral
// values keep ".0". json.dumps writes NaN and Infinity as such.
std::string python_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // e.g. "-1.25e+03", shortest round-trip digits
  std::string out;
  if (sci[0] == '-') {
    out = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  const int exp10 = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits += c;
  }
  if (exp10 >= -4 && exp10 < 16) {
    const int point = exp10 + 1;  // digits before the decimal point
    const int n = static_cast<int>(digits.size());
    if (point <= 0) return out + "0." + std::string(-point, '0') + digits;
    if (point >= n) return out + digits + std::string(point - n, '0') + ".0";
    return out + digits.substr(0, point) + "." + digits.substr(point);
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof(exp), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return out + exp;
}

void append_json(std::string& out, const nlohmann::ordered_json& v) {
  using json = nlohmann::ordered_json;
  switch (v.type()) {
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& x : v) {
        if (!first) out += ", ";
        first = false;
        append_json(out, x);
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        if (!first) out += ", ";
        first = false;
        out += json(k).dump(-1, ' ', false, json::error_handler_t::replace);
        out += ": ";
        append_json(out, x);
      }
      out += '}';
      return;
    }
    case json::value_t::number_float:
      out += python_float(v.get<double>());
      return;
    default:
      out += v.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

}  // namespace

std::string chat_tojson(const nlohmann::ordered_json& value) {
  std::string out;
  append_json(out, value);
  return out;
}

}  // namespace ds
