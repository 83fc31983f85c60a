#!/usr/bin/env bash
# Runs the GGUF libFuzzer target for a bounded time from a seed corpus of real headers.
# usage: run_fuzz.sh FUZZER CORPUS_DIR SECONDS
set -euo pipefail
fuzzer=$1 corpus=$2 secs=$3
shared=${DS_SHARED:-$(dirname "$0")/../../../shared}
mkdir -p "$corpus"
# Seeds: the first 64 KiB of each vocab/refdata file (headers and metadata, truncated data).
for f in "$shared"/tokenizer/*.gguf "$shared"/refdata/*.gguf; do
  head -c 65536 "$f" > "$corpus/seed-$(basename "$f")"
done
"$fuzzer" "$corpus" -max_total_time="$secs" -max_len=262144 -timeout=5 -rss_limit_mb=2048 \
  -print_final_stats=1 2>&1 | tail -n 20
