#!/usr/bin/env bash
# Summary first (issue 22): on a 60-layer DeepSeek-V4 with an inverted input scale planted in
# layer 41, `trace` prints at most 80 lines by default, on an 80-column terminal and into a pipe,
# a line per layer with a finding and one per run of quiet layers, the planted stage marked, and the verdict with its cause and next command at
# the end; --table prints every row, --stage filters them; names are never cut.
#   usage: trace_summary.sh NVFP4DBG
set -u
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
. "$(dirname "$0")/../lib.sh"
cd "$tmp" || exit 1
"$bin" synth bad --recipe deepseek_v4 --size tiny --layers 60 --inject input-scale-inverted@layers.41.self_attn.q_b_proj >/dev/null
be="${ND_TEST_BACKEND:-cpu}"

COLUMNS=80 "$bin" trace --force bad --backend "$be" --out t.h5 >s80.txt 2>err.txt
rc=$?
ok "exit 1 (got $rc: $(cat err.txt))" '[ $rc -eq 1 ]'
n=$(wc -l <s80.txt)
ok "80 columns: at most 80 lines (got $n)" '[ "$n" -le 80 ]'
long=$(grep -v "^  next: " s80.txt | awk 'length($0) > 80' | head -1)
ok "80 columns: no line is wider than 80 but the next command (got: $long)" '[ -z "$long" ]'
ok "the header names checkpoint, format, stack, backend and tokens" \
  'tr "\n" " " <s80.txt | grep -q "nvfp4dbg trace: bad .*format compressed-tensors .*stack exact .*backend $be .*tokens 16"'
# every layer 0 to 59 has a line of its own or lies in a run of quiet layers ("A-B ... (K layers")
covered=$(grep -oE "^[0-9]+(-[0-9]+)? " s80.txt | awk -F- '{ a = $1 + 0; b = (NF > 1 ? $2 : $1) + 0; for (i = a; i <= b; i++) print i }' | sort -n | uniq | tr '\n' ' ')
ok "every layer 0 to 59 covered once by the layer lines, runs of quiet layers together ($(grep -cE "^[0-9]+(-[0-9]+)? " s80.txt) lines)" \
  '[ "$covered" = "$(seq 0 59 | tr "\n" " ")" ] && [ "$(grep -cE "^[0-9]+(-[0-9]+)? " s80.txt)" -lt 20 ]'
ok "layer 41 shows the planted stage, its all-zero output and the mark" \
  'grep -E "^41 +self_attn\.q_b_proj +isolated +0\.00000 +1\.0000 +0 +scale_inverted" s80.txt | grep -q "<=="'
ok "the head line is there" 'grep -qE "^head " s80.txt'
ok "the static finding that breaks the stack is listed" 'grep -qE "^  scale_convention +model\.layers\.41\.self_attn\.q_b_proj$" s80.txt'
first=$(grep -n "^first divergence at layers.41.self_attn.q_b_proj (isolated)" s80.txt | cut -d: -f1)
ok "the verdict is in the last 15 lines (line ${first:-none} of $n)" '[ -n "$first" ] && [ $((n - first)) -lt 15 ]'
ok "the cause with its proof and meaning" 'grep -q "^cause scale_inverted (proven by repair): the activation quantizer" s80.txt'
ok "the evidence" 'grep -q "^  evidence: repair input_scale_reciprocal" s80.txt'
ok "the next command, whole on one line" 'grep -qE "^  next: nvfp4dbg trace bad --override model\.layers\.41\.self_attn\.q_b_proj\.input_global_scale=[0-9.]+ --out [^ ]*-repaired\.h5$" s80.txt'

"$bin" trace --force bad --backend "$be" --out t.h5 >pipe.txt 2>/dev/null
n=$(wc -l <pipe.txt)
ok "into a pipe: at most 80 lines (got $n)" '[ "$n" -le 80 ]'
ok "into a pipe: nothing wrapped (the closing line is whole)" 'grep -q "^first divergence at layers.41.self_attn.q_b_proj (isolated): .*scale_inverted" pipe.txt'

# --table: every row of the trace, the first divergence marked (layer 41 alone from here on)
"$bin" trace --force bad --backend "$be" --out t.h5 --layers 41 --json >t.json 2>/dev/null
rows=$(grep -c '"verdict":' t.json)
"$bin" trace --force bad --backend "$be" --out t.h5 --layers 41 --table >table.txt 2>/dev/null
ok "--table: every row ($rows)" '[ "$(grep -cE "^[^ ]+ +[^ ]+ +(isolated|chained) " table.txt)" -eq "$rows" ]'
ok "--table: the first divergence marked" 'grep -E "^layers\.41\.self_attn\.q_b_proj +linear +isolated" table.txt | grep -q "<== first divergence"'
ok "--table: every repair tried is listed" 'grep -q "repairs replayed on the stage" table.txt'
"$bin" trace --force bad --backend "$be" --out t.h5 --layers 41 --stage q_b_proj >stage.txt 2>/dev/null
want=$(grep -c '"name": "[^"]*q_b_proj[^"]*"' t.json)
ok "--stage q_b_proj: the $want rows whose name holds it, no other" '[ "$want" -ge 2 ] && [ "$(grep -cE "^[^ ]*q_b_proj[^ ]* +linear +(isolated|chained) " stage.txt)" -eq "$want" ] && [ "$(grep -cE " (isolated|chained) " stage.txt)" -eq "$want" ]'
"$bin" trace --force bad --backend "$be" --out t.h5 --layers 41 --stage 'layers.41.*_proj' >glob.txt 2>/dev/null
ok "--stage with a glob: only layer 41's projections" '[ "$(grep -cE " (isolated|chained) " glob.txt)" -gt 4 ] && ! grep -E " (isolated|chained) " glob.txt | grep -qv "^layers\.41\..*_proj "'
"$bin" trace --force bad --backend "$be" --out t.h5 --layers 41 --stage nosuchstage >none.txt 2>/dev/null
ok "--stage matching nothing says so" 'grep -q "no stage matches --stage nosuchstage" none.txt'

# names are never cut: on a 40-column terminal each name is whole on its own line
COLUMNS=40 "$bin" trace --force bad --backend "$be" --out t.h5 --layers 41 --table >narrow.txt 2>/dev/null
longest=$(sed -n 's/.*"name": "\([^"]*\)".*/\1/p' t.json | awk '{ if (length($0) > length(m)) m = $0 } END { print m }')
ok "40 columns: the longest name ($longest) is printed whole" 'grep -qxF "$longest" narrow.txt'
COLUMNS=40 "$bin" trace --force bad --backend "$be" --out t.h5 --layers 41 >narrow2.txt 2>/dev/null
ok "40 columns: the summary keeps the stage names whole" 'grep -qx "41    self_attn.q_b_proj" narrow2.txt'
echo "trace summary: $pass passed, $fail failed"
[ $fail -eq 0 ]
