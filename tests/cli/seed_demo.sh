#!/usr/bin/env bash
# The README's main job: tracing the shipped seed-bug checkpoint names layers.0.self_attn.q_a_proj
# with scale_inverted, shows the empty production output, and exits 1; the override with the right
# value makes the trace clean; `trace` without a checkpoint prints usage naming the demo.
#   usage: seed_demo.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"

"$bin" trace --force "$root/golden/seed-bug-v4" --backend cpu --no-color --table --out "$tmp/seed.h5" >"$tmp/out" 2>&1
rc=$?
ok "seed trace exits 1 (got $rc)" '[ $rc -eq 1 ]'
ok "closing line names q_a_proj and scale_inverted" 'grep -q "first divergence at layers.0.self_attn.q_a_proj (isolated).*scale_inverted" "$tmp/out"'
ok "the q_a_proj row shows an empty production output" 'grep -E "^layers.0.self_attn.q_a_proj +linear +isolated" "$tmp/out" | grep -qE " 0 +0 +0\.00000"'
ok "kv_proj is flagged too" 'grep -E "^layers.0.self_attn.kv_proj +linear +isolated" "$tmp/out" | grep -q scale_inverted'

# the hypothesis: the right multipliers are 2688/amax, i.e. the reciprocals of what is stored
fix=()
for m in q_a_proj kv_proj; do
  v=$(sed -n "/layers.0.self_attn.$m/,/stored/p" "$root/golden/seed-bug-v4.faults.json" | grep '"stored"' | sed 's/.*: *//; s/,$//')
  fix+=(--override "model.layers.0.self_attn.$m.input_global_scale=$(awk -v s="$v" 'BEGIN { printf "%.9g", 1 / s }')")
done
"$bin" trace --force "$root/golden/seed-bug-v4" --backend cpu --out "$tmp/fixed.h5" "${fix[@]}" >"$tmp/fixed" 2>&1
rc=$?
ok "the override with the right values makes the trace clean (got $rc: $(tail -2 "$tmp/fixed" | head -1 | cut -c1-120))" '[ $rc -eq 0 ]'

"$bin" trace >/dev/null 2>"$tmp/usage"
rc=$?
ok "trace without a checkpoint exits 2" '[ $rc -eq 2 ]'
ok "and names the shipped checkpoint" 'grep -q "golden/seed-bug-v4" "$tmp/usage"'
echo "seed demo: $pass passed, $fail failed"
[ $fail -eq 0 ]
