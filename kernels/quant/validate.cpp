#include "kernels/quant/validate.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <utility>

#include "kernels/quant/blocks.h"
#include "kernels/quant/fp16.h"
#include "kernels/quant/iq_unpack.h"

namespace ds {
namespace {

std::string at_block(int64_t i, const char* field, float v) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "block %" PRId64 ": %s is %g (not finite)", i, field, static_cast<double>(v));
  return buf;
}

// The named half fields of each block must be finite.
template <typename Block>
using HalfField = std::pair<const char*, half_t Block::*>;

template <typename Block>
bool check_halves(const void* data, int64_t nb, std::string* why, std::initializer_list<HalfField<Block>> fields) {
  const auto* x = static_cast<const Block*>(data);
  for (int64_t i = 0; i < nb; ++i) {
    for (const auto& [name, member] : fields) {
      const float v = fp16_to_f32(x[i].*member);
      if (!std::isfinite(v)) {
        *why = at_block(i, name, v);
        return false;
      }
    }
  }
  return true;
}

bool check_iq1_m(const void* data, int64_t nb, std::string* why) {
  const auto* x = static_cast<const BlockIQ1_M*>(data);
  for (int64_t i = 0; i < nb; ++i) {
    const float v = fp16_to_f32(iq::iq1m_scale_bits(x[i]));
    if (!std::isfinite(v)) {
      *why = at_block(i, "the scale (from the scale words' top nibbles)", v);
      return false;
    }
  }
  return true;
}

bool check_mxfp4(const void* data, int64_t nb, std::string* why) {
  const auto* x = static_cast<const BlockMxfp4*>(data);
  for (int64_t i = 0; i < nb; ++i) {
    if (x[i].e == 0xFF) {
      char buf[96];
      std::snprintf(buf, sizeof(buf), "block %" PRId64 ": exponent byte 255 (E8M0 NaN)", i);
      *why = buf;
      return false;
    }
  }
  return true;
}

template <float (*kConv)(uint16_t)>
bool check_16bit(const void* data, int64_t n, std::string* why) {
  const auto* x = static_cast<const uint16_t*>(data);
  for (int64_t i = 0; i < n; ++i) {
    const float v = kConv(x[i]);
    if (!std::isfinite(v)) {
      *why = at_block(i, "value", v);
      return false;
    }
  }
  return true;
}

}  // namespace

bool validate_blocks(GgmlType t, const void* data, int64_t nb, std::string* why) {
  switch (t) {
    case GgmlType::F32: {
      const auto* x = static_cast<const float*>(data);
      for (int64_t i = 0; i < nb; ++i) {
        if (!std::isfinite(x[i])) {
          *why = at_block(i, "value", x[i]);
          return false;
        }
      }
      return true;
    }
    case GgmlType::F16:
      return check_16bit<fp16_to_f32>(data, nb, why);
    case GgmlType::BF16:
      return check_16bit<bf16_to_f32>(data, nb, why);
    case GgmlType::Q4_0:
      return check_halves<BlockQ4_0>(data, nb, why, {{"d", &BlockQ4_0::d}});
    case GgmlType::Q4_1:
      return check_halves<BlockQ4_1>(data, nb, why, {{"d", &BlockQ4_1::d}, {"m", &BlockQ4_1::m}});
    case GgmlType::Q5_0:
      return check_halves<BlockQ5_0>(data, nb, why, {{"d", &BlockQ5_0::d}});
    case GgmlType::Q5_1:
      return check_halves<BlockQ5_1>(data, nb, why, {{"d", &BlockQ5_1::d}, {"m", &BlockQ5_1::m}});
    case GgmlType::Q8_0:
      return check_halves<BlockQ8_0>(data, nb, why, {{"d", &BlockQ8_0::d}});
    case GgmlType::Q8_1:
      return check_halves<BlockQ8_1>(data, nb, why, {{"d", &BlockQ8_1::d}, {"s", &BlockQ8_1::s}});
    case GgmlType::Q2_K:
      return check_halves<BlockQ2_K>(data, nb, why, {{"d", &BlockQ2_K::d}, {"dmin", &BlockQ2_K::dmin}});
    case GgmlType::Q3_K:
      return check_halves<BlockQ3_K>(data, nb, why, {{"d", &BlockQ3_K::d}});
    case GgmlType::Q4_K:
      return check_halves<BlockQ4_K>(data, nb, why, {{"d", &BlockQ4_K::d}, {"dmin", &BlockQ4_K::dmin}});
    case GgmlType::Q5_K:
      return check_halves<BlockQ5_K>(data, nb, why, {{"d", &BlockQ5_K::d}, {"dmin", &BlockQ5_K::dmin}});
    case GgmlType::Q6_K:
      return check_halves<BlockQ6_K>(data, nb, why, {{"d", &BlockQ6_K::d}});
    case GgmlType::IQ2_XXS:
      return check_halves<BlockIQ2_XXS>(data, nb, why, {{"d", &BlockIQ2_XXS::d}});
    case GgmlType::IQ2_XS:
      return check_halves<BlockIQ2_XS>(data, nb, why, {{"d", &BlockIQ2_XS::d}});
    case GgmlType::IQ2_S:
      return check_halves<BlockIQ2_S>(data, nb, why, {{"d", &BlockIQ2_S::d}});
    case GgmlType::IQ3_XXS:
      return check_halves<BlockIQ3_XXS>(data, nb, why, {{"d", &BlockIQ3_XXS::d}});
    case GgmlType::IQ3_S:
      return check_halves<BlockIQ3_S>(data, nb, why, {{"d", &BlockIQ3_S::d}});
    case GgmlType::IQ1_S:
      return check_halves<BlockIQ1_S>(data, nb, why, {{"d", &BlockIQ1_S::d}});
    case GgmlType::IQ4_NL:
      return check_halves<BlockIQ4_NL>(data, nb, why, {{"d", &BlockIQ4_NL::d}});
    case GgmlType::IQ4_XS:
      return check_halves<BlockIQ4_XS>(data, nb, why, {{"d", &BlockIQ4_XS::d}});
    case GgmlType::IQ1_M:
      return check_iq1_m(data, nb, why);
    case GgmlType::MXFP4:
      return check_mxfp4(data, nb, why);
    case GgmlType::I32:
      return true;  // any int32 is valid here; users range-check ids (weights.cpp)
    case GgmlType::Q8_K: {
      const auto* x = static_cast<const BlockQ8_K*>(data);
      for (int64_t i = 0; i < nb; ++i) {
        if (!std::isfinite(x[i].d)) {
          *why = at_block(i, "d", x[i].d);
          return false;
        }
      }
      return true;
    }
  }
  return true;
}

}  // namespace ds
