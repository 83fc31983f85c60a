// The lookup tables of the i-quant and MXFP4 types (../shared/SPEC-iquants.md, "Lookup
// tables"). They are data, embedded from ../shared/quant/iq_tables.json by
// scripts/gen_iq_tables.py into iq_tables.cpp (committed, so the build needs no data
// directory); tests/kernels/quant/iq_tables_test.cpp checks each table's SHA-256 against the file.
//
// Grid entries pack one coordinate per byte, coordinate k in byte k (least significant
// first). kIq1sGrid bytes are signed (-1, 0, +1); the others are unsigned magnitudes.
#pragma once
#include <cstdint>

namespace ds {

extern const uint8_t kIqKmask[8];        // kmask_iq2xs: 1 << j
extern const uint8_t kIqKsigns[128];     // ksigns_iq2xs: 7-bit code + parity bit; bit j set = element j negative
extern const uint64_t kIq2xxsGrid[256];  // bytes in {8, 25, 43}
extern const uint64_t kIq2xsGrid[512];   // bytes in {8, 25, 43}
extern const uint64_t kIq2sGrid[1024];   // bytes in {8, 25, 43}
extern const uint32_t kIq3xxsGrid[256];  // bytes in {4, 12, ..., 52, 62}
extern const uint32_t kIq3sGrid[512];    // bytes in {1, 3, ..., 15}
extern const uint64_t kIq1sGrid[2048];   // signed bytes in {-1, 0, +1}
extern const int8_t kIq4nlValues[16];    // kvalues_iq4nl
extern const int8_t kMxfp4Values[16];    // kvalues_fp4: E2M1 values doubled, sign in bit 3

constexpr float kIq1Delta = 0.125f;  // IQ1S_DELTA = IQ1M_DELTA

// Byte k of a grid entry (coordinate k).
static inline int iq_grid_byte(uint64_t entry, int k) {
  return static_cast<int>((entry >> (8 * k)) & 0xFF);
}
static inline int iq_grid_sbyte(uint64_t entry, int k) {
  return static_cast<int8_t>(static_cast<uint8_t>((entry >> (8 * k)) & 0xFF));
}

// One embedded table and the digest the data file gives for it (for the table test).
struct IqTableInfo {
  const char* name;  // the data file's name (e.g. "iq2xxs_grid")
  const void* data;
  int width;  // bytes per entry
  int entries;
  const char* sha256;  // lowercase hex, over the entries little-endian at their width
};
constexpr int kIqTableCount = 10;
extern const IqTableInfo kIqTables[kIqTableCount];

}  // namespace ds
