#!/usr/bin/env bash
# The AVX-512 kernels run on CPUs without AVX512_BF16 (Ice Lake, Cascade Lake), so its
# instructions may appear only in the code the table uses when CPUID reports the extension:
# the tiles instantiated for DotBF16 (kernels/avx512/matmul.cpp) and the attention
# instantiated for Vec16Bf16 (kernels/avx512/attention.cpp, flash_attn_bf16), and the bf16
# peak loop (kernels/avx512/peak_vnni.cpp, called by measure_bf16_peak after its CPUID
# check, src/tools/machine_limits.cpp), and the indexer scores instantiated for KeyBF16
# (kernels/avx512/indexer.cpp, indexer_scores_bf16). Anything else
# would be SIGILL on those CPUs. usage: SCRIPT OBJECT_DIR
set -euo pipefail
dir=$1
objs=$(find "$dir" \( -path '*/avx512/*' -o -path '*/amx/*' \) -name '*.o')
[ -n "$objs" ] || { echo "no AVX-512 objects under $dir"; exit 1; }
users=$(for f in $objs; do
  objdump -d --no-show-raw-insn "$f" | awk '/^[0-9a-f]+ <.*>:$/ {fn = $2} /vdpbf16ps|vcvtne2?ps2bf16/ {print fn}'
done | sort -u | c++filt)
[ -n "$users" ] || { echo "no AVX512_BF16 instruction found: the BF16 tile is gone or renamed"; exit 1; }
bad=$(echo "$users" | grep -v -e 'FloatTile<ds::avx512::(anonymous namespace)::DotBF16>' \
  -e '<ds::avx512::(anonymous namespace)::Vec16Bf16[,>]' -e '<ds::avx512::(anonymous namespace)::KeyBF16[,>]' \
  -e '^<ds::peak::bf16_madds_avx512(' || true)
if [ -n "$bad" ]; then
  echo "AVX512_BF16 instructions outside the DotBF16 tiles, the Vec16Bf16 attention, the KeyBF16 indexer and the bf16 peak loop:"
  echo "$bad" | head -20
  exit 1
fi
echo "ok: AVX512_BF16 instructions only in $(echo "$users" | wc -l) DotBF16 / Vec16Bf16 / KeyBF16 functions"
