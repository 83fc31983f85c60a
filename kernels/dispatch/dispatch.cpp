// Chooses the kernel table once per process. CPUID says what the CPU implements; XGETBV
// says whether the OS saves the register state (YMM for AVX2, opmask/ZMM for AVX-512), and
// AMX additionally needs the kernel's permission for tile data (arch_prctl
// ARCH_REQ_XCOMP_PERM). The AVX-512 table requires F, BW, VL, DQ and VNNI (Ice Lake,
// Cascade Lake, Zen 4 and later); AVX-512 CPUs without VNNI (Skylake-SP) get the AVX2 table.
// AVX512_BF16 only selects the entries that use vdpbf16ps (BF16 weights, attention over a
// bf16 cache); without it those entries widen bf16 to f32.
// The AMX table currently reuses the AVX-512 kernels (no tile kernels yet); it exists so
// that callers and tests can see the hardware and OS grant it.
// DS_ISA=ref|avx2|avx512|amx lowers the choice (never raises it past what is usable).
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/isa_tables.h"
#include "kernels/ref/ref.h"
#include "kernels/simd/attention_core.h"  // l1d_bytes()

namespace ds {
namespace {

struct CpuFeatures {
  bool avx2 = false;         // AVX2 + FMA + F16C + BMI2, YMM state enabled
  bool avx512 = false;       // F/BW/VL/DQ + VNNI, opmask/ZMM state enabled
  bool avx512_bf16 = false;  // AVX512_BF16 as well (not on Ice Lake / Cascade Lake Xeons)
  bool amx = false;          // AMX tile + int8 + bf16, tile data permitted by the OS
};

uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool request_amx_permission() {
  constexpr long kArchGetXcompPerm = 0x1022;
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  unsigned long bitmask = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &bitmask) != 0) return false;
  return (bitmask & (1ul << kXfeatureXtiledata)) != 0;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;
  const bool zmm_state = (xcr0 & 0xE6) == 0xE6;
  const bool tile_state = (xcr0 & (3ull << 17)) == (3ull << 17);
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool avx2 = b & (1u << 5), bmi2 = b & (1u << 8);
  const bool avx512f = b & (1u << 16), avx512dq = b & (1u << 17), avx512bw = b & (1u << 30), avx512vl = b & (1u << 31),
             vnni = c & (1u << 11);
  const bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24), amx_int8 = d & (1u << 25);
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  const bool avx512bf16 = __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 5));
  f.avx2 = ymm_state && avx2 && fma && f16c && bmi2;
  f.avx512 = f.avx2 && zmm_state && avx512f && avx512dq && avx512bw && avx512vl && vnni;
  f.avx512_bf16 = f.avx512 && avx512bf16;
  f.amx = f.avx512 && tile_state && amx_tile && amx_int8 && amx_bf16 && request_amx_permission();
  return f;
}

struct Tables {
  KernelTable t[4]{};
  bool usable[4] = {false, false, false, false};
  Isa best = Isa::kRef;
  KernelTable avx512_without_bf16{};  // what a CPU without AVX512_BF16 runs, for tests

  Tables() {
    const CpuFeatures f = detect();
    t[0] = ref::ref_table();
    usable[0] = true;
    if (f.avx2) {
      t[1] = avx2_table();
      usable[1] = true;
      best = Isa::kAvx2;
    }
    if (f.avx512) {
      t[2] = avx512_table(f.avx512_bf16);
      usable[2] = true;
      best = Isa::kAvx512;
      avx512_without_bf16 = avx512_table(false);
    }
    if (f.amx) {
      t[3] = avx512_table(f.avx512_bf16);
      t[3].isa = Isa::kAmx;
      usable[3] = true;
      best = Isa::kAmx;
    }
  }
};

const Tables& tables() {
  static const Tables tabs;
  return tabs;
}

// The ISA kern() uses: the best usable one, lowered by DS_ISA.
Isa chosen_isa() {
  const Isa best = tables().best;
  const char* env = std::getenv("DS_ISA");
  if (!env || !*env) return best;
  for (int i = 0; i < 4; ++i) {
    const Isa isa = static_cast<Isa>(i);
    if (std::strcmp(env, isa_name(isa)) == 0) return static_cast<int>(isa) < static_cast<int>(best) ? isa : best;
  }
  std::fprintf(stderr, "ds: DS_ISA=%s is not one of ref, avx2, avx512, amx; using %s\n", env, isa_name(best));
  return best;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kRef:
      return "ref";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAmx:
      return "amx";
  }
  return "?";
}

GgmlType vec_dot_type(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ2_XXS:
    case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S:
    case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S:
    case GgmlType::IQ1_S:
    case GgmlType::IQ1_M:
    case GgmlType::IQ4_XS:
      return GgmlType::Q8_K;
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4:
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
      return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return GgmlType::Q8_1;
    case GgmlType::F16:
      return GgmlType::F16;
    case GgmlType::BF16:
      return GgmlType::BF16;
    default:
      return GgmlType::F32;
  }
}

const KernelTable* kernel_table(Isa isa) {
  const int i = static_cast<int>(isa);
  if (i < 0 || i > 3 || !tables().usable[i]) return nullptr;
  return &tables().t[i];
}

Isa best_isa() {
  return tables().best;
}

const KernelTable* kernel_table_without_bf16() {
  return tables().usable[2] ? &tables().avx512_without_bf16 : nullptr;
}

const KernelTable& kern() {
  static const KernelTable* chosen = kernel_table(chosen_isa());
  return *chosen;
}

namespace simd {

size_t l1d_bytes() {
  static const size_t bytes = [] {
    const long v = sysconf(_SC_LEVEL1_DCACHE_SIZE);  // glibc reads it from CPUID
    return v > 0 ? static_cast<size_t>(v) : size_t{32768};
  }();
  return bytes;
}

}  // namespace simd

}  // namespace ds
