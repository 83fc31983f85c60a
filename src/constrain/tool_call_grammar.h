// The grammar of a forced tool call (tool_choice required or a named function): the text the
// model writes after the prefill (ToolCallConstraint::prefix) up to the end of the call
// block, in the chat format's markup, with arguments constrained by the tool's parameter
// schema. One call per forced turn; under tool_choice auto, parallel calls in one block.
//
// R1 and V3.1 write the arguments as one JSON object (the parameters schema). DSML (V3.2,
// V4) writes one parameter element per property, required ones first in schema order, each
// with string="false" and a JSON value of the property's schema: the parser reads that value
// as JSON, so strings, numbers and objects all come out typed and schema-valid. A property
// whose schema is a plain string (no enum, length, pattern or format) may also be written as
// the templates ask for strings, string="true" with raw text (any text without "</").
//
// tool_choice auto: the model writes free text and may open a call; from the bytes that open
// a call block (the trigger) on, the call is constrained like a forced one. One grammar over
// bytes does both (auto_call_grammar): the free part accepts every byte string that does not
// contain the trigger (the complement of a string is regular: the states of a Knuth-Morris-
// Pratt matcher of the trigger, one rule each), and the trigger's last byte leads into the
// call grammar. Matching on bytes handles a token that straddles the trigger exactly: its
// bytes after the trigger must already fit the call. The free part may end anywhere, so EOS
// stays allowed in free text; the free text's stack sets are few (one per KMP state), so
// their masks come from the Constraint's cache.
#pragma once
#include <string>
#include <string_view>

#include "constrain/grammar.h"
#include "ds/status.h"
#include "text/tool_call_parser.h"

namespace ds::constrain {

// `lead`: the bytes the output starts with (auto: the rest of the opener after the trigger);
// with a lead and c.parallel, more calls may follow the first in the same block.
Result<std::string> tool_call_gbnf(const ToolCallConstraint& c, std::string_view lead = {});

// The bytes that open a call block in format `f`: R1 and V3.1 <｜tool▁calls▁begin｜>,
// V3.2 <｜DSML｜function_calls>, V4 <｜DSML｜tool_calls> ("" for NONE).
std::string_view tool_call_trigger(ToolCallFormat f);

// Any bytes that do not contain `trigger`, optionally followed by `trigger` and then `call`.
Grammar auto_call_grammar(Grammar call, std::string_view trigger);

}  // namespace ds::constrain
