// JSON Schema -> GBNF text (then parse_gbnf), the subset OpenAI structured outputs and
// llama.cpp accept: type (and type unions), properties, required, additionalProperties,
// enum, const, anyOf / oneOf, items / prefixItems, minItems / maxItems, minLength /
// maxLength, minimum / maximum / exclusiveMinimum / exclusiveMaximum, pattern (simple
// regular expressions), $ref to #/$defs or #/definitions, format date / time / date-time /
// uuid. An unsupported keyword is an error that names it and where it is.
//
// The grammar accepts a subset of the schema's instances (every output validates), chosen so
// generation always has a way to finish:
// - properties come in schema order, required ones first; extra properties are generated
//   only for an object schema without `properties` (a map);
// - a bounded `number` takes a fraction only where every fraction stays within the bounds;
// - numbers have at most 16 integer and 16 fraction digits; whitespace between tokens is at
//   most one newline and 20 indentation characters;
// - a pattern must match the whole string (as if anchored by ^ and $).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "ds/status.h"

namespace ds::constrain {

// The GBNF of values valid under `schema`; its start rule is `root`.
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// The rule `name` for values of `schema`, a part of `document` (where its $refs point), with
// the rules of its $ref targets (named after `name`), without the base rules: several of
// these and one json_base_rules() make one grammar (tool-call arguments).
Result<std::string> json_schema_rules(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& document,
                                      const std::string& name);
// The shared rules (value, string, number, space, ...).
std::string json_base_rules();

// The GBNF of any JSON object (response_format json_object).
std::string json_object_gbnf();

}  // namespace ds::constrain
