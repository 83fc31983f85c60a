// llama.cpp-compatible routes: POST /completion (alias /completions), /tokenize, /detokenize.
// Streaming is Server-Sent Events: one `data: {json}` event per piece of text (content,
// tokens, stop:false), then a final event with stop:true and the totals; an error after the
// stream began becomes a `data: {"error":...}` event that ends the stream.
#include <cmath>

#include "server/api_internal.h"
#include "server/json_parse.h"
#include "server/text_stream.h"

namespace ds::api {

static json logit_bias_json(const SamplingParams& s) {
  json a = json::array();
  for (const auto& [tok, bias] : s.logit_bias) a.push_back({tok, std::isinf(bias) ? json(false) : json(bias)});
  return a;
}

// The generation stopped because the context was full (not at n_predict).
static bool truncated(const CompletionRequest& r, const GenResult& g) {
  return g.stop_type == "limit" && !(r.gen.n_predict >= 0 && g.stats.n_generated >= r.gen.n_predict);
}

static json generation_settings(const ServerContext& ctx, const CompletionRequest& r) {
  const SamplingParams& s = r.gen.sampling;
  return {{"n_ctx", ctx.loop->sched_options().n_ctx},
          {"n_predict", r.gen.n_predict},
          {"model", ctx.opts.model_alias},
          {"seed", s.seed},
          {"temperature", s.temperature},
          {"top_k", s.top_k},
          {"top_p", s.top_p},
          {"min_p", s.min_p},
          {"typical_p", s.typical_p},
          {"repeat_last_n", s.repeat_last_n},
          {"repeat_penalty", s.repeat_penalty},
          {"presence_penalty", s.presence_penalty},
          {"frequency_penalty", s.frequency_penalty},
          {"ignore_eos", r.gen.ignore_eos},
          {"n_probs", s.n_probs},
          {"logit_bias", logit_bias_json(s)},
          {"stop", r.stop},
          {"stream", r.stream},
          {"cache_prompt", r.gen.cache_prompt}};
}

static std::string prompt_text(const ServerContext& ctx, const CompletionRequest& r) {
  std::string text;
  for (int32_t t : r.gen.prompt) text += ctx.codec->token_bytes(t);
  return text;
}

static json final_object(const ServerContext& ctx, const CompletionRequest& r, const GenResult& g, int64_t id,
                         bool streaming) {
  json j = {{"index", 0},
            {"id", id},
            {"content", streaming ? std::string() : g.content},
            {"tokens", (r.return_tokens && !streaming) ? json(g.tokens) : json::array()},
            {"stop", true},
            {"model", ctx.opts.model_alias},
            {"tokens_predicted", g.stats.n_generated},
            {"tokens_evaluated", g.stats.n_prompt},
            {"tokens_cached", g.stats.n_cached},
            {"generation_settings", generation_settings(ctx, r)},
            {"has_new_line", g.content.find('\n') != std::string::npos},
            {"truncated", truncated(r, g)},
            {"prompt", utf8_sanitize(prompt_text(ctx, r))},
            {"id_slot", g.stats.id_slot},
            {"stop_type", g.stop_type},
            {"stopping_word", g.stopping_word},
            {"timings", timings_json(g.stats)}};
  if (r.gen.sampling.n_probs > 0 && !streaming) j["completion_probabilities"] = g.probs;
  return j;
}

static json partial_object(const CompletionRequest& r, const Piece& p, int64_t id) {
  json j = {{"index", 0},
            {"id", id},
            {"content", p.text},
            {"tokens", p.tokens},  // stream chunks always carry their token ids, as llama-server's
            {"stop", false},
            {"id_slot", p.stats.id_slot},
            {"tokens_predicted", p.stats.n_generated},
            {"tokens_evaluated", p.stats.n_prompt}};
  if (r.gen.sampling.n_probs > 0) j["completion_probabilities"] = p.probs;
  if (r.timings_per_token) j["timings"] = timings_json(p.stats);
  return j;
}

HttpResponse route_completion(ServerContext& ctx, const HttpRequest& req) {
  json body;
  if (Status st = parse_body(req.body, &body); !st) return make_error(st, ctx.opts.retry_after_s);
  auto r = std::make_shared<CompletionRequest>();
  if (!body.contains("prompt")) {
    return make_error(Status::invalid_argument("\"prompt\" is required"), ctx.opts.retry_after_s);
  }
  if (is_prompt_batch(body["prompt"])) return route_completion_batch(ctx, req, body);
  if (Status st = parse_prompt(body["prompt"], ctx, &r->gen.prompt); !st) return make_error(st, 1);
  if (Status st = parse_sampling(body, ctx, r.get()); !st) return make_error(st, 1);
  std::shared_ptr<GenStream> stream;
  if (Status st = submit(ctx, r->gen, &stream); !st) return make_error(st, ctx.opts.retry_after_s);
  const int64_t id = stream->id();
  if (!r->stream) {
    GenResult g = run_generation(ctx, *stream, *r, req.alive, {});
    log_request(ctx, req.path, id, g);
    if (!g.error.is_ok()) return make_error(g.error, 1);
    ctx.counters.completions_ok++;
    return json_response(final_object(ctx, *r, g, id, false));
  }
  HttpResponse resp;
  resp.content_type = "text/event-stream";
  resp.stream = [&ctx, r, stream, id, route = req.path](StreamSink& sink) {
    GenResult g = run_generation(ctx, *stream, *r, sink.alive,
                                 [&](const Piece& p) { return sink.write(sse_data(partial_object(*r, p, id))); });
    log_request(ctx, route, id, g);
    if (g.client_gone) return;
    if (!g.error.is_ok()) {
      sink.write(sse_data(error_json(g.error)));
      return;
    }
    ctx.counters.completions_ok++;
    sink.write(sse_data(final_object(ctx, *r, g, id, true)));
  };
  return resp;
}

HttpResponse route_tokenize(ServerContext& ctx, const HttpRequest& req) {
  json body;
  if (Status st = parse_body(req.body, &body); !st) return make_error(st, 1);
  std::string content;
  bool add_special = false, with_pieces = false;
  if (!body.contains("content")) return make_error(Status::invalid_argument("\"content\" is required"), 1);
  if (Status st = get_string(body, "content", &content); !st) return make_error(st, 1);
  if (Status st = get_bool(body, "add_special", &add_special); !st) return make_error(st, 1);
  if (Status st = get_bool(body, "with_pieces", &with_pieces); !st) return make_error(st, 1);
  if (Status st = check_prompt_bytes(ctx, "content", content.size()); !st) return make_error(st, 1);
  auto ids = ctx.codec->encode(content, add_special, true);
  if (!ids.is_ok()) return make_error(Status::invalid_argument("\"content\": " + ids.message()), 1);
  json tokens = json::array();
  for (int32_t id : *ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string bytes = ctx.codec->token_bytes(id);
    json piece = utf8_valid(bytes) ? json(bytes) : json(std::vector<uint8_t>(bytes.begin(), bytes.end()));
    tokens.push_back({{"id", id}, {"piece", piece}});
  }
  return json_response({{"tokens", tokens}});
}

HttpResponse route_detokenize(ServerContext& ctx, const HttpRequest& req) {
  json body;
  if (Status st = parse_body(req.body, &body); !st) return make_error(st, 1);
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) {
    return make_error(Status::invalid_argument("\"tokens\" must be an array of token ids"), 1);
  }
  std::string text;
  for (const auto& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= ctx.codec->n_vocab()) {
      return make_error(
          Status::invalid_argument("\"tokens\" must hold ids in [0, " + std::to_string(ctx.codec->n_vocab()) +
                                   ") (got " + json_preview(t) + ")"),
          1);
    }
    text += ctx.codec->token_bytes(static_cast<int32_t>(t.get<int64_t>()));
  }
  return json_response({{"content", utf8_sanitize(text)}});
}

}  // namespace ds::api
