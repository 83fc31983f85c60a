// numa.h: the topology agrees with the OS, memory from every mode is zeroed and
// writable, bad mode names are errors that name the value.
#include "runtime/numa.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace ds {
namespace {

TEST(Numa, TopologyMatchesOs) {
  const Topology& t = topology();
  EXPECT_TRUE(t.from_hwloc);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_GE(t.n_pus, 1);
  EXPECT_LE(t.n_pus, online);
  EXPECT_LE(t.n_cores, t.n_pus);
  ASSERT_FALSE(t.nodes.empty());
  int cores = 0;
  for (const NumaNode& n : t.nodes) cores += n.n_cores;
  EXPECT_EQ(cores, t.n_cores);
  EXPECT_GT(t.total_memory_bytes, 0u);
}

TEST(Numa, ParseModes) {
  EXPECT_EQ(parse_numa_mode("none").value(), NumaMode::kNone);
  EXPECT_EQ(parse_numa_mode("distribute").value(), NumaMode::kDistribute);
  EXPECT_EQ(parse_numa_mode("isolate").value(), NumaMode::kIsolate);
  auto bad = parse_numa_mode("numactl");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("numactl"), std::string::npos);
  for (NumaMode m : {NumaMode::kNone, NumaMode::kDistribute, NumaMode::kIsolate}) {
    EXPECT_EQ(parse_numa_mode(numa_mode_name(m)).value(), m);
  }
}

TEST(Numa, AllocEveryModeSmallAndLarge) {
  for (NumaMode m : {NumaMode::kNone, NumaMode::kDistribute, NumaMode::kIsolate}) {
    for (size_t bytes : {size_t{1}, size_t{4097}, size_t{3} << 20, (size_t{16} << 20) + 123}) {
      auto buf = NumaBuffer::allocate(bytes, m);
      ASSERT_TRUE(buf.is_ok()) << buf.message();
      uint8_t* p = buf->data();
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(buf->size(), bytes);
      if (bytes >= (size_t{2} << 20)) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20), 0u);
      }
      for (size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(p[i], 0) << "fresh memory not zero at " << i;
      std::memset(p, 0xab, bytes);
      EXPECT_EQ(p[bytes - 1], 0xab);
    }
  }
}

// AnonHugePages (kB) of the /proc/self/smaps mapping that contains p; -1 if none does.
long anon_huge_kb(const void* p) {
  std::ifstream f("/proc/self/smaps");
  std::string line;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  while (std::getline(f, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find('-') < line.find(' ')) {
      inside = addr >= lo && addr < hi;
      continue;
    }
    long kb = 0;
    if (inside && std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) return kb;
  }
  return -1;
}

TEST(Numa, LargeAllocationsGetTransparentHugePages) {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(thp, mode);
  if (mode.find("[never]") != std::string::npos || mode.empty()) GTEST_SKIP() << "THP off on this host: " << mode;
  for (NumaMode m : {NumaMode::kNone, NumaMode::kDistribute, NumaMode::kIsolate}) {
    auto buf = NumaBuffer::allocate(size_t{16} << 20, m);
    ASSERT_TRUE(buf.is_ok());
    std::memset(buf->data(), 1, buf->size());
    EXPECT_GT(anon_huge_kb(buf->data()), 0)
        << "no huge pages behind a 16 MiB " << numa_mode_name(m) << " buffer (THP " << mode << ")";
  }
}

TEST(Numa, BufferMoves) {
  auto a = NumaBuffer::allocate(8192, NumaMode::kNone);
  ASSERT_TRUE(a.is_ok());
  uint8_t* p = a->data();
  NumaBuffer b = std::move(a).value();
  EXPECT_EQ(b.data(), p);
  NumaBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(Numa, LockMemory) {
  auto buf = NumaBuffer::allocate(64 << 10, NumaMode::kNone);
  ASSERT_TRUE(buf.is_ok());
  Status s = lock_memory(buf->data(), buf->size());
  struct rlimit rl {};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
  if (rl.rlim_cur >= buf->size()) {
    EXPECT_TRUE(s.is_ok()) << s.message();
  } else {
    EXPECT_NE(s.message().find("RLIMIT_MEMLOCK"), std::string::npos) << s.message();
  }
  // Far more than the limit (or than exists): an error that says what to raise.
  Status big = lock_memory(buf->data(), size_t{1} << 46);
  ASSERT_FALSE(big.is_ok());
  EXPECT_NE(big.message().find("RLIMIT_MEMLOCK"), std::string::npos) << big.message();
}

TEST(Numa, PinThreadToEveryCore) {
  for (int core = 0; core < topology().n_cores; ++core) {
    bool ok = false;
    std::thread([&] { ok = pin_current_thread_to_core(core); }).join();
    EXPECT_TRUE(ok) << "core " << core;
  }
}

}  // namespace
}  // namespace ds
