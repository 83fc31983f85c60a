// <immintrin.h> for the AVX-512 files: include this instead, first among the intrinsic headers.
// GCC 12's AVX-512 headers make the pass-through operand of many unmasked intrinsics with
// _mm512_undefined_*(), written `__m512i __Y = __Y;`, and at -O3 -Wuninitialized and
// -Wmaybe-uninitialized report that self-initialization wherever such an intrinsic is inlined
// (GCC bug 105593, fixed in GCC 13). The two warnings are off for the header's own text only
// (diagnostic pragmas follow source locations), so uninitialized variables in our code are
// still reported.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
