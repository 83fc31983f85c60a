// UTF-8 and byte-level helpers for the tokenizer (internal): strict UTF-8 decoding, the GPT-2
// byte <-> printable code point table used by byte-level BPE, and NFC normalization (ICU).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds::unicode {

// Decodes one strictly valid UTF-8 character at s[pos]; returns its length (1..4) and stores
// the code point, or returns 0 when the bytes there are not a valid character (overlong,
// surrogate, > U+10FFFF, truncated, stray continuation byte).
int decode_utf8(std::string_view s, size_t pos, uint32_t* cp);
void append_utf8(std::string& out, uint32_t cp);

// Byte-level BPE alphabet (GPT-2 bytes_to_unicode): printable Latin-1 bytes map to
// themselves, the other 68 bytes to U+0100.. in byte order.
struct ByteLevel {
  std::array<std::string, 256> byte_to_utf8;  // the code point of byte b, UTF-8 encoded
  std::array<int16_t, 324> cp_to_byte;        // code point (< 324) -> byte, or -1
};
const ByteLevel& byte_level();

// Appends the byte-level form of raw bytes (each byte -> its code point's UTF-8).
void byte_level_encode(std::string_view bytes, std::string& out);
// Inverse: code points of the alphabet become their bytes; any other character is copied.
void byte_level_decode(std::string_view text, std::string& out);

// Unicode NFC of valid UTF-8 text (ICU). ASCII-only text is returned unchanged quickly.
std::string nfc(std::string_view text);

}  // namespace ds::unicode
