// GET /metrics in the Prometheus text format (version 0.0.4): request and token counters,
// queue depth, KV cache usage, prompt and decode throughput, and a time-to-first-token
// histogram. Names are prefixed ds_ and follow Prometheus conventions (_total, _seconds).
#include <sstream>

#include "server/api_internal.h"

namespace ds::api {

static void metric(std::ostringstream& o, const char* name, const char* type, const char* help, double v) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << v << '\n';
}

std::string metrics_text(const ServerContext& ctx) {
  const LoopStats s = ctx.loop->stats();
  const ApiCounters& c = ctx.counters;
  std::ostringstream o;
  o.precision(10);
  metric(o, "ds_http_requests_total", "counter", "HTTP requests received.", c.http_requests.load());
  metric(o, "ds_http_errors_4xx_total", "counter", "HTTP requests answered with a 4xx status.",
         c.http_errors_4xx.load());
  metric(o, "ds_http_errors_5xx_total", "counter", "HTTP requests answered with a 5xx status.",
         c.http_errors_5xx.load());
  metric(o, "ds_requests_total", "counter", "Generation requests accepted.", s.requests_total);
  metric(o, "ds_requests_completed_total", "counter", "Generation requests completed.", c.completions_ok.load());
  metric(o, "ds_requests_rejected_total", "counter", "Requests refused because the queue was full.",
         c.rejected_busy.load());
  metric(o, "ds_client_disconnects_total", "counter", "Requests cancelled by a client that went away.",
         c.client_disconnects.load());
  metric(o, "ds_prompt_tokens_total", "counter", "Prompt tokens computed (prefix-cache hits excluded).",
         s.tokens_prompt);
  metric(o, "ds_prompt_tokens_cached_total", "counter", "Prompt tokens reused from the prefix cache.", s.tokens_cached);
  metric(o, "ds_generated_tokens_total", "counter", "Tokens generated.", s.tokens_generated);
  metric(o, "ds_prompt_seconds_total", "counter", "Step time spent on prompt tokens.", s.prompt_seconds);
  metric(o, "ds_decode_seconds_total", "counter", "Step time spent on decode tokens.", s.decode_seconds);
  metric(o, "ds_prompt_tokens_per_second", "gauge", "Average prompt throughput since start.",
         s.prompt_seconds > 0 ? s.tokens_prompt / s.prompt_seconds : 0.0);
  metric(o, "ds_decode_tokens_per_second", "gauge", "Average decode throughput since start.",
         s.decode_seconds > 0 ? s.tokens_generated / s.decode_seconds : 0.0);
  metric(o, "ds_preemptions_total", "counter", "Requests preempted for lack of KV memory.", s.preemptions);
  metric(o, "ds_steps_total", "counter", "Engine steps run.", s.steps);
  metric(o, "ds_requests_running", "gauge", "Requests holding a KV slot.", s.n_running);
  metric(o, "ds_requests_waiting", "gauge", "Requests in the waiting queue.", s.n_waiting);
  metric(o, "ds_kv_blocks_total", "gauge", "KV cache blocks.", s.kv_blocks_total);
  metric(o, "ds_kv_blocks_used", "gauge", "KV cache blocks held by live requests.", s.kv_blocks_used);
  metric(o, "ds_kv_blocks_cached", "gauge", "KV cache blocks listed by the prefix cache.", s.kv_blocks_cached);
  metric(o, "ds_kv_usage_ratio", "gauge", "Fraction of KV blocks held by live requests.",
         s.kv_blocks_total ? static_cast<double>(s.kv_blocks_used) / s.kv_blocks_total : 0.0);
  o << "# HELP ds_time_to_first_token_seconds Time from request arrival to its first token.\n"
    << "# TYPE ds_time_to_first_token_seconds histogram\n";
  for (size_t i = 0; i < s.ttft_bucket_bounds.size(); ++i) {
    o << "ds_time_to_first_token_seconds_bucket{le=\"" << s.ttft_bucket_bounds[i] << "\"} " << s.ttft_bucket_counts[i]
      << '\n';
  }
  o << "ds_time_to_first_token_seconds_bucket{le=\"+Inf\"} " << s.ttft_bucket_counts.back() << '\n'
    << "ds_time_to_first_token_seconds_sum " << s.ttft_sum << '\n'
    << "ds_time_to_first_token_seconds_count " << s.ttft_bucket_counts.back() << '\n';
  return o.str();
}

}  // namespace ds::api
