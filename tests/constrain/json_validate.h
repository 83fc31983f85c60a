// A small JSON Schema validator for the tests, written from the JSON Schema 2020-12 rules
// for the keywords the constraint engine supports, independent of src/constrain: type,
// properties, required, additionalProperties, enum, const, anyOf, oneOf, items,
// prefixItems, min/maxItems, min/maxLength (in code points), minimum, maximum,
// exclusiveMinimum/Maximum, pattern (ECMAScript search, std::regex), $ref to #, #/$defs/X,
// #/definitions/X, format date / time / date-time / uuid.
#pragma once
#include <nlohmann/json.hpp>
#include <map>
#include <regex>
#include <string>

namespace ds::test {

using ojson = nlohmann::ordered_json;

inline size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// "" when `v` is valid under `s`; else the first reason it is not.
inline std::string validate(const ojson& s, const ojson& v, const ojson& root, const std::string& at = "$") {
  if (s.is_boolean()) return s.get<bool>() ? "" : at + ": schema false";
  if (s.contains("$ref")) {
    const std::string r = s["$ref"];
    if (r == "#") return validate(root, v, root, at);
    for (const char* p : {"#/$defs/", "#/definitions/"}) {
      const std::string prefix(p);
      if (r.rfind(prefix, 0) == 0)
        return validate(root[prefix.substr(2, prefix.size() - 3)][r.substr(prefix.size())], v, root, at);
    }
    return at + ": unknown $ref " + r;
  }
  if (s.contains("const") && s["const"] != v) return at + ": not the const";
  if (s.contains("enum")) {
    bool found = false;
    for (const auto& e : s["enum"]) found = found || e == v;
    if (!found) return at + ": not in enum";
  }
  if (s.contains("anyOf")) {
    bool any = false;
    for (const auto& sub : s["anyOf"]) any = any || validate(sub, v, root, at).empty();
    if (!any) return at + ": matches no anyOf branch";
  }
  if (s.contains("oneOf")) {
    int n = 0;
    for (const auto& sub : s["oneOf"]) n += validate(sub, v, root, at).empty();
    if (n != 1) return at + ": matches " + std::to_string(n) + " oneOf branches";
  }
  if (s.contains("type")) {
    auto is = [&](const std::string& t) {
      if (t == "null") return v.is_null();
      if (t == "boolean") return v.is_boolean();
      if (t == "string") return v.is_string();
      if (t == "object") return v.is_object();
      if (t == "array") return v.is_array();
      if (t == "number") return v.is_number();
      if (t == "integer")
        return v.is_number_integer() ||
               (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())));
      return false;
    };
    bool ok = false;
    if (s["type"].is_string()) {
      ok = is(s["type"]);
    } else {
      for (const auto& t : s["type"]) ok = ok || is(t);
    }
    if (!ok) return at + ": wrong type (" + v.dump() + ")";
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return at + ": below minimum";
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return at + ": above maximum";
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>())
      return at + ": not above exclusiveMinimum";
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>())
      return at + ": not below exclusiveMaximum";
  }
  if (v.is_string()) {
    const std::string& str = v.get_ref<const std::string&>();
    const size_t n = utf8_length(str);
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return at + ": shorter than minLength";
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return at + ": longer than maxLength";
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>()))) {
      return at + ": does not match pattern " + s["pattern"].get<std::string>() + ": " + str;
    }
    if (s.contains("format")) {
      static const std::map<std::string, std::string> fmt = {
          {"date", R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$)"},
          {"time", R"(^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$)"},
          {"date-time",
           R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$)"},
          {"uuid", R"(^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$)"}};
      const std::string f = s["format"];
      if (fmt.count(f) && !std::regex_search(str, std::regex(fmt.at(f)))) return at + ": not a " + f + ": " + str;
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return at + ": fewer than minItems";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return at + ": more than maxItems";
    size_t first = 0;
    if (s.contains("prefixItems")) {
      const auto& p = s["prefixItems"];
      for (size_t i = 0; i < p.size() && i < v.size(); ++i) {
        std::string e = validate(p[i], v[i], root, at + "[" + std::to_string(i) + "]");
        if (!e.empty()) return e;
      }
      first = p.size();
    }
    if (s.contains("items")) {
      for (size_t i = first; i < v.size(); ++i) {
        std::string e = validate(s["items"], v[i], root, at + "[" + std::to_string(i) + "]");
        if (!e.empty()) return e;
      }
    }
  }
  if (v.is_object()) {
    if (s.contains("required")) {
      for (const auto& r : s["required"]) {
        if (!v.contains(r.get<std::string>())) return at + ": missing required " + r.get<std::string>();
      }
    }
    const ojson props = s.value("properties", ojson::object());
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        std::string e = validate(props[k], x, root, at + "." + k);
        if (!e.empty()) return e;
      } else if (s.contains("additionalProperties")) {
        std::string e = validate(s["additionalProperties"], x, root, at + "." + k);
        if (!e.empty()) return e;
      }
    }
  }
  return "";
}

inline std::string validate(const ojson& schema, const ojson& v) {
  return validate(schema, v, schema);
}

}  // namespace ds::test
