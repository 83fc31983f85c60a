// Output constraints from request fields: OpenAI `response_format` ({"type": "text"},
// {"type": "json_object"}, {"type": "json_schema", "json_schema": {"schema": ..., "strict":
// ...}}) and llama.cpp's `json_schema` (a schema) and `grammar` (GBNF text). Each becomes a
// constrain::Constraint on the request's SamplingParams; the sampler applies it.
//
// Compiled constraints are kept by GBNF text (a small LRU), so requests that repeat a schema
// share one Constraint and with it the cached token masks.
#include <list>
#include <mutex>

#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "constrain/tool_call_grammar.h"
#include "server/api_internal.h"

namespace ds {

std::shared_ptr<const constrain::TokenVocab> TextCodec::constraint_vocab() const {
  std::call_once(vocab_once_, [this] {
    vocab_ = constrain::TokenVocab::build(
        n_vocab(), [this](int32_t id) { return token_text(id); }, [this](int32_t id) { return is_eog(id); });
  });
  return vocab_;
}

namespace api {
namespace {

constexpr size_t kMaxCompiled = 32;

struct Compiled {
  std::string key;  // trigger, NUL, GBNF text
  const constrain::TokenVocab* vocab;
  std::shared_ptr<const constrain::Constraint> constraint;
};

std::mutex g_mu;
std::list<Compiled> g_compiled;  // most recently used first

Status from_schema(const json& schema, const TextCodec& codec, const std::string& field, SamplingParams* sp) {
  if (!schema.is_object() && !schema.is_boolean())
    return Status::invalid_argument("\"" + field + "\" must be a JSON Schema object");
  auto gbnf = constrain::json_schema_to_gbnf(schema);
  if (!gbnf) return Status::invalid_argument("\"" + field + "\": " + gbnf.message());
  return compile_constraint(gbnf.value(), codec, field, sp);
}

}  // namespace

Status compile_constraint(const std::string& gbnf, const TextCodec& codec, const std::string& field, SamplingParams* sp,
                          std::string_view trigger) {
  auto vocab = codec.constraint_vocab();
  const std::string key = std::string(trigger) + '\0' + gbnf;
  {
    std::lock_guard lk(g_mu);
    for (auto it = g_compiled.begin(); it != g_compiled.end(); ++it) {
      if (it->vocab == vocab.get() && it->key == key) {
        sp->constraint = it->constraint;
        g_compiled.splice(g_compiled.begin(), g_compiled, it);
        return Status::ok();
      }
    }
  }
  auto g = constrain::parse_gbnf(gbnf);
  if (!g) return Status::invalid_argument("\"" + field + "\": " + g.message());
  constrain::Grammar grammar = std::move(g).value();
  if (!trigger.empty()) grammar = constrain::auto_call_grammar(std::move(grammar), trigger);
  auto c = std::make_shared<const constrain::Constraint>(std::move(grammar), vocab);
  sp->constraint = c;
  std::lock_guard lk(g_mu);
  g_compiled.push_front({key, vocab.get(), c});
  if (g_compiled.size() > kMaxCompiled) g_compiled.pop_back();
  return Status::ok();
}

Status parse_constraint(const json& j, const TextCodec& codec, SamplingParams* sp) {
  const bool has_grammar = j.contains("grammar") && !j["grammar"].is_null();
  const bool has_schema = j.contains("json_schema") && !j["json_schema"].is_null();
  const bool has_format = j.contains("response_format") && !j["response_format"].is_null();
  if (has_grammar + has_schema + has_format > 1) {
    return Status::invalid_argument("use only one of \"grammar\", \"json_schema\" and \"response_format\"");
  }
  if (has_grammar) {
    if (!j["grammar"].is_string()) return Status::invalid_argument("\"grammar\" must be a string (GBNF)");
    if (j["grammar"].get_ref<const std::string&>().empty()) return Status::ok();
    return compile_constraint(j["grammar"].get<std::string>(), codec, "grammar", sp);
  }
  if (has_schema) return from_schema(j["json_schema"], codec, "json_schema", sp);
  if (!has_format) return Status::ok();
  const json& f = j["response_format"];
  if (!f.is_object() || !f.contains("type") || !f["type"].is_string()) {
    return Status::invalid_argument(
        "\"response_format\" must be an object with a \"type\" (text, json_object or json_schema)");
  }
  const std::string type = f["type"];
  if (type == "text") return Status::ok();
  if (type == "json_object") {
    if (f.contains("schema") && !f["schema"].is_null())
      return from_schema(f["schema"], codec, "response_format.schema", sp);
    return compile_constraint(constrain::json_object_gbnf(), codec, "response_format", sp);
  }
  if (type == "json_schema") {
    const json* js = f.contains("json_schema") ? &f["json_schema"] : nullptr;
    if (!js || !js->is_object())
      return Status::invalid_argument("\"response_format.json_schema\" must be an object with a \"schema\"");
    if (js->contains("strict") && !(*js)["strict"].is_boolean() && !(*js)["strict"].is_null()) {
      return Status::invalid_argument("\"response_format.json_schema.strict\" must be a boolean");
    }
    if (!js->contains("schema")) return Status::invalid_argument("\"response_format.json_schema.schema\" is required");
    return from_schema((*js)["schema"], codec, "response_format.json_schema.schema", sp);
  }
  return Status::invalid_argument("\"response_format.type\" must be text, json_object or json_schema, not '" + type +
                                  "'");
}

}  // namespace api
}  // namespace ds
