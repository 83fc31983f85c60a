// NFC normalization, the only ICU user. Qwen2's tokenizer normalizes to NFC before
// pre-tokenization (../shared/SPEC.md "Tokenizers"); the GGUF does not record it.
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <vector>

#include "text/unicode_utf8.h"

namespace ds::unicode {

std::string nfc(std::string_view text) {
  bool ascii = true;
  for (char c : text) ascii &= static_cast<uint8_t>(c) < 0x80;
  if (ascii) return std::string(text);  // ASCII is always NFC

  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* norm = unorm2_getNFCInstance(&err);
  if (U_FAILURE(err)) return std::string(text);
  // UTF-8 -> UTF-16 (at most one UTF-16 unit per byte).
  std::vector<UChar> src(text.size() + 1);
  int32_t src_len = 0;
  u_strFromUTF8(src.data(), static_cast<int32_t>(src.size()), &src_len, text.data(), static_cast<int32_t>(text.size()),
                &err);
  if (U_FAILURE(err)) return std::string(text);
  if (unorm2_isNormalized(norm, src.data(), src_len, &err) && U_SUCCESS(err)) {
    return std::string(text);
  }
  err = U_ZERO_ERROR;
  std::vector<UChar> dst(static_cast<size_t>(src_len) * 3 + 16);
  int32_t dst_len = unorm2_normalize(norm, src.data(), src_len, dst.data(), static_cast<int32_t>(dst.size()), &err);
  if (U_FAILURE(err)) return std::string(text);
  std::string out(static_cast<size_t>(dst_len) * 3 + 4, '\0');
  int32_t out_len = 0;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &out_len, dst.data(), dst_len, &err);
  if (U_FAILURE(err)) return std::string(text);
  out.resize(static_cast<size_t>(out_len));
  return out;
}

}  // namespace ds::unicode
