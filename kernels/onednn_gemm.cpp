// oneDNN matmul for F32/BF16 weights: dst[n_tok][rows] = act[n_tok][n_in] x W^T, with W
// read in place ([rows][n_in] row-major is oneDNN's K x N with strides {1, ld}). One
// primitive per (type, shape, strides) is created on first use and cached; oneDNN
// primitives are safe to execute from several threads at once, each with its own stream.
#include "kernels/onednn_gemm.h"

#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

namespace ds {
namespace {

using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

struct Cache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
  std::map<Key, dnnl::matmul> prims;
};

Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

bool onednn_matmul(const MatmulArgs& a) {
  using dt = dnnl::memory::data_type;
  if (a.wtype != GgmlType::F32 && a.wtype != GgmlType::BF16) return false;
  const dt wdt = a.wtype == GgmlType::F32 ? dt::f32 : dt::bf16;
  const int64_t esz = a.wtype == GgmlType::F32 ? 4 : 2;
  const int64_t m = a.n_tok, k = a.n_in, n = a.row_end - a.row_begin;
  const int64_t lda = static_cast<int64_t>(a.act_row_stride) / esz, ldw = static_cast<int64_t>(a.w_row_stride) / esz;
  if (m <= 0 || n <= 0) return true;
  try {
    Cache& c = cache();
    const dnnl::memory::desc src({m, k}, wdt, {lda, 1});
    const dnnl::memory::desc wei({k, n}, wdt, {1, ldw});
    const dnnl::memory::desc dst({m, n}, dt::f32, {a.out_stride, 1});
    dnnl::matmul prim;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      const Key key{static_cast<int>(a.wtype), m, k, n, lda, ldw, a.out_stride};
      auto it = c.prims.find(key);
      if (it == c.prims.end())
        it = c.prims.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc({src, wei, dst}, c.engine))).first;
      prim = it->second;
    }
    const auto* w = static_cast<const uint8_t*>(a.w) + a.row_begin * a.w_row_stride;
    dnnl::memory msrc(src, c.engine, const_cast<void*>(a.act));
    dnnl::memory mwei(wei, c.engine, const_cast<uint8_t*>(w));
    dnnl::memory mdst(dst, c.engine, a.out + a.row_begin);
    dnnl::stream s(c.engine);
    prim.execute(s, {{DNNL_ARG_SRC, msrc}, {DNNL_ARG_WEIGHTS, mwei}, {DNNL_ARG_DST, mdst}});
    s.wait();
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace ds
