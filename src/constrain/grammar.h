// One grammar form for every output constraint: a context-free grammar over bytes. GBNF
// (llama.cpp's grammar syntax) parses into it, and JSON Schema compiles to GBNF text first
// (json_schema.h), so both share one parser, one checker and one matcher (matcher.h).
//
// Bytes rather than code points: tokens of byte-level BPE vocabularies end in the middle of
// UTF-8 sequences, and a byte grammar matches such tokens without a partial-character state.
// A code point in a literal becomes its UTF-8 bytes; `.` and negated classes accept any
// well-formed multi-byte sequence (lead byte C2-F4 and its continuation bytes).
//
// Layout: every alternative of every rule is a run of symbols in `syms` ended by END, so a
// matcher position is one index. Repetitions (*, +, ?, {m,n}) are rewritten into right-
// recursive helper rules at parse time; left recursion is rejected (it would never end).
#pragma once
#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ds/status.h"

namespace ds::constrain {

struct Grammar {
  enum class Kind : uint8_t { kEnd, kTerm, kRef };
  struct Sym {
    Kind kind;
    uint32_t arg;  // TERM: index into sets; REF: rule id
  };
  std::vector<Sym> syms;
  std::vector<std::vector<uint32_t>> alts;  // rule id -> start index of each alternative in syms
  std::vector<std::bitset<256>> sets;       // byte sets of the terminals
  std::vector<std::string> names;           // rule id -> name
  uint32_t root = 0;
};

// llama.cpp's GBNF: `name ::= alternatives`, "literals", [classes], [^negated], `.`, ( groups ),
// postfix * + ? {m} {m,} {m,n}, # comments. The start rule is `root`. Errors name the line and
// column ("grammar: line 2, column 7: ...").
Result<Grammar> parse_gbnf(std::string_view text);

}  // namespace ds::constrain
