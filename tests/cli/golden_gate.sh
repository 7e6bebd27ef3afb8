#!/usr/bin/env bash
# The CI gate on the shipped checkpoints (issue 7): every shipped checkpoint is traced and compared
# with its golden trace (any drift fails); a copy of a trace compared with it is clean, the same
# file given twice is refused (a gate whose paths collapsed cannot fail); and the gate
# bites: perturbing one production parameter (the activation quantizer multiplier of one stage)
# fails the comparison, naming that stage.
#   usage: golden_gate.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
for ck in seed-bug-v4 clean-v4; do
  "$bin" trace --force "$root/golden/$ck" --backend cpu --out "$tmp/$ck.h5" >/dev/null 2>&1
  "$bin" compare "$tmp/$ck.h5" "$root/golden/traces/$ck.h5" >"$tmp/cmp" 2>&1
  rc=$?
  ok "$ck matches its golden trace (exit $rc: $(tail -1 "$tmp/cmp"))" '[ $rc -eq 0 ]'
  cp "$tmp/$ck.h5" "$tmp/$ck-copy.h5"
  "$bin" compare "$tmp/$ck-copy.h5" "$tmp/$ck.h5" >/dev/null 2>&1
  rc=$?
  ok "$ck compared with a copy of itself is clean (exit $rc)" '[ $rc -eq 0 ]'
  "$bin" compare "$tmp/$ck.h5" "$tmp/$ck.h5" >/dev/null 2>"$tmp/err"
  rc=$?
  ok "$ck given twice as one file is refused (exit $rc)" '[ $rc -eq 2 ] && grep -q "are the same file" "$tmp/err"'
done
# the gate bites: a 1.5x quantizer multiplier on one stage (a plausible kernel-side slip)
"$bin" trace --force "$root/golden/clean-v4" --backend cpu --out "$tmp/perturbed.h5" \
  --override layers.1.self_attn.q_b_proj.quant_mult=500 >/dev/null 2>&1
"$bin" compare "$tmp/perturbed.h5" "$root/golden/traces/clean-v4.h5" >"$tmp/cmp" 2>&1
rc=$?
ok "a perturbed multiplier fails the gate (exit $rc)" '[ $rc -eq 1 ]'
ok "and the report names the stage" 'grep -q "layers.1.self_attn.q_b_proj" "$tmp/cmp"'
# output that fits (issue 36 item 4): the seed bug against the clean golden regresses in hundreds of
# rows; the table shows the 20 worst and counts the rest per figure; --max 0 shows all
"$bin" trace --force "$root/golden/seed-bug-v4" --backend cpu --out "$tmp/seed.h5" >/dev/null 2>&1
"$bin" compare "$tmp/seed.h5" "$root/golden/traces/clean-v4.h5" >"$tmp/cmp" 2>&1; rc=$?
nall=$("$bin" compare "$tmp/seed.h5" "$root/golden/traces/clean-v4.h5" --max 0 2>&1 | wc -l)
ok "compare of a broken run: exit $rc, $(wc -l <"$tmp/cmp") lines (--max 0: $nall), the rest counted ($(grep -o '^\.\.\. [0-9]* more rows' "$tmp/cmp"))" \
   '[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/cmp")" -eq 24 ] && [ "$nall" -gt 100 ] && grep -q "^\.\.\. $((nall - 23)) more rows not shown (--max 0 shows all; --json lists all): .*cosine [0-9]" "$tmp/cmp"'
"$bin" compare "$tmp/seed.h5" "$root/golden/traces/clean-v4.h5" --max 5 >"$tmp/cmp" 2>&1
ok "--max 5: 5 rows under the header" '[ "$(wc -l <"$tmp/cmp")" -eq 9 ]'
"$bin" compare "$tmp/seed.h5" "$root/golden/traces/clean-v4.h5" --max=-1 >"$tmp/cmp" 2>&1; rc=$?
ok "--max -1 is a usage error (exit $rc)" '[ $rc -eq 2 ]'
# and with the wider cross-backend tolerances too
"$bin" compare "$tmp/perturbed.h5" "$root/golden/traces/clean-v4.h5" --tolerances "$root/recipes/tolerances-cross-backend.yaml" >"$tmp/cmp" 2>&1
rc=$?
ok "the cross-backend tolerances still catch it (exit $rc)" '[ $rc -eq 1 ]'
# one kernel's rounding perturbed: the quantizer divides as compressed-tensors does instead of
# multiplying by the reciprocal as the vLLM/FlashInfer kernel does
"$bin" trace --force "$root/golden/clean-v4" --backend cpu --out "$tmp/rounding.h5" --stack "$root/tests/cli/stack-ct-rounding.yaml" >/dev/null 2>&1
"$bin" compare "$tmp/rounding.h5" "$root/golden/traces/clean-v4.h5" >"$tmp/cmp" 2>&1
rc=$?
ok "a perturbed rounding fails the gate (exit $rc)" '[ $rc -eq 1 ]'
ok "naming a stage" 'grep -qE "^compare: [0-9]+ regressions \(first: layers\." "$tmp/cmp"'
# a gate that cannot compare still answers --json with a document (round 24: nothing on stdout)
"$bin" compare "$tmp/nope.h5" "$tmp/nope2.h5" --json >"$tmp/j.json" 2>"$tmp/err"; rc=$?
ok "compare --json of a missing trace: exit $rc, a document saying error" \
   '[ $rc -eq 2 ] && grep -q "\"result\": \"error\"" "$tmp/j.json" && grep -q "\"exit\": 2" "$tmp/j.json" && grep -q "nope.h5: cannot open" "$tmp/j.json"'
echo "golden gate: $pass passed, $fail failed"
[ $fail -eq 0 ]
