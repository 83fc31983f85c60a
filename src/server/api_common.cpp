// JSON helpers, request parsing, submission and the generation runner shared by the routes.
// Field errors name the field and say what was expected, e.g.
//   "temperature" must be a number between 0 and 100 (got "hot")
#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>
#include <random>

#include "server/api_internal.h"
#include "server/json_parse.h"
#include "server/text_stream.h"

namespace ds {

std::string_view error_type_for(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 413:
      return "invalid_request_error";
    case 501:
      return "not_supported_error";
    case 503:
      return "unavailable_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

namespace {

// The HTTP status and error type of a failed Status ("" type: error_type_for the status).
struct HttpError {
  int status;
  const char* type;
};
HttpError http_error_of(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return {400, ""};
    case StatusCode::kOutOfRange:
      return {400, "exceed_context_size_error"};
    case StatusCode::kUnauthorized:
      return {401, ""};
    case StatusCode::kNotFound:
      return {404, ""};
    case StatusCode::kTooLarge:
      return {413, ""};
    case StatusCode::kUnimplemented:
      return {501, ""};
    case StatusCode::kUnavailable:
      return {503, ""};
    case StatusCode::kOk:
    case StatusCode::kError:
    case StatusCode::kInternal:
      break;
  }
  return {500, ""};
}

api::json error_object(int status, std::string_view message, std::string_view type) {
  return {{"code", status},
          {"message", std::string(message)},
          {"type", std::string(type.empty() ? error_type_for(status) : type)}};
}

HttpResponse error_reply(api::json error, int status, int retry_after_s) {
  HttpResponse r = api::json_response({{"error", std::move(error)}}, status);
  if (status == 503) r.headers.push_back({"Retry-After", std::to_string(retry_after_s)});
  return r;
}

}  // namespace

HttpResponse error_response(int status, std::string_view message, std::string_view type) {
  return error_reply(error_object(status, message, type), status, 1);
}

namespace api {

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

HttpResponse json_response(const json& body, int status) {
  HttpResponse r;
  r.status = status;
  r.body = dump(body);
  return r;
}

json error_json(const Status& st) {
  const HttpError h = http_error_of(st.code());
  json body = error_object(h.status, st.message(), h.type);
  for (const auto& [key, value] : st.details()) body[key] = value;
  return {{"error", std::move(body)}};
}

HttpResponse make_error(const Status& st, int retry_after_s) {
  json body = error_json(st);
  return error_reply(std::move(body["error"]), http_error_of(st.code()).status, retry_after_s);
}

Status parse_body(const std::string& body, json* out) {
  if (Status st = parse_json_bounded(body, out); !st) {
    return Status::invalid_argument("the request body is not accepted: " + st.message());
  }
  if (!out->is_object()) {
    return Status::invalid_argument("the request body must be a JSON object");
  }
  return Status::ok();
}

static Status field_error(const char* key, const std::string& expected, const json& got) {
  return Status::invalid_argument("\"" + std::string(key) + "\" must be " + expected + " (got " + json_preview(got) +
                                  ")");
}

Status get_int(const json& j, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  const std::string expected = "an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
  int64_t v;
  if (it->is_number_integer() && !(it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX))) {
    v = it->get<int64_t>();
  } else if (it->is_number_float() && std::isfinite(it->get<double>()) &&
             std::trunc(it->get<double>()) == it->get<double>() && std::abs(it->get<double>()) < 9e18) {
    v = static_cast<int64_t>(it->get<double>());
  } else {
    return field_error(key, expected, *it);
  }
  if (v < lo || v > hi) return field_error(key, expected, *it);
  *out = v;
  return Status::ok();
}

Status get_float(const json& j, const char* key, double lo, double hi, float* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  char buf[96];
  std::snprintf(buf, sizeof(buf), "a number between %g and %g", lo, hi);
  if (!it->is_number()) return field_error(key, buf, *it);
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) return field_error(key, buf, *it);
  *out = static_cast<float>(v);
  return Status::ok();
}

Status get_bool(const json& j, const char* key, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_boolean()) return field_error(key, "true or false", *it);
  *out = it->get<bool>();
  return Status::ok();
}

Status get_string(const json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_string()) return field_error(key, "a string", *it);
  *out = it->get<std::string>();
  return Status::ok();
}

static Status parse_stop(const json& j, std::vector<std::string>* out) {
  auto it = j.find("stop");
  if (it == j.end() || it->is_null()) return Status::ok();
  if (it->is_string()) {
    out->push_back(it->get<std::string>());
    return Status::ok();
  }
  if (!it->is_array() || it->size() > 16) return field_error("stop", "a string or an array of at most 16 strings", *it);
  for (const auto& s : *it) {
    if (!s.is_string()) return field_error("stop", "a string or an array of strings", *it);
    out->push_back(s.get<std::string>());
  }
  return Status::ok();
}

// logit_bias: llama.cpp's [[id|"text", bias|false], ...] or OpenAI's {"id": bias}. Text (a
// string in the array form, a key that is not a number in the object form) is tokenized and
// the bias applies to each of its tokens.
static Status parse_logit_bias(const json& j, const TextCodec& codec, SamplingParams* sp) {
  auto it = j.find("logit_bias");
  if (it == j.end() || it->is_null()) return Status::ok();
  const int32_t n_vocab = codec.n_vocab();
  const std::string expected =
      "[[token_id or \"text\", bias|false], ...] or {\"token_id or text\": bias} with ids below " +
      std::to_string(n_vocab);
  auto add = [&](const json& id, const json& bias, bool numeric_key) -> bool {
    float b;
    if (bias.is_boolean() && !bias.get<bool>())
      b = -INFINITY;
    else if (bias.is_number() && std::isfinite(bias.get<double>()))
      b = bias.get<float>();
    else
      return false;
    std::vector<int64_t> toks;
    if (id.is_number_integer()) {
      toks.push_back(id.get<int64_t>());
    } else if (id.is_string()) {
      const std::string& s = id.get_ref<const std::string&>();
      int64_t tok = -1;
      try {
        size_t used = 0;
        if (numeric_key) tok = std::stoll(s, &used);
        if (used != s.size()) tok = -1;
      } catch (...) {
        tok = -1;
      }
      if (tok >= 0) {
        toks.push_back(tok);
      } else {
        auto ids = codec.encode(s, false, false);
        if (!ids.is_ok() || ids->empty()) return false;
        toks.assign(ids->begin(), ids->end());
      }
    } else {
      return false;
    }
    for (int64_t tok : toks) {
      if (tok < 0 || tok >= n_vocab) return false;
      sp->logit_bias.push_back({static_cast<int32_t>(tok), b});
    }
    return true;
  };
  if (it->is_object()) {
    for (auto& [k, v] : it->items())
      if (!add(json(k), v, true)) return field_error("logit_bias", expected, *it);
  } else if (it->is_array()) {
    for (const auto& e : *it) {
      if (!e.is_array() || e.size() != 2 || !add(e[0], e[1], false)) return field_error("logit_bias", expected, *it);
    }
  } else {
    return field_error("logit_bias", expected, *it);
  }
  return Status::ok();
}

Status parse_sampling(const json& j, const ServerContext& ctx, CompletionRequest* r) {
  SamplingParams& sp = r->gen.sampling;
  sp = ctx.opts.sampling;  // server-wide defaults (--temp, --top-k, ...)
  int64_t n_predict = ctx.opts.n_predict, top_k = sp.top_k, repeat_last_n = sp.repeat_last_n, n_probs = 0;
  int64_t seed = -1;
  const int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  DS_RETURN_IF_ERROR(get_int(j, "max_tokens", -1, kMaxInt, &n_predict));
  DS_RETURN_IF_ERROR(get_int(j, "n_predict", -1, kMaxInt, &n_predict));
  DS_RETURN_IF_ERROR(get_float(j, "temperature", -1e9, 1e9, &sp.temperature));
  DS_RETURN_IF_ERROR(get_int(j, "top_k", -1, kMaxInt, &top_k));
  DS_RETURN_IF_ERROR(get_float(j, "top_p", 0, 1, &sp.top_p));
  DS_RETURN_IF_ERROR(get_float(j, "min_p", 0, 1, &sp.min_p));
  DS_RETURN_IF_ERROR(get_float(j, "typical_p", 0, 1, &sp.typical_p));
  DS_RETURN_IF_ERROR(get_float(j, "repeat_penalty", 0, 1e9, &sp.repeat_penalty));
  DS_RETURN_IF_ERROR(get_int(j, "repeat_last_n", -1, kMaxInt, &repeat_last_n));
  DS_RETURN_IF_ERROR(get_float(j, "presence_penalty", -2e3, 2e3, &sp.presence_penalty));
  DS_RETURN_IF_ERROR(get_float(j, "frequency_penalty", -2e3, 2e3, &sp.frequency_penalty));
  DS_RETURN_IF_ERROR(get_int(j, "seed", -1, std::numeric_limits<int64_t>::max(), &seed));
  DS_RETURN_IF_ERROR(get_int(j, "n_probs", 0, 100, &n_probs));
  DS_RETURN_IF_ERROR(get_bool(j, "ignore_eos", &r->gen.ignore_eos));
  DS_RETURN_IF_ERROR(get_bool(j, "cache_prompt", &r->gen.cache_prompt));
  DS_RETURN_IF_ERROR(get_bool(j, "stream", &r->stream));
  DS_RETURN_IF_ERROR(get_bool(j, "return_tokens", &r->return_tokens));
  DS_RETURN_IF_ERROR(get_bool(j, "timings_per_token", &r->timings_per_token));
  DS_RETURN_IF_ERROR(parse_stop(j, &r->stop));
  DS_RETURN_IF_ERROR(parse_logit_bias(j, *ctx.codec, &sp));
  DS_RETURN_IF_ERROR(parse_constraint(j, *ctx.codec, &sp));
  int64_t mirostat = 0;
  DS_RETURN_IF_ERROR(get_int(j, "mirostat", 0, 2, &mirostat));
  if (mirostat != 0) {
    return Status::invalid_argument("\"mirostat\" sampling is not supported (use 0)");
  }
  r->gen.n_predict = static_cast<int>(n_predict);
  sp.top_k = static_cast<int>(top_k);
  sp.repeat_last_n = static_cast<int>(repeat_last_n);
  sp.n_probs = static_cast<int>(n_probs);
  if (n_probs > 0) {  // llama.cpp's top_logprobs: the model's distribution
    sp.logprobs = true;
    sp.top_logprobs = static_cast<int>(n_probs);
  }
  if (seed >= 0)
    sp.seed = static_cast<uint64_t>(seed);
  else if (ctx.opts.random_seed)
    sp.seed = std::random_device{}();
  return Status::ok();
}

static int context_tokens(const ServerContext& ctx) {
  return ctx.loop ? ctx.loop->sched_options().n_ctx : ctx.opts.n_ctx;
}

size_t max_prompt_bytes(const ServerContext& ctx) {
  const size_t per_token = ctx.codec ? ctx.codec->max_bytes_per_token() : 0;
  return per_token == 0 ? 0 : static_cast<size_t>(context_tokens(ctx)) * per_token - 1;
}

Status check_prompt_bytes(const ServerContext& ctx, const char* field, size_t n_bytes, size_t n_tokens) {
  const size_t per_token = ctx.codec->max_bytes_per_token();
  const auto n_ctx = static_cast<size_t>(context_tokens(ctx));
  if (per_token == 0 || n_tokens + n_bytes / per_token < n_ctx) return Status::ok();
  return Status::error(StatusCode::kOutOfRange,
                       "the request exceeds the available context size: \"" + std::string(field) + "\" has " +
                           std::to_string(n_bytes) + " bytes of text, which is at least " +
                           std::to_string(n_tokens + n_bytes / per_token) + " tokens (a token stands for at most " +
                           std::to_string(per_token) + " bytes); the context holds " + std::to_string(n_ctx) +
                           " (try a shorter prompt)")
      .with_detail("n_prompt_bytes", static_cast<int64_t>(n_bytes))
      .with_detail("n_ctx", static_cast<int64_t>(n_ctx));
}

Status parse_prompt(const json& p, const ServerContext& ctx, std::vector<int32_t>* out) {
  const std::string expected = "a string, an array of token ids, or an array mixing strings and ids";
  const TextCodec& codec = *ctx.codec;
  auto add_text = [&](const std::string& s, bool first) -> Status {
    DS_RETURN_IF_ERROR(check_prompt_bytes(ctx, "prompt", s.size(), out->size()));
    auto ids = codec.encode(s, first, true);
    if (!ids.is_ok()) return Status::invalid_argument("\"prompt\": " + ids.message());
    out->insert(out->end(), ids->begin(), ids->end());
    return Status::ok();
  };
  if (p.is_string()) {
    DS_RETURN_IF_ERROR(add_text(p.get_ref<const std::string&>(), true));
  } else if (p.is_array()) {
    for (size_t i = 0; i < p.size(); ++i) {
      const json& x = p[i];
      if (x.is_string()) {
        DS_RETURN_IF_ERROR(add_text(x.get_ref<const std::string&>(), i == 0));
      } else if (x.is_number_integer()) {
        const int64_t id = x.get<int64_t>();
        if (id < 0 || id >= codec.n_vocab()) {
          return Status::invalid_argument("\"prompt\": token id " + std::to_string(id) + " at index " +
                                          std::to_string(i) + " is outside the vocabulary [0, " +
                                          std::to_string(codec.n_vocab()) + ")");
        }
        out->push_back(static_cast<int32_t>(id));
      } else if (x.is_array()) {
        return Status::invalid_argument("\"prompt\": several prompts in one request are not supported");
      } else {
        return field_error("prompt", expected, p);
      }
    }
  } else {
    return field_error("prompt", expected, p);
  }
  if (out->empty()) return Status::invalid_argument("\"prompt\" is empty");
  return Status::ok();
}

Status check_context(const ServerContext& ctx, size_t n_prompt) {
  const int n_ctx = context_tokens(ctx);
  if (n_prompt < static_cast<size_t>(n_ctx)) return Status::ok();
  return Status::error(StatusCode::kOutOfRange, "the request exceeds the available context size: the prompt has " +
                                                    std::to_string(n_prompt) + " tokens, the context holds " +
                                                    std::to_string(n_ctx) + " (try a shorter prompt)")
      .with_detail("n_prompt_tokens", static_cast<int64_t>(n_prompt))
      .with_detail("n_ctx", n_ctx);
}

Status submit(ServerContext& ctx, GenParams gen, std::shared_ptr<GenStream>* out) {
  const size_t n_prompt = gen.prompt.size();
  DS_RETURN_IF_ERROR(check_context(ctx, n_prompt));
  SubmitOutcome o = ctx.loop->submit(std::move(gen));
  switch (o.code) {
    case SubmitCode::kOk:
      *out = o.stream;
      return Status::ok();
    case SubmitCode::kQueueFull:
      ctx.counters.rejected_busy++;
      return Status::error(StatusCode::kUnavailable, "the server is busy: the request queue is full, retry later");
    case SubmitCode::kStopping:
      return Status::error(StatusCode::kUnavailable, "the server is shutting down");
    case SubmitCode::kInvalidToken:
      return Status::invalid_argument("\"prompt\" holds a token id outside the vocabulary");
    case SubmitCode::kTooLong:
      break;
  }
  return Status::error(StatusCode::kOutOfRange, "the request exceeds the available context size: the prompt of " +
                                                    std::to_string(n_prompt) + " tokens does not fit the KV cache")
      .with_detail("n_prompt_tokens", static_cast<int64_t>(n_prompt))
      .with_detail("n_ctx", context_tokens(ctx));
}

json timings_json(const GenStats& s) {
  const int prompt_n = s.n_prompt - s.n_cached;
  auto per_s = [](double n, double ms) { return ms > 0 ? 1000.0 * n / ms : 0.0; };
  return {{"cache_n", s.n_cached},
          {"prompt_n", prompt_n},
          {"prompt_ms", s.prompt_ms},
          {"prompt_per_token_ms", prompt_n ? s.prompt_ms / prompt_n : 0.0},
          {"prompt_per_second", per_s(prompt_n, s.prompt_ms)},
          {"predicted_n", s.n_generated},
          {"predicted_ms", s.predicted_ms},
          {"predicted_per_token_ms", s.n_generated ? s.predicted_ms / s.n_generated : 0.0},
          {"predicted_per_second", per_s(std::max(0, s.n_generated - 1), s.predicted_ms)}};
}

static json token_bytes_json(const std::string& t) {
  json b = json::array();
  for (unsigned char c : t) b.push_back(static_cast<int>(c));
  return b;
}

// llama.cpp's completion_probabilities entry: the model's log-probabilities (`logprob`,
// `top_logprobs`, from the sampler's logprobs, see runtime/sampler.h) and the sampling chain's
// final probabilities (`prob`, `top_probs`, what llama.cpp reports with post_sampling_probs).
static json probs_json(const ServerContext& ctx, const GenEvent& ev) {
  json top = json::array(), top_lp = json::array();
  double chosen = -1;
  for (const TokenProb& p : ev.probs) {
    const std::string t = ctx.codec->token_bytes(p.token);
    top.push_back({{"id", p.token},
                   {"token", utf8_sanitize(t)},
                   {"bytes", token_bytes_json(t)},
                   {"prob", p.prob},
                   {"logprob", p.prob > 0 ? std::log(p.prob) : -1e30}});
    if (p.token == ev.token) chosen = p.prob;
  }
  for (const TokenProb& p : ev.top_logprobs) {
    const std::string t = ctx.codec->token_bytes(p.token);
    top_lp.push_back(
        {{"id", p.token}, {"token", utf8_sanitize(t)}, {"bytes", token_bytes_json(t)}, {"logprob", p.prob}});
  }
  const std::string t = ctx.codec->token_bytes(ev.token);
  return {{"id", ev.token},
          {"token", utf8_sanitize(t)},
          {"bytes", token_bytes_json(t)},
          {"logprob", ev.logprob},
          {"prob", chosen > 0 ? json(chosen) : json(0.0)},
          {"top_logprobs", top_lp},
          {"top_probs", top}};
}

namespace {

// Turns GenStream events into text pieces (stop strings and UTF-8 applied) and a result.
class GenerationReader {
 public:
  GenerationReader(ServerContext& ctx, GenStream& stream, const CompletionRequest& req,
                   const std::function<bool(const Piece&)>& on_piece)
      : ctx_(ctx), stream_(stream), req_(req), on_piece_(on_piece), text_(req.stop) {}

  // Returns false when the generation is over (ended, stopped, or the client is gone).
  bool on_event(GenEvent& ev, const std::function<bool()>& alive) {
    r_.stats = ev.stats;
    piece_.stats = ev.stats;
    if (ev.done) return on_done(ev), false;
    r_.tokens.push_back(ev.token);
    piece_.tokens.push_back(ev.token);
    if (req_.gen.sampling.logprobs) {
      json e = logprob_entry(ctx_, ev);
      r_.logprobs.push_back(e);
      piece_.logprobs.push_back(std::move(e));
    }
    if (req_.gen.sampling.n_probs > 0) {
      json p = probs_json(ctx_, ev);
      r_.probs.push_back(p);
      piece_.probs.push_back(std::move(p));
    }
    std::string out = text_.push(ctx_.codec->token_text(ev.token));
    r_.content += out;
    if (text_.stopped()) {
      r_.stop_type = "word";
      r_.stopping_word = text_.stop_word();
      stream_.cancel();  // the loop frees the request at its next step
      emit(std::move(out));
      return false;
    }
    if (alive && !alive()) return client_gone(), false;
    emit(std::move(out));
    return !r_.client_gone;
  }
  void client_gone() {
    r_.client_gone = true;
    stream_.cancel();
  }
  GenResult& result() { return r_; }

 private:
  void on_done(const GenEvent& ev) {
    if (ev.reason == StopReason::kError) {
      r_.error = Status::error(StatusCode::kInternal, "generation failed: " + ev.error);
      return;
    }
    if (ev.reason == StopReason::kCancelled) r_.client_gone = true;
    r_.stop_type = ev.reason == StopReason::kEos ? "eos" : ev.reason == StopReason::kLimit ? "limit" : "none";
    std::string rest = text_.flush();
    r_.content += rest;
    emit(std::move(rest));
  }
  void emit(std::string s) {
    piece_.text += s;
    if (piece_.text.empty() || !on_piece_) return;  // tokens wait for text to go with
    if (!on_piece_(piece_)) client_gone();
    piece_ = Piece{};
  }

  ServerContext& ctx_;
  GenStream& stream_;
  const CompletionRequest& req_;
  const std::function<bool(const Piece&)>& on_piece_;
  StopTextStream text_;
  GenResult r_;
  Piece piece_;
};

}  // namespace

GenResult run_generation(ServerContext& ctx, GenStream& stream, const CompletionRequest& req,
                         const std::function<bool()>& alive, const std::function<bool(const Piece&)>& on_piece) {
  GenerationReader reader(ctx, stream, req, on_piece);
  while (true) {
    GenEvent ev;
    if (!stream.next(&ev, std::chrono::milliseconds(50))) {
      if (alive && !alive()) {
        reader.client_gone();
        break;
      }
      continue;
    }
    if (!reader.on_event(ev, alive)) break;
  }
  GenResult& r = reader.result();
  if (r.client_gone) ctx.counters.client_disconnects++;
  return std::move(r);
}

void log_request(const ServerContext& ctx, std::string_view route, int64_t id, const GenResult& r) {
  const GenStats& s = r.stats;
  const double tps = s.predicted_ms > 0 ? 1000.0 * std::max(0, s.n_generated - 1) / s.predicted_ms : 0.0;
  const std::string outcome = !r.error.is_ok() ? "error" : r.client_gone ? "disconnected" : r.stop_type;
  spdlog::info(
      "request id={} route={} prompt_tokens={} cached_tokens={} generated_tokens={} "
      "ttft_ms={:.1f} prompt_ms={:.1f} decode_tok_per_s={:.2f} stop={}",
      id, route, s.n_prompt, s.n_cached, s.n_generated, s.ttft_ms, s.prompt_ms, tps, outcome);
}

std::string sse_data(const json& j) {
  return "data: " + dump(j) + "\n\n";
}
std::string sse_done() {
  return "data: [DONE]\n\n";
}

}  // namespace api
}  // namespace ds
