#!/usr/bin/env bash
# [ISA_ODR] Objects compiled with AVX2/AVX-512 flags must not define weak (COMDAT) symbols:
# the linker keeps one copy of each, and if it kept the AVX-512-compiled copy of a function
# that baseline code also calls, an AVX2-only CPU would crash with SIGILL. Header helpers are
# therefore static inline or live in per-ISA namespaces. usage: SCRIPT OBJECT_DIR
set -euo pipefail
dir=$1
objs=$(find "$dir" \( -path '*/avx2/*' -o -path '*/avx512/*' -o -path '*/amx/*' \) -name '*.o')
[ -n "$objs" ] || { echo "no ISA objects under $dir"; exit 1; }
bad=$(for f in $objs; do nm -C --defined-only "$f" | awk -v f="$f" '$2=="W"||$2=="V"||$2=="u" {print f": "$0}'; done)
if [ -n "$bad" ]; then
  echo "weak symbols in ISA-specific objects (would be shared with baseline code):"
  echo "$bad" | head -40
  exit 1
fi
echo "ok: $(echo "$objs" | wc -w) ISA objects define no weak symbols"
