#!/bin/bash
# against.sh NVFP4DBG SOURCE_ROOT — `report RUN.h5 --against OTHER.h5` on real traces: the seed-bug
# trace, and the trace of its own next command, run as printed (both shards of the fused q_a/kv
# projection repaired, written beside the first as before-repaired.h5: no divergence left). The
# page holds both summaries and, for the repaired stage, both traces' figures and their difference, checked against the SQNR the diagnosis measured with the repair
# (/summary sqnr_before_db, sqnr_after_db, read with h5dump). Incomparable traces (other tokens),
# a missing trace and a missing value are refused with exit 2 and no page.
set -u
bin=$1 root=$2
command -v h5dump > /dev/null || { echo "SKIP: h5dump not installed"; exit 77; }
. "$(dirname "$0")/../lib.sh"
attr() { h5dump -a "/summary/$2" "$1" | sed -n 's/^ *(0): "\{0,1\}\([^"]*\)"\{0,1\}$/\1/p'; }

"$bin" trace --force "$root/golden/seed-bug-v4" --out "$tmp/before.h5" > "$tmp/t1.txt" 2>&1
ok "seed-bug trace exits 1" '[ $? -eq 1 ]'
next=$(attr "$tmp/before.h5" next_command)
first=$(attr "$tmp/before.h5" first_divergence)
before=$(attr "$tmp/before.h5" sqnr_before_db) after=$(attr "$tmp/before.h5" sqnr_after_db)
ok "the trace has a next command ($next)" '[ "${next#nvfp4dbg trace }" != "$next" ]'
# the next command as printed: it writes its trace beside this one
read -r -a args <<< "${next#nvfp4dbg }"
ok "the next command writes before-repaired.h5 ($next)" '[ "${args[-2]}" = --out ] && [ "${args[-1]}" = "$tmp/before-repaired.h5" ]'
"$bin" "${args[@]}" > "$tmp/t2.txt" 2>&1
ok "the repaired trace has no divergence (exit $?)" '[ $? -eq 0 ] && grep -q "no divergence" "$tmp/t2.txt"'
mv "$tmp/before-repaired.h5" "$tmp/after.h5"
first2=$(attr "$tmp/after.h5" first_divergence)
ok "and no first divergence ('$first2')" '[ -z "$first2" ]'

"$bin" report "$tmp/after.h5" --against "$tmp/before.h5" --html "$tmp/p.html" > "$tmp/r.txt" 2>&1
rc=$?
ok "report --against exit 0 (got $rc: $(cat "$tmp/r.txt"))" '[ $rc -eq 0 ]'
n1=$(h5dump -H -d /stages "$tmp/after.h5" | sed -n 's/.*DATASPACE *SIMPLE { ( \([0-9]*\) ).*/\1/p')
ok "stdout names both traces" 'grep -q "($n1 rows against $n1 rows of $tmp/before.h5" "$tmp/r.txt"'
page=$(cat "$tmp/p.html")
has() { grep -qF -- "$1" <<< "$page"; }
ok "both summaries on top" 'has "<div class=\"banner ok\" id=\"verdict\">" && has "<div class=\"banner diverged\" id=\"verdict-other\">"'
ok "the other's first divergence in the side-by-side table (none in the run)" 'has "<tr class=\"changed\"><td>first divergence<td>-<td>$first"'
# the repaired stage: run = after the repair (sqnr_after_db), other = before (sqnr_before_db)
sa=$(printf '%.4g' "$after") sb=$(printf '%.4g' "$before") d=$(printf '%+.4g' "$(awk -v a="$after" -v b="$before" 'BEGIN{print a-b}')")
row="<tr class=\"ofirst changed\"><td>$first<td>isolated<td>"
ok "the repaired row is marked as the other's first divergence with another verdict" 'has "$row"'
line=$(grep -F -- "$row" <<< "$page")
ok "its SQNR: $sa after, $sb before, difference $d" 'grep -qF "<td>$sa<td>$sb<td class=\"d\">$d<td>" <<< "$line"'
ok "its verdicts: ok after, scale_inverted before" 'grep -qE "<td>ok<td>scale_inverted$" <<< "$line"'
ok "every stage matched" 'has "<p id=\"against-counts\">$n1 rows matched, "'
ok "the other's file name shown" 'has "<div class=\"btitle\">other: $tmp/before.h5</div>"'

# refusals: other tokens, another length, a missing trace, a missing value; no page left behind
"$bin" trace --force "$root/golden/seed-bug-v4" --tokens 1,2,3 --out "$tmp/a3.h5" > /dev/null 2>&1
"$bin" trace --force "$root/golden/seed-bug-v4" --tokens 1,2,4 --out "$tmp/b3.h5" > /dev/null 2>&1
"$bin" report "$tmp/a3.h5" --against "$tmp/b3.h5" --html "$tmp/x.html" > "$tmp/o" 2> "$tmp/e"
rc=$?
ok "other tokens: exit 2 (got $rc)" '[ $rc -eq 2 ]'
ok "other tokens: the message names both files and the token" 'grep -qF "$tmp/a3.h5 and $tmp/b3.h5 are not comparable: token 2 differs (3 vs 4)" "$tmp/e"'
ok "other tokens: no page" '[ ! -e "$tmp/x.html" ] && [ ! -e "$tmp/x.html.tmp" ] && [ ! -s "$tmp/o" ]'
"$bin" report "$tmp/before.h5" --against="$tmp/a3.h5" --html "$tmp/x.html" > /dev/null 2> "$tmp/e"
rc=$?
ok "another length: exit 2 naming the counts (got $rc: $(cat "$tmp/e"))" '[ $rc -eq 2 ] && grep -q "made from 16 and 3 tokens" "$tmp/e" && [ ! -e "$tmp/x.html" ]'
"$bin" report "$tmp/before.h5" --against "$tmp/nope.h5" --html "$tmp/x.html" > /dev/null 2> "$tmp/e"
rc=$?
ok "missing other trace: exit 2 naming it (got $rc)" '[ $rc -eq 2 ] && grep -q "nope.h5" "$tmp/e" && [ ! -e "$tmp/x.html" ]'
"$bin" report "$tmp/before.h5" --html "$tmp/x.html" --against > /dev/null 2> "$tmp/e"
rc=$?
ok "--against without a file: exit 2 (got $rc)" '[ $rc -eq 2 ] && grep -q "against needs a trace file" "$tmp/e" && [ ! -e "$tmp/x.html" ]'
"$bin" report "$tmp/before.h5" --html "$tmp/x.html" --against= > /dev/null 2> "$tmp/e"
rc=$?
ok "--against= empty: exit 2 (got $rc)" '[ $rc -eq 2 ] && [ ! -e "$tmp/x.html" ]'
echo "against: $pass passed, $fail failed"
[ $fail -eq 0 ]
