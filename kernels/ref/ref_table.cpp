// The reference kernel table: every entry is the scalar spec in kernels/ref/.
#include "kernels/ref/ref.h"

namespace ds::ref {

KernelTable ref_table() {
  KernelTable t{};
  fill_entries(Isa::kRef, t);
  t.moe_route = moe_route;
  return t;
}

}  // namespace ds::ref
