// JSON Schema -> GBNF; see json_schema.h for the subset and the choices. Each schema node
// becomes a GBNF expression; shared pieces (string characters, numbers, whitespace) and
// every $ref target are named rules, so recursive schemas compile to recursive rules.
#include "constrain/json_schema.h"

#include <cctype>
#include <cmath>
#include <map>
#include <set>

namespace ds::constrain {
namespace {

using json = nlohmann::ordered_json;

constexpr int64_t kMaxBound = 1'000'000'000'000'000;  // |minimum|, |maximum| beyond this count as unbounded
constexpr int kMaxCount = 1000;                       // maxItems / maxLength beyond this count as unbounded

// Every instance must parse as JSON with a double's range: a \u escape is a code point that is
// not a surrogate, or a high surrogate followed by a low one; an exponent has at most two
// digits (16 integral digits and e+999 would overflow a double).
const char* kBaseRules = R"(space ::= "" | " " | "\n" [ \t]{0,20}
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" (utf16-unit | utf16-pair))
utf16-unit ::= [0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}
utf16-pair ::= [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2}
string ::= "\"" char* "\"" space
integral-part ::= "0" | [1-9] [0-9]{0,15}
integer ::= "-"? integral-part space
number ::= "-"? integral-part ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})? space
boolean ::= ("true" | "false") space
null ::= "null" space
value ::= object | array | string | number | boolean | null
object ::= "{" space (string ":" space value ("," space string ":" space value)*)? "}" space
array ::= "[" space (value ("," space value)*)? "]" space
)";

std::string literal(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789ABCDEF";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string digits_range(const std::string& lo, const std::string& hi);

// Non-negative integers in [lo, hi] written with the same number of digits.
std::string same_len_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "\"\"";
  if (lo[0] == hi[0]) return literal(lo.substr(0, 1)) + " " + same_len_range(lo.substr(1), hi.substr(1));
  const size_t n = lo.size() - 1;
  const std::string nines(n, '9'), zeros(n, '0');
  auto any = [&](size_t k) { return k == 0 ? std::string() : " [0-9]{" + std::to_string(k) + "}"; };
  std::vector<std::string> alts;
  int first = lo[0] - '0', last = hi[0] - '0';
  if (lo.substr(1) != zeros) {
    alts.push_back(literal(lo.substr(0, 1)) + " (" + same_len_range(lo.substr(1), nines) + ")");
    ++first;
  }
  const bool hi_full = hi.substr(1) == nines;
  if (!hi_full) --last;
  if (first <= last) alts.push_back("[" + std::to_string(first) + "-" + std::to_string(last) + "]" + any(n));
  if (!hi_full) alts.push_back(literal(hi.substr(0, 1)) + " (" + same_len_range(zeros, hi.substr(1)) + ")");
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
  return "(" + out + ")";
}

// Non-negative integers in [lo, hi] (decimal, no leading zeros).
std::string digits_range(const std::string& lo, const std::string& hi) {
  std::vector<std::string> alts;
  std::string a = lo;
  while (a.size() < hi.size()) {
    alts.push_back(same_len_range(a, std::string(a.size(), '9')));
    a = "1" + std::string(a.size(), '0');
  }
  alts.push_back(same_len_range(a, hi));
  std::string out;
  for (const auto& s : alts) out += (out.empty() ? "" : " | ") + s;
  return "(" + out + ")";
}

// Integers in [lo, hi]; kMaxBound stands for no bound.
std::string int_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  const std::string unbounded_pos = "[1-9] [0-9]{0,15}";
  if (lo < 0) {  // -m for m in [max(1, -hi), -lo]
    const int64_t mlo = std::max<int64_t>(1, hi < 0 ? -hi : 1);
    if (lo <= -kMaxBound) {
      alts.push_back(mlo == 1
                         ? "\"-\" " + unbounded_pos
                         : "\"-\" (" + digits_range(std::to_string(mlo), std::string(std::to_string(mlo).size(), '9')) +
                               " | [1-9] [0-9]{" + std::to_string(std::to_string(mlo).size()) + ",15})");
    } else {
      alts.push_back("\"-\" " + digits_range(std::to_string(mlo), std::to_string(-lo)));
    }
  }
  if (hi >= 0) {
    const int64_t plo = std::max<int64_t>(lo, 0);
    if (hi >= kMaxBound) {
      const std::string s = std::to_string(plo);
      alts.push_back(digits_range(s, std::string(s.size(), '9')) + " | [1-9] [0-9]{" + std::to_string(s.size()) +
                     ",15}");
    } else {
      alts.push_back(digits_range(std::to_string(plo), std::to_string(hi)));
    }
  }
  std::string out;
  for (const auto& s : alts) out += (out.empty() ? "" : " | ") + s;
  return "(" + out + ")";
}

// A simple regular expression (literals, escapes, classes, groups, |, quantifiers, .) -> a
// GBNF expression over JSON string characters.
class RegexToGbnf {
 public:
  explicit RegexToGbnf(std::string_view re) : re_(re) {}
  Result<std::string> run() {
    if (!re_.empty() && re_.front() == '^') re_.remove_prefix(1);
    if (!re_.empty() && re_.back() == '$' && (re_.size() < 2 || re_[re_.size() - 2] != '\\')) re_.remove_suffix(1);
    std::string out;
    if (!alternation(&out)) return Status::error(err_);
    if (i_ < re_.size()) return Status::error("pattern: unexpected ')' at offset " + std::to_string(i_));
    return out;
  }

 private:
  bool fail(const std::string& m) {
    err_ = "pattern: " + m + " at offset " + std::to_string(i_);
    return false;
  }
  bool alternation(std::string* out) {
    std::string seq;
    if (!sequence(&seq)) return false;
    std::string all = seq;
    while (i_ < re_.size() && re_[i_] == '|') {
      ++i_;
      seq.clear();
      if (!sequence(&seq)) return false;
      all += " | " + seq;
    }
    *out = "(" + (all.empty() ? "\"\"" : all) + ")";
    return true;
  }
  // A character as JSON string text: quote and backslash escaped, controls refused.
  static std::string json_char(char c) {
    if (c == '"') return literal("\\\"");
    if (c == '\\') return literal("\\\\");
    return literal(std::string(1, c));
  }
  bool escape_class(char e, std::string* cls) {
    switch (e) {
      case 'd':
        *cls = "0-9";
        return true;
      case 'w':
        *cls = "a-zA-Z0-9_";
        return true;
      case 's':
        *cls = " ";
        return true;  // a raw tab or newline is not JSON string text
      default:
        return false;
    }
  }
  bool atom(std::string* out) {
    const char c = re_[i_++];
    if (c == '(') {
      if (re_.substr(i_, 2) == "?:") i_ += 2;
      if (!alternation(out)) return false;
      if (i_ >= re_.size() || re_[i_] != ')') return fail("expected ')'");
      ++i_;
      return true;
    }
    if (c == '.') {
      *out = "[^\"\\\\\\x7F\\x00-\\x1F]";
      return true;
    }
    if (c == '[') return char_class(out);
    if (c == '\\') {
      if (i_ >= re_.size()) return fail("trailing backslash");
      const char e = re_[i_++];
      std::string cls;
      if (escape_class(e, &cls)) {
        *out = "[" + cls + "]";
        return true;
      }
      if (std::isalnum(static_cast<unsigned char>(e))) return fail(std::string("unsupported escape \\") + e);
      *out = json_char(e);
      return true;
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return fail("quantifier without an element");
    if (static_cast<unsigned char>(c) < 0x20) return fail("control character");
    *out = json_char(c);
    return true;
  }
  bool char_class(std::string* out) {
    std::string body;
    const bool negated = i_ < re_.size() && re_[i_] == '^';
    if (negated) ++i_;
    while (i_ < re_.size() && re_[i_] != ']') {
      const char c = re_[i_++];
      if (c == '\\') {
        if (i_ >= re_.size()) return fail("trailing backslash");
        const char e = re_[i_++];
        std::string cls;
        if (escape_class(e, &cls)) {
          body += cls;
        } else {
          body += std::string("\\") + e;
        }
      } else if (c == '"') {
        return fail("'\"' in a character class is not supported");
      } else {
        body += c;
      }
    }
    if (i_ >= re_.size()) return fail("unterminated character class");
    ++i_;
    // A negated class must also keep out what a JSON string cannot hold raw.
    *out = negated ? "[^" + body + "\"\\\\\\x7F\\x00-\\x1F]" : "[" + body + "]";
    return true;
  }
  bool sequence(std::string* out) {
    while (i_ < re_.size() && re_[i_] != '|' && re_[i_] != ')') {
      std::string a;
      if (!atom(&a)) return false;
      while (i_ < re_.size() && (re_[i_] == '*' || re_[i_] == '+' || re_[i_] == '?' || re_[i_] == '{')) {
        if (re_[i_] == '{') {
          const size_t e = re_.find('}', i_);
          if (e == std::string_view::npos) return fail("unterminated {m,n}");
          a += std::string(re_.substr(i_, e - i_ + 1));
          i_ = e + 1;
        } else {
          a += re_[i_++];
        }
        a = "(" + a + ")";
      }
      *out += (out->empty() ? "" : " ") + a;
    }
    return true;
  }
  std::string_view re_;
  size_t i_ = 0;
  std::string err_;
};

class Compiler {
 public:
  Compiler(const json& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

  // `name ::= ...` for `schema` (a part of root_) and the rules of its $ref targets.
  Result<std::string> rules(const json& schema, const std::string& name) {
    std::string expr;
    if (!visit(schema, "", &expr)) return Status::error(err_);
    std::string out = name + " ::= " + expr + "\n";
    for (const auto& [rule, body] : rules_) out += rule + " ::= " + body + "\n";
    return out;
  }

 private:
  bool fail(const std::string& path, const std::string& m) {
    err_ = "json_schema" + (path.empty() ? std::string() : " at " + path) + ": " + m;
    return false;
  }

  bool visit(const json& s, const std::string& path, std::string* out) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) return fail(path, "the schema 'false' matches nothing");
      *out = "value";
      return true;
    }
    if (!s.is_object()) return fail(path, "a schema must be an object");
    static const std::set<std::string> known = {"type",
                                                "properties",
                                                "required",
                                                "additionalProperties",
                                                "enum",
                                                "const",
                                                "anyOf",
                                                "oneOf",
                                                "items",
                                                "prefixItems",
                                                "minItems",
                                                "maxItems",
                                                "minLength",
                                                "maxLength",
                                                "minimum",
                                                "maximum",
                                                "exclusiveMinimum",
                                                "exclusiveMaximum",
                                                "pattern",
                                                "$ref",
                                                "$defs",
                                                "definitions",
                                                "format",
                                                "title",
                                                "description",
                                                "$schema",
                                                "$id",
                                                "default",
                                                "examples",
                                                "$comment",
                                                "strict",
                                                "nullable",
                                                "deprecated",
                                                "readOnly",
                                                "writeOnly"};
    for (const auto& [k, v] : s.items()) {
      if (!known.count(k)) return fail(path, "unsupported keyword '" + k + "'");
    }
    if (s.contains("$ref")) return ref(s["$ref"], path, out);
    if (s.contains("const")) {
      *out = literal(s["const"].dump()) + " space";
      return true;
    }
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) return fail(path + "/enum", "must be a non-empty array");
      std::string alts;
      for (const auto& v : s["enum"]) alts += (alts.empty() ? "" : " | ") + literal(v.dump());
      *out = "(" + alts + ") space";
      return true;
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& list = s[key];
      if (!list.is_array() || list.empty()) return fail(path + "/" + key, "must be a non-empty array");
      std::string alts;
      for (size_t i = 0; i < list.size(); ++i) {
        std::string e;
        if (!visit(list[i], path + "/" + key + "/" + std::to_string(i), &e)) return false;
        alts += (alts.empty() ? "" : " | ") + e;
      }
      *out = "(" + alts + ")";
      return true;
    }
    if (!s.contains("type")) {
      if (s.contains("properties")) return typed(s, "object", path, out);
      if (s.contains("items") || s.contains("prefixItems")) return typed(s, "array", path, out);
      *out = "value";
      return true;
    }
    const json& t = s["type"];
    if (t.is_string()) return typed(s, t.get<std::string>(), path, out);
    if (!t.is_array() || t.empty()) return fail(path + "/type", "must be a string or a non-empty array of strings");
    std::string alts;
    for (const auto& one : t) {
      if (!one.is_string()) return fail(path + "/type", "must be a string or a non-empty array of strings");
      std::string e;
      if (!typed(s, one.get<std::string>(), path, &e)) return false;
      alts += (alts.empty() ? "" : " | ") + e;
    }
    *out = "(" + alts + ")";
    return true;
  }

  bool ref(const json& r, const std::string& path, std::string* out) {
    if (!r.is_string()) return fail(path + "/$ref", "must be a string");
    const std::string target = r.get<std::string>();
    std::string name;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (target.rfind(prefix, 0) == 0) name = target.substr(std::string(prefix).size());
    }
    if (target == "#") name = "";
    if (name.empty() && target != "#")
      return fail(path + "/$ref", "only #, #/$defs/NAME and #/definitions/NAME are supported");
    std::string rule = prefix_ + "ref";
    for (char c : name) rule += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    rule += "-" + std::to_string(std::hash<std::string>{}(target) % 100000);
    *out = rule;
    if (rules_.count(rule) || pending_.count(rule)) return true;
    const json* def = &root_;
    if (!name.empty()) {
      const char* defs = target.rfind("#/$defs/", 0) == 0 ? "$defs" : "definitions";
      if (!root_.contains(defs) || !root_[defs].contains(name))
        return fail(path + "/$ref", "'" + target + "' is not defined");
      def = &root_[defs][name];
    }
    pending_.insert(rule);
    std::string body;
    if (!visit(*def, target.substr(1), &body)) return false;
    rules_[rule] = body;
    return true;
  }

  bool get_count(const json& s, const char* key, const std::string& path, int* out) {
    if (!s.contains(key)) return true;
    if (!s[key].is_number_integer() || s[key].get<int64_t>() < 0)
      return fail(path + "/" + key, "must be a non-negative integer");
    *out = static_cast<int>(std::min<int64_t>(s[key].get<int64_t>(), kMaxCount + 1));
    return true;
  }

  static std::string repeat(const std::string& item, int lo, int hi) {
    if (hi > kMaxCount) hi = -1;
    if (hi < 0) return "(" + item + "){" + std::to_string(lo) + ",}";
    return "(" + item + "){" + std::to_string(lo) + "," + std::to_string(hi) + "}";
  }

  bool typed(const json& s, const std::string& type, const std::string& path, std::string* out) {
    if (type == "null" || type == "boolean") {
      *out = type;
      return true;
    }
    if (type == "string") return string_type(s, path, out);
    if (type == "integer" || type == "number") return number_type(s, type == "integer", path, out);
    if (type == "array") return array_type(s, path, out);
    if (type == "object") return object_type(s, path, out);
    return fail(path + "/type", "unknown type '" + type + "'");
  }

  bool string_type(const json& s, const std::string& path, std::string* out) {
    if (s.contains("format")) {
      static const std::map<std::string, std::string> formats = {
          {"date", R"([0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]))"},
          {"time",
           R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{3})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))"},
          {"uuid", R"([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})"}};
      const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
      std::string body;
      if (f == "date-time") {
        body = formats.at("date") + " \"T\" " + formats.at("time");
      } else if (formats.count(f)) {
        body = formats.at(f);
      } else {
        return fail(path + "/format", "unsupported format '" + f + "' (date, time, date-time, uuid)");
      }
      *out = "\"\\\"\" " + body + " \"\\\"\" space";
      return true;
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return fail(path + "/pattern", "must be a string");
      auto g = RegexToGbnf(s["pattern"].get<std::string>()).run();
      if (!g) return fail(path + "/pattern", g.message());
      *out = "\"\\\"\" " + g.value() + " \"\\\"\" space";
      return true;
    }
    int lo = 0, hi = -1;
    if (!get_count(s, "minLength", path, &lo) || !get_count(s, "maxLength", path, &hi)) return false;
    if (hi >= 0 && hi < lo) return fail(path, "maxLength < minLength");
    *out = "\"\\\"\" " + repeat("char", lo, hi) + " \"\\\"\" space";
    return true;
  }

  bool bound(const json& s, const char* key, const std::string& path, double* out, bool* has) {
    if (!s.contains(key)) return true;
    if (!s[key].is_number()) return fail(path + "/" + key, "must be a number");
    *out = s[key].get<double>();
    *has = true;
    return true;
  }

  bool number_type(const json& s, bool integer, const std::string& path, std::string* out) {
    double mn = 0, mx = 0, xmn = 0, xmx = 0;
    bool has_mn = false, has_mx = false, has_xmn = false, has_xmx = false;
    if (!bound(s, "minimum", path, &mn, &has_mn) || !bound(s, "maximum", path, &mx, &has_mx) ||
        !bound(s, "exclusiveMinimum", path, &xmn, &has_xmn) || !bound(s, "exclusiveMaximum", path, &xmx, &has_xmx)) {
      return false;
    }
    if (!has_mn && !has_mx && !has_xmn && !has_xmx) {
      *out = integer ? "integer" : "number";
      return true;
    }
    // Integer bounds: the integers inside [min, max] (exclusive bounds step one past).
    auto clamp = [](double v) {
      return static_cast<int64_t>(std::max<double>(-kMaxBound, std::min<double>(kMaxBound, v)));
    };
    int64_t lo = -kMaxBound, hi = kMaxBound;
    if (has_mn) lo = std::max(lo, clamp(std::ceil(mn)));
    if (has_xmn) lo = std::max(lo, clamp(std::floor(xmn) + 1));
    if (has_mx) hi = std::min(hi, clamp(std::floor(mx)));
    if (has_xmx) hi = std::min(hi, clamp(std::ceil(xmx) - 1));
    if (lo > hi) return fail(path, "no integer lies within minimum/maximum");
    std::string alts = int_range(lo, hi);
    if (!integer) {
      // v.f for v >= 0 lies in [v, v+1): fractions for v in [max(lo,0), hi-1]; -m.f lies in
      // (-m-1, -m]: fractions for m in [max(1,-hi), -lo-1].
      const std::string frac = " \".\" [0-9]{1,16}";
      const int64_t plo = std::max<int64_t>(lo, 0), phi = hi >= kMaxBound ? kMaxBound : hi - 1;
      if (plo <= phi) alts += " | " + int_range(plo, phi) + frac;
      const int64_t mlo = std::max<int64_t>(1, -hi), mhi = lo <= -kMaxBound ? kMaxBound : -lo - 1;
      if (mlo <= mhi) alts += " | \"-\" " + int_range(mlo, mhi) + frac;
    }
    *out = "(" + alts + ") space";
    return true;
  }

  bool array_type(const json& s, const std::string& path, std::string* out) {
    if (s.contains("prefixItems")) {
      const json& p = s["prefixItems"];
      if (!p.is_array()) return fail(path + "/prefixItems", "must be an array");
      std::string seq = "\"[\" space";
      for (size_t i = 0; i < p.size(); ++i) {
        std::string e;
        if (!visit(p[i], path + "/prefixItems/" + std::to_string(i), &e)) return false;
        seq += (i ? " \",\" space " : " ") + e;
      }
      *out = "(" + seq + " \"]\" space)";
      return true;
    }
    std::string item = "value";
    if (s.contains("items") && !visit(s["items"], path + "/items", &item)) return false;
    int lo = 0, hi = -1;
    if (!get_count(s, "minItems", path, &lo) || !get_count(s, "maxItems", path, &hi)) return false;
    if (hi >= 0 && hi < lo) return fail(path, "maxItems < minItems");
    if (hi == 0) {
      *out = "(\"[\" space \"]\" space)";
      return true;
    }
    const std::string list =
        "(" + item + ") " +
        repeat("\",\" space (" + item + ")", lo > 0 ? lo - 1 : 0, hi > 0 && hi <= kMaxCount ? hi - 1 : -1);
    *out = "(\"[\" space " + (lo > 0 ? list : "(" + list + ")?") + " \"]\" space)";
    return true;
  }

  bool object_type(const json& s, const std::string& path, std::string* out) {
    const json props = s.contains("properties") ? s["properties"] : json::object();
    if (!props.is_object()) return fail(path + "/properties", "must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return fail(path + "/required", "must be an array of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) return fail(path + "/required", "must be an array of names");
        if (!props.contains(r.get<std::string>()))
          return fail(path + "/required", "'" + r.get<std::string>() + "' is not in properties");
        required.insert(r.get<std::string>());
      }
    }
    if (props.empty()) {
      std::string val = "value";
      if (s.contains("additionalProperties") && s["additionalProperties"].is_object() &&
          !visit(s["additionalProperties"], path + "/additionalProperties", &val)) {
        return false;
      }
      if (s.contains("additionalProperties") && s["additionalProperties"] == false) {
        *out = "(\"{\" space \"}\" space)";
        return true;
      }
      const std::string kv = "string \":\" space (" + val + ")";
      *out = "(\"{\" space (" + kv + " (\",\" space " + kv + ")*)? \"}\" space)";
      return true;
    }
    std::vector<std::string> req, opt;
    for (const auto& [name, sub] : props.items()) {
      std::string v;
      if (!visit(sub, path + "/properties/" + name, &v)) return false;
      std::string kv = literal(json(name).dump()) + " space \":\" space (" + v + ")";
      (required.count(name) ? req : opt).push_back(kv);
    }
    std::string body;
    for (size_t i = 0; i < req.size(); ++i) body += (i ? " \",\" space " : "") + req[i];
    if (!req.empty()) {
      for (const auto& o : opt) body += " (\",\" space " + o + ")?";
    } else {  // a subset of the optional properties, in order: the first one has no comma
      std::string alts;
      for (size_t i = 0; i < opt.size(); ++i) {
        std::string a = opt[i];
        for (size_t j = i + 1; j < opt.size(); ++j) a += " (\",\" space " + opt[j] + ")?";
        alts += (alts.empty() ? "" : " | ") + a;
      }
      body = "(" + alts + ")?";
    }
    *out = "(\"{\" space " + body + " \"}\" space)";
    return true;
  }

  const json& root_;
  std::string prefix_;
  std::string err_;
  std::map<std::string, std::string> rules_;
  std::set<std::string> pending_;
};

}  // namespace

Result<std::string> json_schema_to_gbnf(const json& schema) {
  auto r = Compiler(schema, "").rules(schema, "root");
  if (!r) return r;
  return r.value() + kBaseRules;
}

Result<std::string> json_schema_rules(const json& schema, const json& document, const std::string& name) {
  return Compiler(document, name + "-").rules(schema, name);
}

std::string json_base_rules() {
  return kBaseRules;
}

std::string json_object_gbnf() {
  return std::string("root ::= object\n") + kBaseRules;
}

}  // namespace ds::constrain
