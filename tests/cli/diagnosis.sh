#!/usr/bin/env bash
# The diagnosis above the pipeline (issue 13) on the shipped checkpoints: the cause comes with its
# proof in the trace (/summary repair, SQNR before/after, next command), the next command applied
# to the whole run removes the divergence and improves the logits (--apply-repair), the stack sweep
# says which stacks serve the checkpoint, and `explain` prints the same catalogue as docs/causes.md.
#   usage: diagnosis.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
attr() { h5dump -a "/summary/$1" "$2" 2>/dev/null | sed -n 's/^ *(0): *//p' | tr -d '"'; }

seed="$root/golden/seed-bug-v4"
"$bin" trace --force "$seed" --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/s.h5" >"$tmp/s.txt" 2>&1
ok "seed: exit 1" '[ $? -eq 1 ]'
ok "seed: cause scale_inverted proven by repair" 'grep -q "cause scale_inverted (proven by repair)" "$tmp/s.txt"'
ok "trace records the repair" '[ "$(attr repair "$tmp/s.h5")" = input_scale_reciprocal ]'
before=$(attr sqnr_before_db "$tmp/s.h5"); after=$(attr sqnr_after_db "$tmp/s.h5"); floor=$(attr floor_db "$tmp/s.h5")
ok "SQNR before ($before) is far below the floor ($floor), after ($after) within 6 dB of it" \
  'awk -v b="$before" -v a="$after" -v f="$floor" "BEGIN{exit !(b < f - 6 && a >= f - 6)}"'
cmd=$(attr next_command "$tmp/s.h5")
ok "the next command overrides the q_a_proj input scale with its reciprocal (got: $cmd)" \
  '[[ "$cmd" == *"--override model.layers.0.self_attn.q_a_proj.input_global_scale=719.79"* ]]'
# the next command repairs both shards (kv_proj carries the same fault in the seed report) and, run
# as printed, writes its trace beside the first (s-repaired.h5) with no divergence left
ok "the next command repairs kv_proj too and writes s-repaired.h5 (got: $cmd)" \
  '[[ "$cmd" == *"--override model.layers.0.self_attn.kv_proj.input_global_scale=719.79"*" --out $tmp/s-repaired.h5" ]]'
read -r -a argv <<<"${cmd#nvfp4dbg trace }"
"$bin" trace --force "${argv[@]}" --backend "${ND_TEST_BACKEND:-cpu}" --json >"$tmp/n.json" 2>/dev/null
ok "after the next command: exit $?, no divergence, s-repaired.h5 written" '[ $? -eq 0 ] && grep -q "\"status\": \"ok\"" "$tmp/n.json" && [ -s "$tmp/s-repaired.h5" ]'

# --apply-repair: both shards repaired, no divergence left, logits closer to the reference
"$bin" trace --force "$seed" --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/a.h5" --apply-repair --json >"$tmp/a.json" 2>/dev/null
kl0=$(tr -d '\n ' <"$tmp/a.json" | sed 's/.*"kl_before":\([^,}]*\).*/\1/')
kl1=$(tr -d '\n ' <"$tmp/a.json" | sed 's/.*"kl_after":\([^,}]*\).*/\1/')
t0=$(tr -d '\n ' <"$tmp/a.json" | sed 's/.*"top1_before":\([^,}]*\).*/\1/')
t1=$(tr -d '\n ' <"$tmp/a.json" | sed 's/.*"top1_after":\([^,}]*\).*/\1/')
ok "apply-repair: no divergence left" 'tr -d "\n " <"$tmp/a.json" | grep -q "\"status_after\":\"ok\""'
ok "apply-repair: two rounds (q_a_proj, kv_proj)" '[ "$(grep -c "\"repair\": \"input_scale_reciprocal\"" "$tmp/a.json")" -ge 2 ]'
ok "apply-repair: KL $kl0 -> $kl1 falls by 4x, top-1 $t0 -> $t1 rises" \
  'awk -v a="$kl0" -v b="$kl1" -v c="$t0" -v d="$t1" "BEGIN{exit !(b * 4 < a && d > c)}"'
# ... and the trace keeps it (issue 36 item 2): show, show --json, the report (whose next is the
# command with both shards), and that command, run as printed, leaves no divergence
"$bin" show "$tmp/a.h5" >"$tmp/as.txt" 2>&1
ok "show: the apply-repair outcome, with the healthy figures named" \
  'grep -q "^--apply-repair: final logits KL .* -> .*, top-1 0.0% -> .*; after the repairs: no divergence left (the healthy NVFP4 figures)" "$tmp/as.txt"'
"$bin" show "$tmp/a.h5" --json >"$tmp/aj.json" 2>&1
ok "show --json: summary.apply_repair with the same KL after ($kl1)" \
  'tr -d "\n " <"$tmp/aj.json" | grep -q "\"apply_repair\":{\"command\":\"nvfp4dbgtrace.*\"status_after\":\"ok\".*\"kl_after\":$kl1"'
"$bin" report "$tmp/a.h5" --html "$tmp/a.html" -q >/dev/null 2>&1
ok "report: the after-the-repairs item, and next repairs both shards" \
  'grep -q "id=\"verdict-applied\">final logits: KL" "$tmp/a.html" && grep -o "<dt>next<dd><code class=\"cmd\">[^<]*" "$tmp/a.html" | grep -q "q_a_proj.input_global_scale=.*kv_proj.input_global_scale="'
cmd=$(sed -n 's/^  command: nvfp4dbg trace //p' "$tmp/as.txt")
read -r -a argv <<<"$cmd"
"$bin" trace --force "${argv[@]}" --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/a2.h5" >/dev/null 2>&1; rc=$?
ok "the stored command, run as printed: exit $rc (no divergence)" '[ $rc -eq 0 ]'

# --mode chained alone (no isolated rows) still names a module broken on its own: the seed's
# all-zero q_a_proj output (it passed with exit 0), and a module run with an infinite input scale
"$bin" trace --force "$seed" --backend "${ND_TEST_BACKEND:-cpu}" --mode chained --tokens 1,2,3 --out "$tmp/ch.h5" >"$tmp/ch.txt" 2>&1; rc=$?
ok "--mode chained on the seed: exit $rc, $(grep -m1 '^first divergence' "$tmp/ch.txt" | cut -c1-90)" \
  '[ $rc -eq 1 ] && grep -q "^first divergence at layers.0.self_attn.q_a_proj (chained): .*scale_inverted" "$tmp/ch.txt"'
"$bin" synth "$tmp/inf" --from "$root/golden/clean-v4" --inject input-scale-inf@layers.1.self_attn.q_b_proj >/dev/null 2>&1
"$bin" trace --force "$tmp/inf" --backend "${ND_TEST_BACKEND:-cpu}" --mode chained --out "$tmp/inf.h5" >"$tmp/inf.txt" 2>&1; rc=$?
ok "--mode chained with an infinite input scale: exit $rc, nonfinite_scale" \
  '[ $rc -eq 1 ] && grep -q "^first divergence at layers.1.self_attn.q_b_proj (chained): .*nonfinite_scale" "$tmp/inf.txt"'
"$bin" trace --force "$root/golden/clean-v4" --backend "${ND_TEST_BACKEND:-cpu}" --mode chained --out "$tmp/cc.h5" >/dev/null 2>&1; rc=$?
ok "--mode chained on the clean checkpoint: exit $rc" '[ $rc -eq 0 ]'

# the stack sweep on the clean checkpoint: the stacks that keep the checkpoint's meaning serve it,
# the reciprocal-taking profile does not (and the sweep says where it breaks)
"$bin" trace --force "$root/golden/clean-v4" --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/c.h5" --stacks all --json >"$tmp/c.json" 2>/dev/null
ok "clean: exit 0 with the sweep" '[ $? -eq 0 ]'
flat=$(tr -d '\n ' <"$tmp/c.json")
for s in exact vllm vllm-old; do
  ok "clean: $s serves" '[[ "$flat" == *"{\"stack\":\"$s\",\"serves\":true"* ]]'
done
ok "clean: modular-6600 does not, cause scale_inverted" '[[ "$flat" == *"{\"stack\":\"modular-6600\",\"serves\":false,\"first_divergence\":\"layers.0."*"\"cause\":\"scale_inverted\""* ]]'
"$bin" trace --force "$seed" --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/x.h5" --stacks nosuch >/dev/null 2>"$tmp/err"
ok "an unknown stack in the sweep is exit 2" '[ $? -eq 2 ] && grep -q "nosuch" "$tmp/err"'

# the static findings that matter for the stack that ran: unequal fused-shard scales break vllm
# (listed after the diagnosis) and not exact (nothing listed)
"$bin" synth "$tmp/u" --recipe deepseek_v4 --size tiny --unequal-fused-scales >/dev/null
"$bin" trace --force "$tmp/u" --backend "${ND_TEST_BACKEND:-cpu}" --stack vllm --out "$tmp/u.h5" >"$tmp/u.txt" 2>&1
ok "vllm: the fused-scale findings are listed as breaking it" 'grep -q "static findings that break stack vllm" "$tmp/u.txt" && grep -q "fused_scale_mismatch   model.layers.0" "$tmp/u.txt"'
"$bin" trace --force "$tmp/u" --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/u2.h5" --json >"$tmp/u.json" 2>&1
ok "exact: exit 0 and no finding breaks it" '[ $? -eq 0 ] && tr -d "\n " <"$tmp/u.json" | grep -q "\"stack_findings\":\[\]"'

# explain: the catalogue, the docs made from it
"$bin" explain scale_inverted >"$tmp/e.txt"
ok "explain a code: exit 0 with its proof" '[ $? -eq 0 ] && grep -q "proof:" "$tmp/e.txt"'
"$bin" explain no_such_code >/dev/null 2>"$tmp/err"
ok "explain an unknown code: exit 2 listing the codes" '[ $? -eq 2 ] && grep -q "scale_inverted" "$tmp/err"'
"$bin" explain --ops "$(printf 'lin\033]0;T\007ear')" >/dev/null 2>"$tmp/err"; rc=$?
ok "explain --ops of an unknown op with escapes: exit $rc, shown escaped (round 17)" '[ $rc -eq 2 ] && ! grep -q $'"'"'\033'"'"' "$tmp/err" && grep -qF "lin\x1b]0;T\x07ear" "$tmp/err"'
"$bin" explain --all --markdown >"$tmp/causes.md"
ok "docs/causes.md is the catalogue (regenerate: nvfp4dbg explain --all --markdown > docs/causes.md)" 'cmp -s "$tmp/causes.md" "$root/docs/causes.md"'
echo "diagnosis: $pass passed, $fail failed"
[ $fail -eq 0 ]
