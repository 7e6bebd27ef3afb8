#!/usr/bin/env bash
# Routed experts' bytes staged ahead on a host thread (src/pipeline/prefetch.c; on by default on
# CUDA, forced here on the CPU with NVFP4DBG_PREFETCH=1) give the same trace, row for row and bit
# for bit, as uploads straight from the mapping; a fault inside a prefetched expert is still found.
#   usage: prefetch.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
# every figure of every row, timings left out
rows() { grep -v '"elapsed_s"\|"upload_s"\|"trace"\|"next_command"' "$1"; }
"$bin" synth "$tmp/small" --recipe deepseek_v4 --size small >/dev/null
"$bin" synth "$tmp/fault" --recipe deepseek_v4 --size small --inject weight-scale-nan@layers.1.mlp.experts.3.up_proj >/dev/null
for ck in "$root/golden/clean-v4" "$tmp/small" "$tmp/fault"; do
  n=$(basename "$ck")
  NVFP4DBG_PREFETCH=0 "$bin" trace --force "$ck" --backend cpu --json --out "$tmp/$n-off.h5" >"$tmp/$n-off.json" 2>/dev/null
  a=$?
  NVFP4DBG_PREFETCH=1 "$bin" trace --force "$ck" --backend cpu --json --out "$tmp/$n-on.h5" >"$tmp/$n-on.json" 2>/dev/null
  b=$?
  ok "$n: same exit status with and without prefetch ($a, $b)" '[ $a -eq $b ] && [ $a -le 1 ]'
  ok "$n: the same rows, bit for bit" 'diff <(rows "$tmp/$n-off.json") <(rows "$tmp/$n-on.json") >/dev/null'
  ok "$n: rows were written" '[ $(grep -c "\"verdict\"" "$tmp/$n-on.json") -gt 20 ]'
done
ok "the prefetched expert's fault is found" 'grep -q "\"first_divergence\": \"layers.1.mlp.experts.3.up_proj\"" "$tmp/fault-on.json"'
echo "prefetch: $pass passed, $fail failed"
[ $fail -eq 0 ]
