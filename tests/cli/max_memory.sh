#!/usr/bin/env bash
# Prompt length and memory (issue 21): a prompt is refused before anything is allocated when the
# activations it needs (a lower bound from config.json) pass --max-memory, or when it is longer
# than the model's context (max_position_embeddings, as a server refuses it); an allocation that
# would pass the limit during the run is refused too, naming the stage; malformed sizes are exit 2;
# a run inside the limit gives the same verdict as one without it.
#   usage: max_memory.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
be="${ND_TEST_BACKEND:-cpu}"
. "$(dirname "$0")/../lib.sh"
seed="$root/golden/seed-bug-v4"
# refused LABEL TOKENS LIMIT OUT MESSAGE: the seed model traced on TOKENS ids (i mod 256, written to
# $tmp/tokens-TOKENS) under --max-memory LIMIT is exit 2 with stderr matching MESSAGE
refused() {
  local want="$5"
  seq 0 $(($2 - 1)) | awk '{ print $1 % 256 }' >"$tmp/tokens-$2"
  "$bin" trace --force "$seed" --backend "$be" --tokens-file "$tmp/tokens-$2" --max-memory "$3" --out "$4" >/dev/null 2>"$tmp/err"
  rc=$?
  ok "$1: exit $rc (want 2)" '[ $rc -eq 2 ]'
  ok "$1: the message says so: $(head -c 300 "$tmp/err")" 'grep -q "$want" "$tmp/err"'
}

# 10^6 tokens on the tiny seed model (context 1048576): layer 1 compresses at rate 4, so its index
# scores are [tokens, tokens / 4] on both paths: 1.86e3 GiB at least; refused up front under
# --max-memory 1G, and no trace is left behind
refused "10^6 tokens under 1G (the tokens, the need and the limit named)" 1000000 1G "$tmp/m.h5" \
  "1000000 tokens need at least 1.86e+03 GiB of activations .*more than --max-memory 1 GiB"
ok "no trace written" '[ ! -e "$tmp/m.h5" ]'
# 40000 tokens: 256 values per token would pass 1G (78 MiB), the index scores [40000, 10000] do not
# (2.98 GiB): refused before anything runs (round 22: after ~35 s of work, at the indexer's allocation)
refused "40000 tokens under 1G: the compressed layer's index scores counted up front" 40000 1G "$tmp/m2.h5" \
  "40000 tokens need at least 2.98 GiB of activations"
ok "... the up-front refusal: no trace written" '[ ! -e "$tmp/m2.h5" ] && [ ! -e "$tmp/m2.h5.incomplete" ]'

# longer than the model's context (the llmcompressor llama fixture: max_position_embeddings 256)
seq 0 256 >"$tmp/t257"
"$bin" trace --force "$root/golden/conformance/llama/nvfp4" --backend "$be" --tokens-file "$tmp/t257" --out "$tmp/c.h5" >/dev/null 2>"$tmp/err"
rc=$?
ok "257 tokens on a 256-position model: exit $rc (want 2): $(cat "$tmp/err")" \
   '[ $rc -eq 2 ] && grep -q "257 tokens are more than the model.s context (max_position_embeddings 256" "$tmp/err"'
seq 0 255 >"$tmp/t256"
"$bin" trace --force "$root/golden/conformance/llama/nvfp4" --backend "$be" --tokens-file "$tmp/t256" --layers 0 --out "$tmp/c.h5" >/dev/null 2>"$tmp/err"
rc=$?
ok "256 tokens on it run: exit $rc (want 0 or 1)" '[ $rc -le 1 ]'

# the estimate passes (2000 tokens: 3.9 MiB) but the run holds more than 8 MiB: refused at the
# allocation, naming the stage; the rows written before stay in the trace
refused "2000 tokens under 8M (refused at an allocation, naming the stage)" 2000 8M "$tmp/r.h5" \
  "stage .*: the activations of 2000 tokens need more than --max-memory 0.00781 GiB"

# inside the limit: the same first divergence and cause as without it
"$bin" trace --force "$seed" --backend "$be" --json --out "$tmp/a.h5" >"$tmp/a.json" 2>/dev/null; ra=$?
"$bin" trace --force "$seed" --backend "$be" --json --max-memory 64M --out "$tmp/b.h5" >"$tmp/b.json" 2>/dev/null; rb=$?
fd() { grep -m1 "\"$1\":" "$2"; }
ok "within 64M: exit $rb = $ra, same first divergence and cause" \
   '[ $ra -eq 1 ] && [ $rb -eq 1 ] && [ "$(fd first_divergence "$tmp/a.json")" = "$(fd first_divergence "$tmp/b.json")" ] && [ "$(fd cause "$tmp/a.json")" = "$(fd cause "$tmp/b.json")" ]'

# malformed sizes, on trace and bisect
for s in 0 -1 12Q 1.5.5G "" 512K 1e30T nan; do
  "$bin" trace --force "$seed" --backend "$be" --max-memory "$s" --out "$tmp/x.h5" >/dev/null 2>"$tmp/err"
  rc=$?
  ok "trace --max-memory '$s': exit $rc (want 2)" '[ $rc -eq 2 ] && grep -q -- "--max-memory" "$tmp/err"'
done
"$bin" bisect "$seed" --backend "$be" --max-memory 12Q >/dev/null 2>"$tmp/err"
rc=$?
ok "bisect --max-memory 12Q: exit $rc (want 2)" '[ $rc -eq 2 ]'
"$bin" bisect "$seed" --backend "$be" --tokens-file "$tmp/tokens-1000000" --max-memory 1G >/dev/null 2>"$tmp/err"
rc=$?
ok "bisect with 10^6 tokens under 1G: exit $rc (want 2)" '[ $rc -eq 2 ] && grep -q "more than --max-memory" "$tmp/err"'

echo "prompt length and memory: $pass passed, $fail failed"
[ $fail -eq 0 ]
