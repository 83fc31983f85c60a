// Runner option repack (docs/repack.md): every refdata model gives bit-identical logits with
// the K-quant weights repacked into 16-row panels and without, for every chunking of the
// prompt (chunk 1: the fused one-row kernels; 3 and 8: the small-batch panel loop; 9 and the
// whole prompt: the panel kernels reading the packed copy), on the best
// kernel table of this CPU (AVX-512 packs; elsewhere the option changes nothing, which is
// what the test then checks). And --mlock after packing: the packed copies and the file's
// pages still read are locked, the pages packing released are not.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "kernels/quant/repack.h"
#include "model/model.h"
#include "refdata.h"
#include "runtime/thread_pool.h"

namespace ds::test {
namespace {

TEST(Repack, LogitsBitIdenticalToUnpacked) {
  const KernelTable* kt = &kern();
  for (const RefModel& rm : ref_models()) {
    auto plain = make_runner(rm.name, kt, GgmlType::F16, 1, 2, 128, false);
    auto packed = make_runner(rm.name, kt, GgmlType::F16, 1, 2, 128, true);
    ASSERT_TRUE(plain && packed);
    if (kt->isa == Isa::kAvx512) {
      const Mat& w = packed->model().weights().layers[0].ffn_down.data ? packed->model().weights().layers[0].ffn_down
                                                                       : packed->model().weights().output;
      EXPECT_TRUE(!repack_supported(w.type) || w.n_out < kPanelRows || w.panels) << rm.name << ": nothing was packed";
    }
    const auto toks = ref_tokens(rm.name);
    for (int chunk : {0, 1, 3, 8, 9}) {
      const auto a = eval_chunked(*plain, toks, chunk), b = eval_chunked(*packed, toks, chunk);
      ASSERT_EQ(a.size(), b.size());
      size_t i = 0;
      while (i < a.size() && std::memcmp(&a[i], &b[i], 4) == 0) ++i;
      EXPECT_EQ(i, a.size()) << rm.name << " chunk " << chunk << ": first difference at " << i << ": " << a[i] << " vs "
                             << b[i];
    }
  }
}

// Locked pages of this process (VmLck), in bytes.
int64_t locked_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmLck:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

TEST(Repack, LockLeavesTheReleasedPagesOut) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "AddressSanitizer turns mlock into a no-op, so VmLck cannot be measured";
#endif
  auto model = Model::load(ref_path("tiny-llama-Q4_K_M", ".gguf"));
  ASSERT_TRUE(model.is_ok()) << model.message();
  auto pool = ThreadPool::create({.n_threads = 2, .pin = false});
  ASSERT_TRUE(pool.is_ok()) << pool.message();
  // Packing itself is scalar, so this runs on any CPU.
  auto packed = (*model)->repack(**pool, NumaMode::kNone);
  ASSERT_TRUE(packed.is_ok()) << packed.message();
  const Weights& w = (*model)->weights();
  int64_t tensor_bytes = 0, released = 0, packed_bytes = 0;
  for (const GgufTensorInfo& t : (*model)->file().tensors()) tensor_bytes += static_cast<int64_t>(t.nbytes);
  for (const auto& r : w.released) released += static_cast<int64_t>(r.second);
  for (const NumaBuffer& b : w.packed) packed_bytes += static_cast<int64_t>(b.size());
  ASSERT_GT(released, tensor_bytes / 2) << "packing released little of the file";

  struct rlimit rl {};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_MEMLOCK, &rl);
  if (geteuid() != 0 && rl.rlim_cur != RLIM_INFINITY && static_cast<int64_t>(rl.rlim_cur) < 2 * tensor_bytes) {
    GTEST_SKIP() << "RLIMIT_MEMLOCK hard limit " << rl.rlim_max << " is below the model's size";
  }
  const int64_t before = locked_bytes();
  Status s = lock_weights((*model)->file(), w);
  ASSERT_TRUE(s.is_ok()) << s.message();
  const int64_t locked = locked_bytes() - before;
  // Every packed byte, and the file's bytes minus what was released (a page of slack per
  // range for rounding); locking the released pages too would add about `released`.
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int64_t slack = 2 * page * static_cast<int64_t>(w.released.size() + w.packed.size() + 1);
  EXPECT_GE(locked, packed_bytes);
  EXPECT_LE(locked, tensor_bytes - released + packed_bytes + slack)
      << "tensor data " << tensor_bytes << ", released " << released << ", packed " << packed_bytes;
}

}  // namespace
}  // namespace ds::test
