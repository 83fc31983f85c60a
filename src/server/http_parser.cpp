// HTTP/1.x request framing; see http_parser.h. Lines may end in CRLF or a bare LF (RFC 9112
// section 2.2 lets a recipient accept LF); everything else is strict.
#include "server/http_parser.h"

#include <algorithm>
#include <cctype>

namespace ds {

namespace {

ParseOutcome error(int status, std::string message) {
  return {.state = ParseOutcome::kError, .status = status, .message = std::move(message)};
}

ParseOutcome complete() {
  ParseOutcome o;
  o.state = ParseOutcome::kComplete;
  return o;
}

bool is_tchar(unsigned char c) {  // RFC 9110 token characters
  return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Calls fn(item) for each comma-separated, trimmed, non-empty item of a header value.
template <typename Fn>
void for_each_item(std::string_view v, Fn fn) {
  while (!v.empty()) {
    const size_t comma = v.find(',');
    const std::string_view item = trim(v.substr(0, comma));
    if (!item.empty()) fn(item);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
}

// The next line of `s` from `pos` without its CR/LF; npos in *next when no LF follows.
std::string_view next_line(std::string_view s, size_t pos, size_t* next) {
  const size_t lf = s.find('\n', pos);
  if (lf == std::string_view::npos) {
    *next = std::string_view::npos;
    return {};
  }
  *next = lf + 1;
  std::string_view line = s.substr(pos, lf - pos);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

void RequestParser::reset() {
  req_ = ParsedRequest{};
  head_done_ = false;
  scanned_ = 0;
  body_kind_ = Body::kNone;
  content_length_ = 0;
  chunk_pos_ = 0;
  chunks_done_ = false;
}

ParseOutcome RequestParser::parse(std::string_view in) {
  if (!head_done_) {
    // Empty lines before a request line are ignored (RFC 9112 section 2.2).
    size_t start = 0;
    while (start < in.size() && (in[start] == '\r' || in[start] == '\n')) ++start;
    // The head ends at an empty line: "\n\r\n" or "\n\n".
    size_t end = std::string_view::npos;
    for (size_t i = std::max(start, scanned_ > 2 ? scanned_ - 2 : 0); i < in.size(); ++i) {
      if (in[i] != '\n') continue;
      if (i + 1 < in.size() && in[i + 1] == '\n') {
        end = i + 2;
        break;
      }
      if (i + 2 < in.size() && in[i + 1] == '\r' && in[i + 2] == '\n') {
        end = i + 3;
        break;
      }
    }
    scanned_ = in.size();
    if (end == std::string_view::npos) {
      if (in.size() - start > limits_.max_header_bytes) {
        return error(
            431, "the request line and headers are larger than " + std::to_string(limits_.max_header_bytes) + " bytes");
      }
      return {};
    }
    if (end - start > limits_.max_header_bytes) {
      return error(
          431, "the request line and headers are larger than " + std::to_string(limits_.max_header_bytes) + " bytes");
    }
    if (ParseOutcome o = parse_head(in.substr(start, end - start)); o.state == ParseOutcome::kError) return o;
    if (ParseOutcome o = parse_framing(); o.state == ParseOutcome::kError) return o;
    head_done_ = true;
    req_.head_bytes = end;
    chunk_pos_ = end;
  }
  switch (body_kind_) {
    case Body::kNone:
      req_.consumed = req_.head_bytes;
      return complete();
    case Body::kLength:
      if (in.size() < req_.head_bytes + content_length_) return {};
      req_.body.assign(in.substr(req_.head_bytes, content_length_));
      req_.consumed = req_.head_bytes + content_length_;
      return complete();
    case Body::kChunked:
      return parse_chunked(in);
  }
  return {};
}

ParseOutcome RequestParser::parse_head(std::string_view head) {
  size_t pos = 0;
  const std::string_view line = next_line(head, 0, &pos);
  // request-line = method SP request-target SP HTTP-version
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return error(400, "malformed request line (expected 'METHOD /path HTTP/1.1')");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return error(400, "malformed request line: the method is not a token");
  if (target.size() > limits_.max_target_bytes) {
    return error(414, "the request target is longer than " + std::to_string(limits_.max_target_bytes) + " bytes");
  }
  if (target.empty() || std::any_of(target.begin(), target.end(),
                                    [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    return error(400, "malformed request line: invalid request target");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !std::isdigit(static_cast<unsigned char>(version[5])) ||
      version[6] != '.' || !std::isdigit(static_cast<unsigned char>(version[7]))) {
    return error(400, "malformed request line: invalid HTTP version");
  }
  if (version[5] != '1') return error(505, "HTTP version " + std::string(version.substr(5)) + " is not supported");
  req_.method = method;
  req_.target = target;
  req_.path = target.substr(0, target.find('?'));
  req_.minor_version = version[7] - '0';

  while (pos < head.size()) {
    size_t next = 0;
    const std::string_view field = next_line(head, pos, &next);
    pos = next;
    if (field.empty()) break;  // the blank line that ends the head
    if (field.front() == ' ' || field.front() == '\t')
      return error(400, "obsolete header line folding is not accepted");
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || !is_token(field.substr(0, colon))) {
      return error(400, "malformed header line (expected 'Name: value')");
    }
    const std::string_view value = trim(field.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), [](char c) {
          const auto u = static_cast<unsigned char>(c);
          return (u < 0x20 && c != '\t') || u == 0x7f;
        })) {
      return error(400, "header " + std::string(field.substr(0, colon)) + " holds a control character");
    }
    if (static_cast<int>(req_.headers.size()) >= limits_.max_header_fields) {
      return error(431, "more than " + std::to_string(limits_.max_header_fields) + " header fields");
    }
    req_.headers.emplace_back(lower(field.substr(0, colon)), std::string(value));
  }
  return {};
}

ParseOutcome RequestParser::parse_framing() {
  bool has_length = false, has_te = false, has_host = false;
  std::string te;
  req_.keep_alive = req_.minor_version >= 1;
  for (const auto& [name, value] : req_.headers) {
    if (name == "content-length") {
      bool bad = false;
      for_each_item(value, [&](std::string_view item) {
        uint64_t n = 0;
        if (item.size() > 18 || !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          bad = true;
          return;
        }
        for (char c : item) n = n * 10 + static_cast<uint64_t>(c - '0');
        if (has_length && n != content_length_) bad = true;
        content_length_ = n;
        has_length = true;
      });
      if (bad || !has_length) return error(400, "invalid or conflicting Content-Length headers");
    } else if (name == "transfer-encoding") {
      for_each_item(value, [&](std::string_view item) { te += (te.empty() ? "" : ",") + lower(item); });
      has_te = true;
    } else if (name == "host") {
      if (has_host) return error(400, "more than one Host header");
      has_host = true;
    } else if (name == "connection") {
      for_each_item(value, [&](std::string_view item) {
        const std::string t = lower(item);
        if (t == "close") req_.keep_alive = false;
        if (t == "keep-alive" && req_.minor_version == 0) req_.keep_alive = true;
      });
    } else if (name == "expect") {
      if (lower(value) != "100-continue") return error(417, "unsupported Expect: " + value);
      req_.expect_continue = true;
    }
  }
  if (req_.minor_version >= 1 && !has_host) return error(400, "HTTP/1.1 request without a Host header");
  if (has_te && has_length) return error(400, "Transfer-Encoding and Content-Length together are not accepted");
  if (has_te) {
    if (req_.minor_version == 0) return error(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (te != "chunked") return error(501, "Transfer-Encoding '" + te + "' is not supported (only chunked)");
    body_kind_ = Body::kChunked;
    return {};
  }
  if (has_length) {
    if (content_length_ > limits_.max_body_bytes) {
      return error(413, "the request body is too large (over " + std::to_string(limits_.max_body_bytes) + " bytes)");
    }
    body_kind_ = content_length_ ? Body::kLength : Body::kNone;
    return {};
  }
  if (req_.method == "POST" || req_.method == "PUT" || req_.method == "PATCH") {
    return error(411, req_.method + " needs a Content-Length header (or Transfer-Encoding: chunked)");
  }
  body_kind_ = Body::kNone;
  return {};
}

ParseOutcome RequestParser::parse_chunked(std::string_view in) {
  // Framing may not outgrow the body: 1-byte chunks would otherwise buffer 6x the limit.
  const size_t max_raw = req_.head_bytes + 2 * limits_.max_body_bytes + 4096;
  while (true) {
    size_t next = 0;
    const std::string_view line = next_line(in, chunk_pos_, &next);
    if (next == std::string_view::npos) {
      if (in.size() - chunk_pos_ > 1024) return error(400, "malformed chunked body: chunk-size line too long");
      return {};
    }
    if (chunks_done_) {  // trailer fields, ignored, until the empty line
      chunk_pos_ = next;
      if (line.empty()) {
        req_.consumed = next;
        return complete();
      }
      if (next - req_.head_bytes > max_raw) return error(400, "malformed chunked body: trailers too long");
      continue;
    }
    const std::string_view hex = trim(line.substr(0, line.find(';')));
    if (hex.empty() || hex.size() > 15 ||
        !std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); })) {
      return error(400, "malformed chunked body: invalid chunk size");
    }
    const uint64_t size = std::stoull(std::string(hex), nullptr, 16);
    if (req_.body.size() + size > limits_.max_body_bytes) {
      return error(413, "the request body is too large (over " + std::to_string(limits_.max_body_bytes) + " bytes)");
    }
    if (size == 0) {
      chunks_done_ = true;
      chunk_pos_ = next;
      continue;
    }
    const size_t end = next + size;  // the chunk data, then CRLF or LF
    if (in.size() < end + 1 || (in[end] == '\r' && in.size() < end + 2)) {
      if (in.size() > max_raw) return error(400, "malformed chunked body: too much framing");
      return {};
    }
    size_t after = 0;
    if (in[end] == '\n') {
      after = end + 1;
    } else if (in[end] == '\r' && in[end + 1] == '\n') {
      after = end + 2;
    } else {
      return error(400, "malformed chunked body: chunk data not followed by CRLF");
    }
    req_.body.append(in.substr(next, size));
    chunk_pos_ = after;
  }
}

}  // namespace ds
