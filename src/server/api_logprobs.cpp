// OpenAI logprobs. The values come from the sampler (runtime/sampler.h): log-softmax of the
// logits after logit bias, penalties and the output constraint, before temperature and
// truncation. Chat entries show token text as UTF-8 (invalid bytes replaced) with its raw
// `bytes`. The completions form has no `bytes`, and its top_logprobs is an object keyed by
// token text, where two byte tokens that are not UTF-8 by themselves would both read U+FFFD
// and collide; such tokens are written as OpenAI writes them, "bytes:\xNN" per byte.
#include <cstdio>

#include "server/api_internal.h"
#include "server/text_stream.h"

namespace ds::api {
namespace {

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// The completions form's text of a token (raw bytes as in logprob_entry's "bytes").
std::string completion_token(const json& bytes) {
  std::string raw;
  for (const json& b : bytes) raw += static_cast<char>(b.get<int>());
  if (utf8_valid(raw)) return raw;
  std::string out = "bytes:";
  char buf[8];
  for (unsigned char c : raw) {
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  }
  return out;
}

}  // namespace

json logprob_entry(const ServerContext& ctx, const GenEvent& ev) {
  json top = json::array();
  for (const TokenProb& p : ev.top_logprobs) {
    const std::string t = ctx.codec->token_bytes(p.token);
    top.push_back({{"token", utf8_sanitize(t)}, {"logprob", p.prob}, {"bytes", bytes_of(t)}});
  }
  const std::string t = ctx.codec->token_bytes(ev.token);
  return {{"token", utf8_sanitize(t)}, {"logprob", ev.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top}};
}

json chat_logprobs(const CompletionRequest& r, const json& entries) {
  if (!r.gen.sampling.logprobs) return nullptr;
  return {{"content", entries}};
}

json completion_logprobs(const CompletionRequest& r, const json& entries, size_t text_offset0) {
  if (!r.gen.sampling.logprobs) return nullptr;
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  size_t off = text_offset0;
  for (const json& e : entries) {
    tokens.push_back(completion_token(e["bytes"]));
    lps.push_back(e["logprob"]);
    json top = json::object();
    for (const json& t : e["top_logprobs"]) top[completion_token(t["bytes"])] = t["logprob"];
    tops.push_back(top);
    offsets.push_back(off);
    off += e["bytes"].size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

}  // namespace ds::api
