#!/usr/bin/env bash
# Every C++ source and header of the project is formatted as .clang-format says. Fails listing
# the files clang-format would change; `clang-format -i FILE` fixes one. usage: SCRIPT SOURCE_DIR
# kernels/quant/iq_tables.cpp is generated (scripts/gen_iq_tables.py) and left as written.
set -euo pipefail
cd "$1"
fmt=${CLANG_FORMAT:-clang-format}
if ! command -v "$fmt" >/dev/null; then
  echo "format_check: $fmt not found (scripts/setup.sh installs Debian's clang-format)" >&2
  exit 1
fi
mapfile -t files < <(find include src kernels tests -type f \( -name "*.cpp" -o -name "*.h" -o -name "*.inc" \) ! -path kernels/quant/iq_tables.cpp ! -path "*/node_modules/*" | sort)
bad=()
for f in "${files[@]}"; do
  "$fmt" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "format_check: ${#bad[@]} of ${#files[@]} files differ from .clang-format ($("$fmt" --version)):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "ok: ${#files[@]} files formatted"
