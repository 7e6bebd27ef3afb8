#!/usr/bin/env bash
# Planted faults on a real trained model (issue 31 item 3): each fault is written into the real tools'
# checkpoint with `synth --from`, and `trace` (the manifest's real prompt, the default stack) must name
# it at the planted module with the right cause, proven by repair or by a static fact; the printed
# next command, run as printed, must leave that stage ok. The seed bug (an inverted input scale), NaN
# block scales, a zero global scale, a weight global off by 2^2 and swapped nibbles (both found with
# --reference-checkpoint set to the BF16 original), on the llmcompressor and ModelOpt checkpoints.
#   usage: real_faults.sh NVFP4DBG FAMILY
set -u
. "$(dirname "$0")/real_lib.sh" "$@"
nl=$(manifest "m['config'].get('num_hidden_layers') or m['config']['text_config']['num_hidden_layers']")
mid=$((nl / 2)); last=$((nl - 1))
field() { json_field "$1" "$2"; }
check() { # variant module fault cause [--reference-checkpoint]
  local v="$1" mod="$2" fault="$3" cause="$4" extra=()
  [ "${5:-}" = ref ] && extra=(--reference-checkpoint "$m/bf16")
  rm -rf "$tmp/ck" "$tmp/ck.faults.json"
  if ! "$bin" synth "$tmp/ck" --from "$m/$v" --inject "$fault@$mod" >/dev/null 2>"$tmp/err"; then
    ok "$fam/$v $fault@$mod: synth --from ($(head -c 200 "$tmp/err"))" false; return
  fi
  "$bin" trace --force "$tmp/ck" --tokens "$toks" --backend "$be" --json --out "$tmp/t.h5" -q "${extra[@]}" >"$tmp/o.json" 2>"$tmp/err"
  local rc=$? st ca pr
  st=$(field first_divergence "$tmp/o.json"); ca=$(field cause "$tmp/o.json"); pr=$(field proof "$tmp/o.json")
  ok "$fam/$v $fault@$mod: named at $mod as $cause, proven (exit $rc, '$st' '$ca' proof '$pr')" \
    '[ $rc -eq 1 ] && [ "$st" = "$mod" ] && [ "$ca" = "$cause" ] && [ -n "$pr" ] && [ "$pr" != none ]'
  local next
  next=$(grep -m1 '"next_command": "' "$tmp/o.json" | sed 's/.*: "\(.*\)",*/\1/')
  if [ -z "$next" ]; then
    case "$cause" in nonfinite_scale|nan_weight_scale) return ;; esac   # static facts without a computable repair
    ok "$fam/$v $fault@$mod: a next command for $cause" false; return
  fi
  read -r -a argv <<<"${next#nvfp4dbg trace }"
  "$bin" trace --force "${argv[@]}" --backend "$be" --json --out "$tmp/n.h5" -q >"$tmp/n.json" 2>/dev/null
  ok "$fam/$v $fault@$mod: the printed next command leaves the stage ok" '[ "$(row_verdict "$mod" "$tmp/n.json")" = ok ]'
}
# both writers' checkpoints of the first family; the llmcompressor one of the larger (CI's time)
case "$fam" in smollm2) fault_variants="nvfp4 modelopt" ;; *) fault_variants="nvfp4" ;; esac
for v in $fault_variants; do
  [ -f "$m/$v/config.json" ] || continue
  check $v layers.0.self_attn.q_proj input-scale-inverted scale_inverted           # the seed bug
  check $v layers.$mid.mlp.down_proj weight-scale-nan nan_weight_scale
  check $v layers.$last.self_attn.o_proj weight-global-scale-zero nonfinite_scale
  # the global alone x4 (codes and block scales kept: synth's fused-scale-mismatch on an unfused module)
  check $v layers.$((mid + 1)).mlp.down_proj fused-scale-mismatch=4 weight_global_mismatch ref
  check $v layers.1.self_attn.k_proj nibble-swap weight_packing ref
done
echo "real faults $fam: $pass passed, $fail failed"
[ $fail -eq 0 ]
