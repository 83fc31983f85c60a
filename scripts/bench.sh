#!/usr/bin/env bash
# The performance table: prefill pp512, decode tg128 and 8-stream aggregate decode of the two
# benchmark shapes (random weights, Q4_K_M, made by `ds-cli synth`), with this machine's
# read bandwidth, int8, fp32 and (AVX512_BF16) bf16 peaks measured in the same run and the
# rooflines they imply.
#   scripts/bench.sh [extra ds-cli bench flags...]      e.g. scripts/bench.sh --profile
# MODELS iq1 and iq4xs (not in the default list) are the moe-bench shape with experts of 1536
# (a multiple of 256, as V3's 2048) and a 16384-token vocabulary, so that experts rather than
# the output head dominate decode: iq1 the "dynamic 1.58-bit" mix (routed gate/up IQ1_S, down
# IQ2_XXS, the rest Q4_K_M; `ds-cli synth` writes random grid blocks), iq4xs every block weight
# but token_embd and output IQ4_XS (attn_k_b IQ4_NL) with random valid blocks
# (scripts/gguf_retype.py on a Q4_K_M synth with experts of 256: quantizing 1.5 GB to IQ4_XS
# would take many minutes).
# Env: THREADS (default 2), REPEATS (default 3), BATCH (default 8), PROMPT (default 512),
#      GEN (default 128), BUILD_DIR (default build), MODELS (default "dense moe").
# Builds ds-cli (Release) when it is missing; reuses build/bench/*.gguf when present.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
threads=${THREADS:-2}
repeats=${REPEATS:-3}
batch=${BATCH:-8}
prompt=${PROMPT:-512}
gen=${GEN:-128}
models=${MODELS:-"dense moe"}
cli="$build/src/ds-cli"


if [ ! -x "$cli" ]; then
  [ -f "$build/build.ninja" ] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS_WERROR=ON
  cmake --build "$build" -j"$(nproc)" --target ds-cli
  cli=$(find "$build" -name ds-cli -type f -perm -u+x | head -1)
fi

mkdir -p "$build/bench"
declare -A shape=([dense]=r1-distill-qwen-1.5b [moe]=moe-bench [iq1]=moe-bench [iq4xs]=moe-bench)
declare -A label=([dense]="R1-Distill-Qwen-1.5B shape" [moe]="V3-style MoE (V2-Lite scale)"
                  [iq1]="V3-style MoE, dynamic 1.58-bit mix" [iq4xs]="V3-style MoE, IQ4_XS")
# Published numbers for the same shapes, printed beside ours: the reference engine's pp/tg/x8 and
# the fastest CPU fork's pp/tg (docs/performance.md, "Results").
declare -A ref=([dense]="88 34 46 154 43" [moe]="151 60 81 429 68" [iq1]="- - - - -" [iq4xs]="- - - - -")
declare -A mix=([iq1]="--type Q4_K_M --tensor-type ffn_gate_exps=IQ1_S --tensor-type ffn_up_exps=IQ1_S --tensor-type ffn_down_exps=IQ2_XXS"
                [iq4xs]="retype")
# iq4xs: the small-expert synth, its expert tensors rewritten at 1536 (shared: 2 x 1536).
iq4xs_model() {
  local f=$1 base="$build/bench/moe-bench-ff256-v16k-Q4_K_M.gguf"
  if [ ! -s "$base" ]; then
    "$cli" synth --shape moe-bench --set expert_feed_forward_length=256 --set vocab_size=16384 --type Q4_K_M \
      --out "$base.tmp" --threads "$threads" >&2
    mv "$base.tmp" "$base"
  fi
  python3 scripts/gguf_retype.py --set-u32 deepseek2.expert_feed_forward_length=1536 --dim 256=1536 --dim 512=3072 \
    "$base" "$f.tmp" '_(exps|shexp)\.=IQ4_XS' \
    '^blk\..*\.(attn_(q_a|q_b|kv_a_mqa|k_b|v_b|output)|ffn_(gate|up|down))\.weight$=IQ4_XS' >&2
  mv "$f.tmp" "$f"
}

results=()
for m in $models; do
  f="$build/bench/${shape[$m]}-Q4_K_M.gguf"
  [ -n "${mix[$m]:-}" ] && f="$build/bench/${shape[$m]}-$m.gguf"
  if [ ! -s "$f" ] && [ "${mix[$m]:-}" = retype ]; then
    echo "bench.sh: making $f" >&2
    iq4xs_model "$f"
  elif [ ! -s "$f" ] && [ -n "${mix[$m]:-}" ]; then
    echo "bench.sh: making $f" >&2
    # shellcheck disable=SC2086
    "$cli" synth --shape "${shape[$m]}" --set expert_feed_forward_length=1536 --set vocab_size=16384 ${mix[$m]} \
      --out "$f.tmp" --threads "$threads" >&2
    mv "$f.tmp" "$f"
  elif [ ! -s "$f" ]; then
    echo "bench.sh: making $f" >&2
    "$cli" synth --shape "${shape[$m]}" --type Q4_K_M --out "$f.tmp" --threads "$threads" >&2
    mv "$f.tmp" "$f"
  fi
  echo "bench.sh: $m ($f), $threads threads, $repeats repeats" >&2
  json=$("$cli" bench --model "$f" -p "$prompt" -n "$gen" -t "$threads" --batch "$batch" \
    --repeats "$repeats" --json "$@" | grep '^{' | tail -1)
  results+=("$m|$json")
done

python3 - "$batch" "$prompt" "$gen" "${results[@]}" <<PY
import json, sys
batch, prompt, gen = sys.argv[1:4]
label = {"dense": "${label[dense]}", "moe": "${label[moe]}", "iq1": "${label[iq1]}", "iq4xs": "${label[iq4xs]}"}
ref = {"dense": "${ref[dense]}".split(), "moe": "${ref[moe]}".split(), "iq1": "${ref[iq1]}".split(),
       "iq4xs": "${ref[iq4xs]}".split()}
rows = [a.split("|", 1) for a in sys.argv[4:]]
print(f"| model | engine | pp{prompt} t/s | tg{gen} t/s | {batch}-stream aggregate t/s | x{batch}/x1 | tg roofline | pp roofline |")
print("|---|---|---|---|---|---|---|---|")
limits = []
for m, js in rows:
    j = json.loads(js)
    limits.append((m, j))
    r = ref[m]
    if r[0] != "-":  # the i-quant models have no published reference numbers
        print(f"| {label[m]} | reference engine | {r[0]} | {r[1]} | {r[2]} | | | |")
        print(f"| {label[m]} | fastest CPU fork | {r[3]} | {r[4]} | - | | | |")
    ratio = j["batch_tg_tps"] / j["tg_tps"] if j["tg_tps"] else 0
    print(f"| {label[m]} | **ds-server** | {j['pp_tps']:.1f} ({j['pp_tps_min']:.0f}..{j['pp_tps_max']:.0f}) "
          f"| {j['tg_tps']:.1f} ({j['tg_tps_min']:.1f}..{j['tg_tps_max']:.1f}) | {j['batch_tg_tps']:.1f} | {ratio:.2f}x "
          f"| {100*j['tg_roofline']:.0f}% ({j['bytes_per_token']/1e9:.3f} GB/token) "
          f"| {100*j['pp_roofline']:.0f}% ({j['prefill_ops_per_token']/1e9:.2f} GOP/token) |")
print()
for m, j in limits:  # each repeat's roofline uses the limits read around that repeat
    print(f"machine (measured in the {m} run, around each repeat): read bandwidth {j['bandwidth_gbs']:.1f} GB/s "
          f"({j['bandwidth_gbs_min']:.1f}..{j['bandwidth_gbs_max']:.1f}), int8 peak {j['int8_gops']:.0f} GOPS "
          f"({j['int8_gops_min']:.0f}..{j['int8_gops_max']:.0f}), fp32 FMA peak {j['fp32_gflops']:.0f} GFLOPS"
          + (f", bf16 dot peak {j['bf16_gflops']:.0f} GFLOPS" if j.get('bf16_gflops', 0) > 0 else ""))
PY
