// chat_tojson: Python json.dumps(ensure_ascii=False) formatting, which the chat templates'
// `tojson` produces and DeepSeek models saw in training: ", " between items, ": " after keys,
// non-ASCII text kept, control characters escaped as \n, \t, ... or \u00XX.
#include <cmath>

#include "model/chat_input.h"

namespace ds {

namespace {

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
    case json::value_t::number_float: {
      // Python writes integral floats as "1.0"; so does nlohmann. Infinity/NaN: Python's
      // "Infinity"/"NaN" (json.dumps allows them by default).
      const double d = v.get<double>();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        out += v.dump();
      }
      return;
    }
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
