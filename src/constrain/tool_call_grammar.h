// The grammar of a forced tool call (tool_choice required or a named function): the text the
// model writes after the prefill (ToolCallConstraint::prefix) up to the end of the call
// block, in the chat format's markup, with arguments constrained by the tool's parameter
// schema. One call per forced turn.
//
// R1 and V3.1 write the arguments as one JSON object (the parameters schema). DSML (V3.2,
// V4) writes one parameter element per property, required ones first in schema order, each
// with string="false" and a JSON value of the property's schema: the parser reads that value
// as JSON, so strings, numbers and objects all come out typed and schema-valid.
#pragma once
#include <string>

#include "ds/status.h"
#include "text/tool_call_parser.h"

namespace ds::constrain {

Result<std::string> tool_call_gbnf(const ToolCallConstraint& c);

}  // namespace ds::constrain
