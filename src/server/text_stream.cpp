// UTF-8 and stop-string hold-back for streamed text; see text_stream.h.
#include "server/text_stream.h"

#include <algorithm>

#include "ds/tokenizer.h"  // utf8_complete_prefix

namespace ds {

// Length of the valid UTF-8 sequence starting at s[i] (1..4), 0 when it is invalid, or -1
// when it is a valid beginning cut off by the end of the string.
static int utf8_seq_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  int n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else
    return 0;
  for (int k = 1; k < n; ++k) {
    if (i + k >= s.size()) return -1;
    const unsigned char x = b(i + k);
    if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) return 0;
  }
  return n;
}

// Invalid bytes become U+FFFD together with the continuation bytes that follow them: the
// tokenizer's StreamDecoder rule (src/text/tokenizer.cpp), so the server's text equals what
// `ds-cli generate` prints for the same tokens.
std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const int n = utf8_seq_len(s, i);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    out += "\xEF\xBF\xBD";  // U+FFFD
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  }
  return out;
}

bool utf8_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const int n = utf8_seq_len(s, i);
    if (n <= 0) return false;
    i += n;
  }
  return true;
}

StopTextStream::StopTextStream(std::vector<std::string> stops) {
  for (auto& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopTextStream::push(std::string_view bytes) {
  if (stopped()) return {};
  // Stage 1: bytes -> valid UTF-8 text; an unfinished character waits for its next bytes.
  raw_.append(bytes);
  const size_t n = utf8_complete_prefix(raw_);
  pending_ += utf8_sanitize(std::string_view(raw_).substr(0, n));
  raw_.erase(0, n);
  return release(false);
}

// Stage 2: stop strings on valid text. Everything before the earliest complete stop string
// goes out and the rest is dropped; otherwise the longest tail that is a proper prefix of a
// stop string is held back (it starts on a character boundary: stop strings are valid UTF-8).
std::string StopTextStream::release(bool final) {
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const size_t p = pending_.find(s);
    if (p < best) best = p, stop_word_ = s;
  }
  if (best != std::string::npos) {
    std::string out = pending_.substr(0, best);
    pending_.clear();
    raw_.clear();
    return out;
  }
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold && !final; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopTextStream::flush() {
  if (stopped()) return {};
  pending_ += utf8_sanitize(raw_);
  raw_.clear();
  return release(true);
}

}  // namespace ds
