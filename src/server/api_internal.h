// Shared by the api_*.cpp route files (not part of the server's public surface): JSON
// field parsing with errors that name the field, submission to the engine loop, and the
// generation runner that turns a GenStream into text pieces with stop strings applied.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/api.h"

namespace ds::api {

using json = nlohmann::ordered_json;

// Every failure of a route is a Status (ds/status.h) with a message that names the field;
// make_error turns it into the OpenAI-style error reply once, at the response boundary: the
// StatusCode picks the HTTP status and error type (kInvalidArgument 400, kOutOfRange 400
// exceed_context_size_error, kUnauthorized 401, kNotFound 404, kTooLarge 413, kUnimplemented
// 501, kUnavailable 503 with Retry-After, anything else 500), and the Status's details become
// fields of the error object (n_prompt_tokens, n_ctx).
HttpResponse make_error(const Status& st, int retry_after_s);
// The {"error": {...}} object make_error sends, also written into a stream that fails.
json error_json(const Status& st);
HttpResponse json_response(const json& body, int status = 200);
std::string dump(const json& j);  // compact, invalid UTF-8 replaced

// Parses the body as a JSON object.
Status parse_body(const std::string& body, json* out);

// Typed, range-checked optional fields: absent or null leaves *out unchanged.
Status get_int(const json& j, const char* key, int64_t lo, int64_t hi, int64_t* out);
Status get_float(const json& j, const char* key, double lo, double hi, float* out);
Status get_bool(const json& j, const char* key, bool* out);
Status get_string(const json& j, const char* key, std::string* out);

// What /completion and the OpenAI routes parse out of a request body.
struct CompletionRequest {
  GenParams gen;
  std::vector<std::string> stop;
  bool stream = false;
  bool return_tokens = false;
  bool timings_per_token = false;
  bool include_usage = false;
};

// Sampling and limits shared by all generation routes (llama.cpp names, OpenAI aliases).
Status parse_sampling(const json& j, const ServerContext& ctx, CompletionRequest* r);
// Output constraints: OpenAI `response_format` (json_object, json_schema), llama.cpp
// `json_schema` and `grammar` -> sp->constraint (api_constrain.cpp).
Status parse_constraint(const json& j, const TextCodec& codec, SamplingParams* sp);
// A compiled constraint for GBNF text (shared with other requests that send the same text).
// With a trigger, the grammar is free text up to the trigger, then the GBNF's language
// (constrain::auto_call_grammar: tool_choice auto).
Status compile_constraint(const std::string& gbnf, const TextCodec& codec, const std::string& field, SamplingParams* sp,
                          std::string_view trigger = {});
// An array of prompts (strings or token arrays): one result per prompt (api_batch.cpp).
bool is_prompt_batch(const json& prompt);
HttpResponse route_completion_batch(ServerContext& ctx, const HttpRequest& req, const json& body);
HttpResponse route_oai_completions_batch(ServerContext& ctx, const HttpRequest& req, const json& body);
// n choices (1..kMaxChoices) of an OpenAI request, seeds seed + i (api_batch.cpp).
constexpr int kMaxChoices = 16;
inline bool wants_choices(const json& body) {
  return body.contains("n") && !body["n"].is_null() && body["n"] != 1;
}
HttpResponse route_oai_n(ServerContext& ctx, const HttpRequest& req, const json& body,
                         HttpResponse (*route)(ServerContext&, const HttpRequest&));
// prompt: a string, token ids, or a mixed array of both. Text that must exceed the context is
// rejected before it is tokenized (check_prompt_bytes).
Status parse_prompt(const json& prompt, const ServerContext& ctx, std::vector<int32_t>* out);
// [PROMPT_BYTES] 400 exceed_context_size_error when `n_bytes` of text following `n_tokens`
// tokens must be at least the context's length, whatever the text is.
Status check_prompt_bytes(const ServerContext& ctx, const char* field, size_t n_bytes, size_t n_tokens = 0);
// The largest text check_prompt_bytes lets through (0: no bound), reported by /props.
size_t max_prompt_bytes(const ServerContext& ctx);
Status check_context(const ServerContext& ctx, size_t n_prompt);

// Submits to the loop; on failure returns the HTTP error (503 busy, 400 too long, ...).
Status submit(ServerContext& ctx, GenParams gen, std::shared_ptr<GenStream>* out);

struct GenResult {
  std::string content;
  std::vector<int32_t> tokens;
  std::string stop_type = "none";  // eos | limit | word | none
  std::string stopping_word;
  GenStats stats;
  bool client_gone = false;
  Status error;                   // a generation that failed
  json probs = json::array();     // completion_probabilities when n_probs > 0
  json logprobs = json::array();  // with sampling.logprobs: one logprob_entry per token
};

struct Piece {
  std::string text;
  std::vector<int32_t> tokens;
  json probs = json::array();
  json logprobs = json::array();
  GenStats stats;
};

// OpenAI chat's logprobs entry of one token: {token, logprob, bytes, top_logprobs: [...]}.
json logprob_entry(const ServerContext& ctx, const GenEvent& ev);
// The chat form {"content": entries} or null; the completions form {tokens, token_logprobs,
// top_logprobs, text_offset} (offsets from text_offset0).
json chat_logprobs(const CompletionRequest& r, const json& entries);
json completion_logprobs(const CompletionRequest& r, const json& entries, size_t text_offset0);

// Reads the stream to its end. on_piece (may be empty) gets each piece of sendable text
// with the tokens that produced it and returns false when the client is gone; alive() is
// polled while waiting. Cancels the request on a stop string or a lost client.
GenResult run_generation(ServerContext& ctx, GenStream& stream, const CompletionRequest& req,
                         const std::function<bool()>& alive, const std::function<bool(const Piece&)>& on_piece);

json timings_json(const GenStats& s);
void log_request(const ServerContext& ctx, std::string_view route, int64_t id, const GenResult& r);

// SSE framing.
std::string sse_data(const json& j);
std::string sse_done();

// Routes.
HttpResponse route_completion(ServerContext& ctx, const HttpRequest& req);
HttpResponse route_tokenize(ServerContext& ctx, const HttpRequest& req);
HttpResponse route_detokenize(ServerContext& ctx, const HttpRequest& req);
HttpResponse route_oai_completions(ServerContext& ctx, const HttpRequest& req);
HttpResponse route_oai_chat(ServerContext& ctx, const HttpRequest& req);
HttpResponse route_oai_models(ServerContext& ctx, const HttpRequest& req);
HttpResponse route_apply_template(ServerContext& ctx, const HttpRequest& req);
std::string metrics_text(const ServerContext& ctx);

}  // namespace ds::api
