#!/usr/bin/env bash
# One model under each naming the Hub uses (issue 32 item 1): the Mixtral fixture's NVFP4
# checkpoint (llmcompressor: experts as gate/up/down_proj) rewritten with Mistral's expert names
# w1/w3/w2 while quantized (weight_packed, weight_scale, the global scales: a RedHatAI-style
# export), which has no `w1.weight` for the recipe's naming to detect. It must load, and trace to
# the same rows as the original naming, figure by figure (compare exit 0).
#   usage: hub_names.sh NVFP4DBG MK_RENAMED SOURCE_ROOT
set -u
bin="$1"; mk="$2"; root="$3"
. "$(dirname "$0")/../lib.sh"
src="$root/golden/conformance/mixtral/nvfp4"
mkdir "$tmp/w123"; cp "$src"/*.json "$tmp/w123/"
"$mk" "$src" "$tmp/w123/model.safetensors" .gate_proj.=.w1. .up_proj.=.w3. .down_proj.=.w2. >"$tmp/mk.out" 2>&1
ok "the checkpoint rewritten with w1/w3/w2 ($(cat "$tmp/mk.out"))" '[ $? -eq 0 ] && [ -f "$tmp/w123/model.safetensors" ]'
"$bin" inspect "$tmp/w123" >"$tmp/i.out" 2>&1; rc=$?
ok "inspect of the w1/w3/w2 NVFP4 checkpoint: exit $rc" '[ $rc -eq 0 ] && grep -q "block_sparse_moe.experts.0.w1" "$tmp/i.out"'
ok "inspect names the family and the naming it recognised ($(grep '^family' "$tmp/i.out"))" \
   'grep -qx "family      recipe mixtral, naming w123" "$tmp/i.out"'
"$bin" inspect "$src" >"$tmp/i0.out" 2>&1
ok "and the original naming as canonical ($(grep '^family' "$tmp/i0.out"))" \
   'grep -qx "family      recipe mixtral, naming canonical" "$tmp/i0.out"'
mkdir "$tmp/unknown"; cp "$src"/model.safetensors "$tmp/unknown/"
sed 's/"model_type": *"mixtral"/"model_type": "nosuchfamily"/' "$src/config.json" >"$tmp/unknown/config.json"
"$bin" inspect "$tmp/unknown" >"$tmp/iu.out" 2>&1; rc=$?
ok "a model_type no recipe matches: inspect still exit 0 and says so ($(grep '^family' "$tmp/iu.out" | cut -c1-120))" \
   '[ $rc -eq 0 ] && grep -q "^family      none: no recipe in .* matches model_type .nosuchfamily." "$tmp/iu.out" && grep -q "^not checked: whether trace can load it" "$tmp/iu.out"'
"$bin" trace --force "$tmp/w123" --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/w.h5" >"$tmp/t.out" 2>&1; rc=$?
ok "trace of it: exit $rc ($(tail -c 300 "$tmp/t.out"))" '[ $rc -eq 0 ]'
"$bin" trace --force "$src" --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/o.h5" >/dev/null 2>&1
"$bin" compare "$tmp/w.h5" "$tmp/o.h5" >"$tmp/c.out" 2>&1; rc=$?
ok "the same rows as the original naming: compare exit $rc ($(tail -1 "$tmp/c.out"))" '[ $rc -eq 0 ] && grep -q "0 regressions" "$tmp/c.out"'
# under the w1/w3 names, an expert's w1 and w3 stored exchanged (traced with the BF16 original, whose
# names are gate_proj/up_proj) is gate_up_order, proven by reading them in each other's place
"$bin" synth "$tmp/w13x" --from "$tmp/w123" --inject gate-up-swap@layers.1.block_sparse_moe.experts.4.w1 >"$tmp/s.out" 2>&1
"$bin" trace --force "$tmp/w13x" --backend "${ND_TEST_BACKEND:-cpu}" --reference-checkpoint "$root/golden/conformance/mixtral/bf16" \
  --out "$tmp/x.h5" >"$tmp/x.out" 2>&1; rc=$?
ok "w1/w3 stored exchanged: exit $rc, $(grep -m1 '^cause' "$tmp/x.out" | cut -c1-60)" \
   '[ $rc -eq 1 ] && grep -q "^first divergence at layers.1.block_sparse_moe.experts.4.gate_proj" "$tmp/x.out" && grep -q "^cause gate_up_order (proven by repair)" "$tmp/x.out"'
# the layer line and the rows say the proven cause too (not accumulated_error above it)
ok "the layer line names the proven cause: $(grep -E '^1 ' "$tmp/x.out" | tr -s ' ' | cut -c1-80)" \
   'grep -qE "^1 +block_sparse_moe.experts.4.gate_proj .* gate_up_order" "$tmp/x.out"'
"$bin" show "$tmp/x.h5" --json >"$tmp/x.json" 2>&1
ok "and the stored rows of that stage" '[ "$(grep -c "\"verdict\": \"gate_up_order\"" "$tmp/x.json")" -ge 1 ] && ! grep -q "accumulated_error" "$tmp/x.json"'
next=$(sed -n 's/^  next: nvfp4dbg trace //p' "$tmp/x.out")
read -r -a argv <<<"$next"
"$bin" trace --force "${argv[@]}" --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/x2.h5" >"$tmp/x2.out" 2>&1; rc=$?
ok "its next command, run as printed: exit $rc ($(grep -m1 'divergence' "$tmp/x2.out"))" '[ $rc -eq 0 ]'
# Kimi-K2 (moonshotai): the DeepSeek-V3 architecture under model_type kimi_k2 (its config.json names
# DeepseekV3ForCausalLM with remote code): the deepseek_v3 fixture so relabelled traces to the same rows
k2="$root/golden/conformance/deepseek_v3/nvfp4"
mkdir "$tmp/kimi"; cp "$k2"/* "$tmp/kimi/"
sed -i 's/"model_type": *"deepseek_v3"/"model_type": "kimi_k2"/' "$tmp/kimi/config.json"
"$bin" inspect "$tmp/kimi" >"$tmp/ik.out" 2>&1; rc=$?
ok "kimi_k2: inspect exit $rc names the deepseek_v3 recipe ($(grep '^family' "$tmp/ik.out"))" \
   '[ $rc -eq 0 ] && grep -qx "family      recipe deepseek_v3, naming canonical" "$tmp/ik.out"'
"$bin" trace --force "$tmp/kimi" --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/k.h5" >/dev/null 2>&1; rc=$?
ok "kimi_k2: trace exit $rc" '[ $rc -eq 0 ]'
"$bin" trace --force "$k2" --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/d.h5" >/dev/null 2>&1
"$bin" compare "$tmp/k.h5" "$tmp/d.h5" >"$tmp/ck.out" 2>&1; rc=$?
ok "kimi_k2: the deepseek_v3 checkpoint's rows: compare exit $rc ($(tail -1 "$tmp/ck.out"))" '[ $rc -eq 0 ] && grep -q "0 regressions" "$tmp/ck.out"'
echo "hub names: $pass passed, $fail failed"
[ $fail -eq 0 ]
