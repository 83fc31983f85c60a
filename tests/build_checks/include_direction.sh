#!/usr/bin/env bash
# Include arrows point one way (docs/architecture.md). A file's layer is its folder's; a file
# may include files of its own folder and of folders in lower layers, never of a higher layer
# or of another folder of the same layer (the ISA folders share one). Headers are resolved as
# the build resolves them: relative to the including file, then src/, include/, the root.
# usage: SCRIPT SOURCE_DIR
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"

# Lowest first. One line per layer; folders on one line share it and may not include each other.
layers=(
  "include/ds"
  "kernels/quant"
  "kernels"
  "kernels/ref"
  "kernels/simd"
  "kernels/avx2 kernels/avx512 kernels/amx"
  "kernels/dispatch"
  "src/util"
  "src/gguf"
  "src/text"
  "src/constrain"
  "src/runtime"
  "src/model"
  "src/sched"
  "src/engine"
  "src/serve"
  "src/server"
  "src/tools"
)
declare -A rank
for i in "${!layers[@]}"; do
  for d in ${layers[$i]}; do rank[$d]=$i; done
done

fail=0
n=0
while IFS= read -r f; do
  dir=$(dirname "$f")
  if [ -z "${rank[$dir]+x}" ]; then
    echo "$f: folder $dir has no layer in $0"
    fail=1
    continue
  fi
  while IFS= read -r inc; do
    target=""
    for base in "$dir" src include .; do
      if [ -f "$base/$inc" ]; then target=$(realpath -m --relative-to=. "$base/$inc"); break; fi
    done
    [ -n "$target" ] || continue  # a system or third-party header
    tdir=$(dirname "$target")
    n=$((n + 1))
    [ "$tdir" = "$dir" ] && continue
    if [ -z "${rank[$tdir]+x}" ]; then
      echo "$f includes $target: folder $tdir has no layer"
      fail=1
    elif [ "${rank[$tdir]}" -ge "${rank[$dir]}" ]; then
      echo "$f includes $target: $dir may not include $tdir (layer ${rank[$dir]} -> ${rank[$tdir]})"
      fail=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find include kernels src -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.inc' \) | sort)

if [ "$fail" -ne 0 ]; then
  echo "include direction: violations above (layer order in $0, docs/architecture.md)"
  exit 1
fi
echo "ok: $n includes between project files follow the layer order"
