#!/usr/bin/env bash
# `nvfp4dbg show TRACE.h5` (issue 22): the stages table of a trace as text, CSV and JSON, each
# holding every row with the figures the trace command reported.
#   usage: show.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
"$bin" trace --force "$root/golden/seed-bug-v4" --backend cpu --out "$tmp/t.h5" --json >"$tmp/t.json" 2>/dev/null
rows=$(grep -c '"verdict":' "$tmp/t.json")
ok "the trace has rows ($rows)" '[ "$rows" -gt 100 ]'

"$bin" show "$tmp/t.h5" >"$tmp/s.txt" 2>"$tmp/err"
ok "text: exit 0" '[ $? -eq 0 ]'
ok "text: every row" '[ "$(grep -cE "^[^ ]+ +[^ ]+ +(isolated|chained) " "$tmp/s.txt")" -eq "$rows" ]'
ok "text: the first divergence marked" 'grep -E "^layers\.0\.self_attn\.q_a_proj +linear +isolated" "$tmp/s.txt" | grep -qE "scale_inverted +<== first divergence"'
ok "text: the header and the closing line" 'grep -q "^trace file .*: checkpoint .*recipe deepseek_v4 .*diverged" "$tmp/s.txt" && grep -q "^first divergence at layers.0.self_attn.q_a_proj (isolated)" "$tmp/s.txt"'

"$bin" show "$tmp/t.h5" --csv >"$tmp/s.csv"
ok "csv: exit 0, a header and every row" '[ $? -eq 0 ] && [ "$(wc -l <"$tmp/s.csv")" -eq $((rows + 1)) ]'
ok "csv: the header names every column of /stages" '[ "$(head -1 "$tmp/s.csv")" = "index,layer,name,op,mode,quantized,numel,ref_amax,prod_amax,ref_nan,prod_nan,ref_inf,prod_inf,cosine,rel_l2,sqnr_db,max_abs_err,sat_frac,zero_block_frac,scale_ratio,weight_rel_l2,verdict,floor_sqnr_db,scale_mult,alpha,worst_block,worst_block_rel,topk_agree,kl_div,top1_agree,nll_ref,nll_prod" ]'
ok "csv: 32 fields on every line" '[ "$(awk -F, "{print NF}" "$tmp/s.csv" | sort -u)" = 32 ]'
ok "csv: the q_a_proj isolated row: empty production output, scale_inverted" \
  'awk -F, "\$3 == \"layers.0.self_attn.q_a_proj\" && \$5 == \"isolated\" { found = (\$9 == 0 && \$8 > 0 && \$22 == \"scale_inverted\") } END { exit !found }" "$tmp/s.csv"'
# every cosine and SQNR in the CSV is the one trace --json reported (to 9 significant digits)
sed -n '/"stages": \[/,$p' "$tmp/t.json" >"$tmp/stages.json"
paste -d' ' <(sed -n 's/.*"cosine": \(.*\),$/\1/p' "$tmp/stages.json") <(sed -n 's/.*"sqnr_db": \(.*\),$/\1/p' "$tmp/stages.json") >"$tmp/j.txt"
awk -F, 'NR > 1 { print ($14 == "nan" ? "null" : $14), ($16 == "nan" ? "null" : $16) }' "$tmp/s.csv" >"$tmp/c.txt"
ok "csv: cosine and SQNR of every row match the trace's JSON" \
  'paste -d" " "$tmp/j.txt" "$tmp/c.txt" | awk "function d(a, b) { return a == b || (a != \"null\" && b != \"null\" && (a - b < 1e-7 * (1 + (a < 0 ? -a : a))) && (b - a < 1e-7 * (1 + (a < 0 ? -a : a)))) } { if (!d(\$1, \$3) || !d(\$2, \$4)) { print NR\": \"\$0; bad = 1 } } END { exit bad }" && [ "$(wc -l <"$tmp/j.txt")" -eq "$rows" ]'

"$bin" show "$tmp/t.h5" --json >"$tmp/s.json"
ok "json: exit 0, every row, the summary" '[ $? -eq 0 ] && [ "$(grep -c "\"verdict\":" "$tmp/s.json")" -eq "$rows" ] && grep -q "\"status\": \"diverged\"" "$tmp/s.json" && grep -q "\"first_divergence\": \"layers.0.self_attn.q_a_proj\"" "$tmp/s.json"'
"$bin" show "$tmp/t.h5" --csv --stage 'layers.1.*' >"$tmp/f.csv"
ok "--stage: only layer 1 in the csv" '[ "$(wc -l <"$tmp/f.csv")" -gt 10 ] && ! tail -n +2 "$tmp/f.csv" | cut -d, -f3 | grep -qv "^layers\.1\."'

"$bin" show /etc/hostname >/dev/null 2>"$tmp/err"
ok "not a trace: exit 2 naming the file" '[ $? -eq 2 ] && grep -q "/etc/hostname" "$tmp/err"'
"$bin" show "$tmp/t.h5" --csv --json >/dev/null 2>"$tmp/err"
ok "--csv with --json: exit 2" '[ $? -eq 2 ]'
"$bin" show >/dev/null 2>"$tmp/err"
ok "no trace: exit 2 with the usage" '[ $? -eq 2 ] && grep -q "usage: nvfp4dbg show" "$tmp/err"'
echo "show: $pass passed, $fail failed"
[ $fail -eq 0 ]
