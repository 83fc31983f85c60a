// GBNF -> Grammar (see grammar.h). A recursive-descent parser that builds rules as lists of
// alternatives, then flattens them and rejects left recursion.
//
// One leniency over llama.cpp: a rule's alternatives may continue on the next line without
// parentheses; a rule ends where the next `name ::=` starts.
#include "constrain/grammar.h"

#include <cctype>
#include <functional>
#include <map>

namespace ds::constrain {
namespace {

using Sym = Grammar::Sym;
using Kind = Grammar::Kind;
using Seq = std::vector<Sym>;
using ByteSet = std::bitset<256>;

constexpr int kMaxRepeat = 1000;         // {m,n} bounds above this are refused
constexpr uint32_t kMaxClassSpan = 256;  // non-ASCII ranges are expanded code point by code point

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

ByteSet byte_range(int lo, int hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(static_cast<size_t>(b));
  return s;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Result<Grammar> run() {
    skip_space();
    while (i_ < s_.size()) {
      if (!parse_rule()) return Status::error(err_);
      skip_space();
    }
    for (const auto& [name, id] : ids_) {
      if (!defined_[id]) return Status::error("grammar: undefined rule '" + name + "'" + ref_pos_[id]);
    }
    const auto root = ids_.find("root");
    if (root == ids_.end()) return Status::error("grammar: no 'root' rule");
    Grammar g = flatten(root->second);
    if (!check_left_recursion(g)) return Status::error(err_);
    return g;
  }

 private:
  bool fail(std::string msg) {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    err_ = "grammar: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + msg;
    return false;
  }
  bool eof() const { return i_ >= s_.size(); }
  char peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }

  void skip_space() {
    while (!eof()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++i_;
      } else if (c == '#') {
        while (!eof() && peek() != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string_view read_name() {
    const size_t b = i_;
    while (!eof() && is_name_char(peek())) ++i_;
    return s_.substr(b, i_ - b);
  }

  // At `name ::=`? (does not move)
  bool at_rule_start() {
    const size_t save = i_;
    const bool named = !read_name().empty();
    while (!eof() && (peek() == ' ' || peek() == '\t')) ++i_;
    const bool ok = named && s_.substr(i_, 3) == "::=";
    i_ = save;
    return ok;
  }

  uint32_t rule_id(std::string_view name) {
    auto it = ids_.find(std::string(name));
    if (it != ids_.end()) return it->second;
    const auto id = static_cast<uint32_t>(rules_.size());
    ids_.emplace(std::string(name), id);
    names_.emplace_back(name);
    rules_.emplace_back();
    defined_.push_back(false);
    ref_pos_.emplace_back();
    return id;
  }
  uint32_t new_rule(const std::string& base) {
    std::string name;
    do {
      name = base + "-" + std::to_string(++n_generated_);
    } while (ids_.count(name));
    const uint32_t id = rule_id(name);
    defined_[id] = true;
    return id;
  }
  Sym term(const ByteSet& set) {
    sets_.push_back(set);
    return {Kind::kTerm, static_cast<uint32_t>(sets_.size() - 1)};
  }
  Seq bytes_seq(const std::string& bytes) {
    Seq q;
    for (unsigned char c : bytes) q.push_back(term(ByteSet().set(c)));
    return q;
  }
  // The alternatives of one well-formed multi-byte UTF-8 character (RFC 3629's table: no
  // overlong forms, no surrogates, nothing above U+10FFFF), so that JSON parsers accept it.
  void add_utf8_multi(std::vector<Seq>* alts) {
    const ByteSet cont = byte_range(0x80, 0xBF);
    alts->push_back({term(byte_range(0xC2, 0xDF)), term(cont)});
    alts->push_back({term(ByteSet().set(0xE0)), term(byte_range(0xA0, 0xBF)), term(cont)});
    alts->push_back({term(byte_range(0xE1, 0xEC) | byte_range(0xEE, 0xEF)), term(cont), term(cont)});
    alts->push_back({term(ByteSet().set(0xED)), term(byte_range(0x80, 0x9F)), term(cont)});
    alts->push_back({term(ByteSet().set(0xF0)), term(byte_range(0x90, 0xBF)), term(cont), term(cont)});
    alts->push_back({term(byte_range(0xF1, 0xF3)), term(cont), term(cont), term(cont)});
    alts->push_back({term(ByteSet().set(0xF4)), term(byte_range(0x80, 0x8F)), term(cont), term(cont)});
  }

  bool parse_rule() {
    const size_t at = i_;
    const std::string_view name = read_name();
    if (name.empty()) return fail("expected a rule name");
    while (!eof() && (peek() == ' ' || peek() == '\t')) ++i_;
    if (s_.substr(i_, 3) != "::=") return fail("expected '::=' after rule name '" + std::string(name) + "'");
    i_ += 3;
    const uint32_t id = rule_id(name);
    if (defined_[id]) {
      i_ = at;
      return fail("rule '" + std::string(name) + "' is defined twice");
    }
    defined_[id] = true;
    std::vector<Seq> alts;
    if (!parse_alternates(name, &alts)) return false;
    if (!eof() && peek() == ')') return fail("unmatched ')'");
    rules_[id] = std::move(alts);
    return true;
  }

  bool parse_alternates(std::string_view rule, std::vector<Seq>* alts) {
    for (;;) {
      Seq seq;
      if (!parse_sequence(rule, &seq)) return false;
      alts->push_back(std::move(seq));
      skip_space();
      if (peek() != '|') return true;
      ++i_;
    }
  }

  bool parse_sequence(std::string_view rule, Seq* seq) {
    size_t last = SIZE_MAX;  // start of the last element in *seq
    for (;;) {
      skip_space();
      if (eof()) return true;
      const char c = peek();
      if (c == '|' || c == ')') return true;
      if (is_name_char(c)) {
        if (at_rule_start()) return true;
        const size_t at = i_;
        const uint32_t id = rule_id(read_name());
        if (ref_pos_[id].empty()) ref_pos_[id] = position_note(at);
        last = seq->size();
        seq->push_back({Kind::kRef, id});
      } else if (c == '"') {
        const size_t open = i_++;
        last = seq->size();
        std::string bytes;
        while (!eof() && peek() != '"' && peek() != '\n') {
          uint32_t cp = 0;
          if (!parse_char(&cp)) return false;
          append_utf8(cp, &bytes);
        }
        if (peek() != '"') {
          i_ = open;
          return fail("unterminated string literal");
        }
        ++i_;
        if (bytes.empty()) last = SIZE_MAX;
        for (const Sym& s : bytes_seq(bytes)) seq->push_back(s);
      } else if (c == '[') {
        last = seq->size();
        Sym s{};
        if (!parse_class(rule, &s)) return false;
        seq->push_back(s);
      } else if (c == '.') {
        ++i_;
        last = seq->size();
        seq->push_back({Kind::kRef, any_char_rule()});
      } else if (c == '(') {
        ++i_;
        const uint32_t id = new_rule(std::string(rule));
        std::vector<Seq> alts;
        if (!parse_alternates(rule, &alts)) return false;
        if (peek() != ')') return fail("expected ')'");
        ++i_;
        rules_[id] = std::move(alts);
        last = seq->size();
        seq->push_back({Kind::kRef, id});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last == SIZE_MAX) return fail(std::string("'") + c + "' follows no element");
        if (!parse_postfix(rule, seq, last)) return false;
      } else {
        return fail(std::string("unexpected character '") + c + "'");
      }
    }
  }

  std::string position_note(size_t at) {
    const size_t save = i_;
    i_ = at;
    fail("");
    i_ = save;
    return " (first used at " + err_.substr(9, err_.size() - 11) + ")";
  }

  uint32_t any_char_rule() {
    if (any_rule_ == UINT32_MAX) {
      any_rule_ = new_rule("any-char");
      std::vector<Seq> alts{{term(byte_range(0x00, 0x7F))}};
      add_utf8_multi(&alts);
      rules_[any_rule_] = std::move(alts);
    }
    return any_rule_;
  }

  // One character of a literal or class: UTF-8 source text or an escape.
  bool parse_char(uint32_t* cp) {
    const auto c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++i_;
      const char e = peek();
      ++i_;
      int digits = 0;
      switch (e) {
        case 'n':
          *cp = '\n';
          return true;
        case 'r':
          *cp = '\r';
          return true;
        case 't':
          *cp = '\t';
          return true;
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
          *cp = static_cast<uint32_t>(e);
          return true;
        case 'x':
          digits = 2;
          break;
        case 'u':
          digits = 4;
          break;
        case 'U':
          digits = 8;
          break;
        default:
          if (std::ispunct(static_cast<unsigned char>(e))) {  // \. \* ...: the character itself
            *cp = static_cast<uint32_t>(e);
            return true;
          }
          --i_;
          return fail(std::string("unknown escape '\\") + e + "'");
      }
      uint32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        const char h = peek();
        int d = -1;
        if (h >= '0' && h <= '9') d = h - '0';
        if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
        if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
        if (d < 0) return fail("expected a hex digit");
        v = v * 16 + static_cast<uint32_t>(d);
        ++i_;
      }
      if (v > 0x10FFFF) return fail("code point beyond U+10FFFF");
      *cp = v;
      return true;
    }
    // UTF-8 source text.
    int n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || i_ + static_cast<size_t>(n) > s_.size()) return fail("invalid UTF-8");
    uint32_t v = n == 1 ? c : c & (0x3F >> (n - 1));
    for (int k = 1; k < n; ++k) v = (v << 6) | (static_cast<unsigned char>(s_[i_ + static_cast<size_t>(k)]) & 0x3F);
    i_ += static_cast<size_t>(n);
    *cp = v;
    return true;
  }

  bool parse_class(std::string_view rule, Sym* out) {
    const size_t open = i_++;  // [
    const bool negated = peek() == '^';
    if (negated) ++i_;
    ByteSet ascii;
    std::vector<uint32_t> wide;  // non-ASCII code points
    while (!eof() && peek() != ']' && peek() != '\n') {
      uint32_t lo = 0, hi = 0;
      if (!parse_char(&lo)) return false;
      hi = lo;
      if (peek() == '-' && peek(1) != ']' && i_ + 1 < s_.size()) {
        ++i_;
        if (!parse_char(&hi)) return false;
        if (hi < lo) return fail("character range out of order");
      }
      for (uint32_t cp = lo; cp <= hi && cp < 0x80; ++cp) ascii.set(cp);
      if (hi >= 0x80) {
        if (negated) return fail("non-ASCII characters in a negated class are not supported");
        const uint32_t from = std::max<uint32_t>(lo, 0x80);
        if (hi - from >= kMaxClassSpan)
          return fail("a character range beyond ASCII wider than 256 code points is not supported");
        for (uint32_t cp = from; cp <= hi; ++cp) wide.push_back(cp);
      }
    }
    if (peek() != ']') {
      i_ = open;
      return fail("unterminated character class");
    }
    ++i_;
    if (negated) ascii = ~ascii & byte_range(0x00, 0x7F);
    if (!negated && wide.empty()) {
      *out = term(ascii);
      return true;
    }
    std::vector<Seq> alts;
    if (ascii.any()) alts.push_back({term(ascii)});
    for (uint32_t cp : wide) {
      std::string b;
      append_utf8(cp, &b);
      alts.push_back(bytes_seq(b));
    }
    if (negated) add_utf8_multi(&alts);
    const uint32_t id = new_rule(std::string(rule) + "-class");
    rules_[id] = std::move(alts);
    *out = {Kind::kRef, id};
    return true;
  }

  bool parse_int(int* v) {
    skip_space();
    if (!(peek() >= '0' && peek() <= '9')) return fail("expected a number");
    long x = 0;
    while (peek() >= '0' && peek() <= '9') {
      x = x * 10 + (peek() - '0');
      if (x > kMaxRepeat) return fail("repetition bound above " + std::to_string(kMaxRepeat));
      ++i_;
    }
    *v = static_cast<int>(x);
    return true;
  }

  // Rewrites the element at seq[last..] with its repetition.
  bool parse_postfix(std::string_view rule, Seq* seq, size_t last) {
    const std::string base(rule);
    Sym x = (*seq)[last];
    if (seq->size() - last > 1) {  // wrap a multi-symbol element (a literal) into a rule
      const uint32_t id = new_rule(base);
      rules_[id] = {Seq(seq->begin() + static_cast<std::ptrdiff_t>(last), seq->end())};
      x = {Kind::kRef, id};
    }
    seq->resize(last);
    int lo = 0, hi = -1;  // hi < 0: unbounded
    const char c = peek();
    ++i_;
    if (c == '*') {
      lo = 0;
    } else if (c == '+') {
      lo = 1;
    } else if (c == '?') {
      lo = 0;
      hi = 1;
    } else {
      if (!parse_int(&lo)) return false;
      skip_space();
      if (peek() == ',') {
        ++i_;
        skip_space();
        if (peek() != '}' && !parse_int(&hi)) return false;
      } else {
        hi = lo;
      }
      skip_space();
      if (peek() != '}') return fail("expected '}'");
      ++i_;
      if (hi >= 0 && hi < lo) return fail("repetition {m,n} with n < m");
    }
    for (int k = 0; k < lo; ++k) seq->push_back(x);
    if (hi < 0) {  // star ::= x star | ""
      const uint32_t star = new_rule(base + "-star");
      rules_[star] = {{x, {Kind::kRef, star}}, {}};
      seq->push_back({Kind::kRef, star});
    } else if (hi > lo) {  // opt_k ::= x opt_{k-1} | ""
      uint32_t prev = UINT32_MAX;
      for (int k = 0; k < hi - lo; ++k) {
        const uint32_t id = new_rule(base + "-opt");
        Seq first{x};
        if (prev != UINT32_MAX) first.push_back({Kind::kRef, prev});
        rules_[id] = {first, {}};
        prev = id;
      }
      seq->push_back({Kind::kRef, prev});
    }
    return true;
  }

  Grammar flatten(uint32_t root) {
    Grammar g;
    g.sets = std::move(sets_);
    g.names = names_;
    g.root = root;
    g.alts.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Seq& alt : rules_[r]) {
        g.alts[r].push_back(static_cast<uint32_t>(g.syms.size()));
        g.syms.insert(g.syms.end(), alt.begin(), alt.end());
        g.syms.push_back({Kind::kEnd, 0});
      }
    }
    return g;
  }

  // A rule that can reach itself without consuming a byte would expand forever.
  bool check_left_recursion(const Grammar& g) {
    const size_t n = g.alts.size();
    std::vector<bool> nullable(n, false);
    auto seq_nullable_until = [&](uint32_t pos, const std::function<void(uint32_t)>& on_ref) {
      for (; g.syms[pos].kind != Kind::kEnd; ++pos) {
        const Sym s = g.syms[pos];
        if (s.kind == Kind::kTerm) return false;
        if (on_ref) on_ref(s.arg);
        if (!nullable[s.arg]) return false;
      }
      return true;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (uint32_t a : g.alts[r]) {
          if (seq_nullable_until(a, nullptr)) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    std::vector<int> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::function<bool(uint32_t)> visit = [&](uint32_t r) {
      color[r] = 1;
      bool ok = true;
      for (uint32_t a : g.alts[r]) {
        seq_nullable_until(a, [&](uint32_t s) {
          if (!ok) return;
          if (color[s] == 1) {
            err_ = "grammar: rule '" + g.names[s] + "' is left-recursive (it can reach itself without consuming input)";
            ok = false;
          } else if (color[s] == 0) {
            ok = visit(s);
          }
        });
        if (!ok) return false;
      }
      color[r] = 2;
      return true;
    };
    for (uint32_t r = 0; r < n; ++r) {
      if (color[r] == 0 && !visit(r)) return false;
    }
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
  std::string err_;
  std::map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
  std::vector<std::vector<Seq>> rules_;
  std::vector<bool> defined_;
  std::vector<std::string> ref_pos_;
  std::vector<ByteSet> sets_;
  uint32_t any_rule_ = UINT32_MAX;
  int n_generated_ = 0;
};

}  // namespace

Result<Grammar> parse_gbnf(std::string_view text) {
  return Parser(text).run();
}

}  // namespace ds::constrain
