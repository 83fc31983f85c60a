// Strict UTF-8 (RFC 3629) and the GPT-2 byte-level alphabet. The alphabet is built once from
// its definition (printable ranges '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF keep their value;
// the remaining bytes take U+0100 + n in increasing byte order) rather than from a table.
#include "text/unicode_utf8.h"

#include "ds/tokenizer.h"

namespace ds::unicode {

int decode_utf8(std::string_view s, size_t pos, uint32_t* cp) {
  const size_t n = s.size() - pos;
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[pos + i]); };
  const uint8_t c0 = b(0);
  if (c0 < 0x80) {
    *cp = c0;
    return 1;
  }
  int len;
  uint32_t v, min;
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    len = 2;
    v = c0 & 0x1F;
    min = 0x80;
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    len = 3;
    v = c0 & 0x0F;
    min = 0x800;
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    len = 4;
    v = c0 & 0x07;
    min = 0x10000;
  } else
    return 0;
  if (n < static_cast<size_t>(len)) return 0;
  for (int i = 1; i < len; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(i) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return len;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

static ByteLevel make_byte_level() {
  ByteLevel bl;
  bl.cp_to_byte.fill(-1);
  uint32_t next = 256;
  for (uint32_t byte = 0; byte < 256; ++byte) {
    const bool printable =
        (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
    const uint32_t cp = printable ? byte : next++;
    append_utf8(bl.byte_to_utf8[byte], cp);
    bl.cp_to_byte[cp] = static_cast<int16_t>(byte);
  }
  return bl;
}

const ByteLevel& byte_level() {
  static const ByteLevel bl = make_byte_level();
  return bl;
}

void byte_level_encode(std::string_view bytes, std::string& out) {
  const auto& bl = byte_level();
  for (char c : bytes) out += bl.byte_to_utf8[static_cast<uint8_t>(c)];
}

void byte_level_decode(std::string_view text, std::string& out) {
  const auto& bl = byte_level();
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cp = 0;
    int len = decode_utf8(text, pos, &cp);
    if (len == 0) {  // not UTF-8 (a malformed vocabulary entry): copy the byte
      out += text[pos++];
      continue;
    }
    if (cp < bl.cp_to_byte.size() && bl.cp_to_byte[cp] >= 0) {
      out += static_cast<char>(bl.cp_to_byte[cp]);
    } else {
      out.append(text.substr(pos, static_cast<size_t>(len)));
    }
    pos += static_cast<size_t>(len);
  }
}

}  // namespace ds::unicode

namespace ds {

std::optional<size_t> utf8_find_invalid(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    uint32_t cp = 0;
    int len = unicode::decode_utf8(s, pos, &cp);
    if (len == 0) return pos;
    pos += static_cast<size_t>(len);
  }
  return std::nullopt;
}

// Expected total length of a sequence from its lead byte (0 for bytes that cannot lead).
static int utf8_lead_length(uint8_t c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last 3 bytes can belong to an unfinished character.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t c = static_cast<uint8_t>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const int len = utf8_lead_length(c);
    if (len > static_cast<int>(back)) return n - back;  // lead byte still waiting for bytes
    return n;
  }
  return n;
}

}  // namespace ds
