#!/usr/bin/env bash
# synth --unequal-fused-scales: fused shards (DeepSeek-V4 q_a_proj + kv_proj, gate_proj + up_proj;
# Llama q/k/v and gate/up) keep each their own weight global scale, 2688/amax of their own weight.
# By default they share the smallest divisor (2688 / the largest amax), so with the switch the
# shard holding the group's largest amax keeps the shared value and the others get larger
# divisors. Shards not fused and every input scale are unchanged (fused shards read one input).
# Without the switch the bytes are those of today: the shipped golden/clean-v4 is regenerated.
#   usage: synth_unequal_fused.sh NVFP4DBG ST_DUMP SOURCE_ROOT
set -u
bin="$1"; dump="$2"; root="$3"
. "$(dirname "$0")/../lib.sh"
val() { awk -v n="$2" '$1 == n { print $6 }' "$1"; }
changed() { diff "$1" "$2" | sed -n 's/^[<>] \([^ ]*\) .*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//'; }
# weight_global_div of module $2 from `inspect --json` output $1
wdiv() { grep -A40 "\"path\": \"$2\"" "$1" | sed -n 's/.*"weight_global_div": \([^,]*\),*/\1/p' | head -n 1; }
# every module $3... has divisor $2 in $1
all_div() { local j="$1" d="$2" m; shift 2; for m in "$@"; do [ "$(wdiv "$j" "model.$m")" = "$d" ] || return 1; done; }

# the default is unchanged: the golden checkpoint, regenerated, is byte-identical
"$bin" synth "$tmp/clean-v4" --recipe deepseek_v4 --size tiny --seed 0 >/dev/null 2>"$tmp/err"
ok "synth clean-v4 exits 0 ($(head -c 200 "$tmp/err"))" '[ -f "$tmp/clean-v4/model.safetensors" ]'
ok "without the switch model.safetensors equals golden/clean-v4's" 'cmp -s "$tmp/clean-v4/model.safetensors" "$root/golden/clean-v4/model.safetensors"'
ok "without the switch config.json equals golden/clean-v4's" 'cmp -s "$tmp/clean-v4/config.json" "$root/golden/clean-v4/config.json"'

for fmt in compressed-tensors modelopt; do
  if [ $fmt = modelopt ]; then WG=weight_scale_2; IN=input_scale; else WG=weight_global_scale; IN=input_global_scale; fi
  for recipe in deepseek_v4 llama; do
    eq="$tmp/$recipe-$fmt-eq"; un="$tmp/$recipe-$fmt-un"
    "$bin" synth "$eq" --recipe $recipe --size tiny --seed 3 --format $fmt >/dev/null 2>&1
    "$bin" synth "$un" --recipe $recipe --size tiny --seed 3 --format $fmt --unequal-fused-scales >/dev/null 2>"$tmp/err"
    ok "$recipe $fmt: --unequal-fused-scales exits 0 ($(head -c 200 "$tmp/err"))" '[ -f "$un/model.safetensors" ]'
    "$bin" inspect --json "$eq" >"$tmp/eq.json" 2>/dev/null
    "$bin" inspect --json "$un" >"$tmp/un.json" 2>/dev/null
    "$dump" list "$eq" >"$tmp/eq.list"; "$dump" list "$un" >"$tmp/un.list"
    # the original is the same: only the quantization of fused shards differs
    ok "$recipe $fmt: the unquantized original is byte-identical" 'cmp -s "$eq/original/model.safetensors" "$un/original/model.safetensors"'
    if [ $recipe = deepseek_v4 ]; then
      groups=("layers.0.self_attn.q_a_proj layers.0.self_attn.kv_proj" "layers.1.self_attn.q_a_proj layers.1.self_attn.kv_proj"
              "layers.0.mlp.experts.0.gate_proj layers.0.mlp.experts.0.up_proj"
              "layers.1.mlp.shared_experts.gate_proj layers.1.mlp.shared_experts.up_proj")
      single=(layers.0.self_attn.q_b_proj layers.0.mlp.experts.0.down_proj)
    else
      groups=("layers.0.self_attn.q_proj layers.0.self_attn.k_proj layers.0.self_attn.v_proj"
              "layers.1.mlp.gate_proj layers.1.mlp.up_proj")
      single=(layers.0.self_attn.o_proj layers.1.mlp.down_proj)
    fi
    for g in "${groups[@]}"; do
      read -r -a mods <<<"$g"
      shared=$(wdiv "$tmp/eq.json" "model.${mods[0]}")
      own=(); for m in "${mods[@]}"; do own+=("$(wdiv "$tmp/un.json" "model.$m")"); done
      ok "$recipe $fmt: default shards of {$g} share one divisor ($shared)" \
         '[ -n "$shared" ] && all_div "$tmp/eq.json" "$shared" "${mods[@]}"'
      distinct=$(printf '%s\n' "${own[@]}" | sort -u | wc -l)
      ok "$recipe $fmt: with the switch the shards of {$g} have ${#mods[@]} different divisors (${own[*]})" '[ "$distinct" = ${#mods[@]} ]'
      # the smallest own divisor (largest amax) is the shared one, the others larger
      ok "$recipe $fmt: the smallest own divisor of {$g} is the shared $shared" \
         'awk -v s="$shared" -v l="${own[*]}" "BEGIN { n = split(l, a, \" \"); m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; r = m / s - 1; exit !(r < 1e-6 && r > -1e-6) }"'
      for m in "${mods[@]}"; do
        ok "$recipe $fmt: $m keeps its input scale" '[ "$(val "$tmp/eq.list" "model.$m.$IN")" = "$(val "$tmp/un.list" "model.$m.$IN")" ] && [ -n "$(val "$tmp/un.list" "model.$m.$IN")" ]'
      done
    done
    for m in "${single[@]}"; do
      ok "$recipe $fmt: unfused $m is unchanged" '! changed "$tmp/eq.list" "$tmp/un.list" | tr " " "\n" | grep -q "^model\.$m\."'
    done
    # what changed is only weight globals and the block scales/codes made with them
    other=$(changed "$tmp/eq.list" "$tmp/un.list" | tr ' ' '\n' | grep -v -E "\.(weight_packed|weight|weight_scale|$WG)$" | tr '\n' ' ')
    ok "$recipe $fmt: nothing but NVFP4 weights and their scales changed (others: '$other')" '[ -z "$other" ]'
    # exact stack: unequal shard scales are no finding worse than a warning; vllm (fuses with one
    # scale) judges them errors
    "$bin" inspect "$un" >/dev/null 2>&1
    rc=$?
    ok "$recipe $fmt: inspect (exact) exits $rc (want 0)" '[ $rc -eq 0 ]'
    "$bin" inspect "$un" --stack vllm >"$tmp/insp" 2>&1
    rc=$?
    ok "$recipe $fmt: inspect --stack vllm exits $rc (want 1) with fused_scale_mismatch" '[ $rc -eq 1 ] && grep -q fused_scale_mismatch "$tmp/insp"'
  done
done
echo "synth --unequal-fused-scales: $pass passed, $fail failed"
[ $fail -eq 0 ]
