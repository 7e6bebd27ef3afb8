#!/usr/bin/env bash
# Faults planted into the issue-19 family fixtures (transformers' own classes, quantized by
# llmcompressor: golden/conformance/{glm4_moe,qwen3,qwen3_moe,mixtral}/nvfp4) with
# `synth OUT --from CKPT --inject FAULT@MODULE`: a trace under the default stack must name the
# planted module with the right cause, proven by repair or by a static fact, and the next command
# it prints, run as printed, must leave that stage ok. Two faults per family: one on attention or a
# dense MLP, one on a routed expert that the prompt's tokens reach (MoE families).
#   usage: family_faults.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
conf="$root/golden/conformance"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
field() { tr -d '\n' <"$2" | sed -n "s/.*\"$1\": *\"\([^\"]*\)\".*/\1/p" | head -n 1; }
first_field() { grep -m1 "\"$1\":" "$2" | sed 's/.*: "\(.*\)",*/\1/'; }

check() { # family format module-in-checkpoint stage fault cause
  local fam="$1" fmt="$2" mod="$3" stage="$4" fault="$5" cause="$6" extra=()
  local src="$conf/$fam/$fmt" ck="$tmp/ck"
  rm -rf "$ck" "$ck.faults.json"
  if ! "$bin" synth "$ck" --from "$src" --inject "$fault@$mod" >/dev/null 2>"$tmp/err"; then
    echo "FAIL synth --from $fam/$fmt $fault@$mod: $(cat "$tmp/err")"; fail=$((fail + 1)); return
  fi
  [ "$fault" = nibble-swap ] && extra=(--reference-checkpoint "$conf/$fam/bf16")
  "$bin" trace "$ck" --backend "${ND_TEST_BACKEND:-cpu}" --json --out "$tmp/t.h5" "${extra[@]}" >"$tmp/o.json" 2>"$tmp/err"
  local rc=$? got_stage got_cause proof next
  got_stage=$(first_field first_divergence "$tmp/o.json")
  got_cause=$(first_field cause "$tmp/o.json")
  proof=$(first_field proof "$tmp/o.json")
  if [ $rc -ne 1 ] || [ "$got_stage" != "$stage" ] || [ "$got_cause" != "$cause" ] || [ "$proof" = none ]; then
    echo "FAIL $fam/$fmt $fault@$mod: exit $rc, '$got_stage' cause '$got_cause' proof '$proof' (want $stage / $cause)"
    fail=$((fail + 1)); return
  fi
  pass=$((pass + 1))
  # the printed next command, run as printed, leaves that stage ok (static facts without a
  # computable repair print none)
  next=$(grep -m1 '"next_command": "' "$tmp/o.json" | sed 's/.*: "\(.*\)",*/\1/')
  if [ -z "$next" ]; then
    # a static fact without a computable repair (no original to fit against) prints no command
    case "$cause" in nonfinite_scale|nan_weight_scale) return ;; esac
    echo "FAIL $fam/$fmt $fault@$mod: no next command for $cause"; fail=$((fail + 1)); return
  fi
  read -r -a argv <<<"${next#nvfp4dbg trace }"
  "$bin" trace "${argv[@]}" --backend "${ND_TEST_BACKEND:-cpu}" --json --out "$tmp/n.h5" >"$tmp/n.json" 2>/dev/null
  if grep -A40 "\"name\": \"$stage\"" "$tmp/n.json" | grep -m1 '"verdict"' | grep -q '"ok"'; then
    pass=$((pass + 1))
  else
    echo "FAIL $fam/$fmt $fault@$mod: after the next command the stage is still $(grep -A40 "\"name\": \"$stage\"" "$tmp/n.json" | grep -m1 '"verdict"')"
    fail=$((fail + 1))
  fi
}

# family module (= stage) fault cause
while read -r fam mod fault cause; do
  check "$fam" nvfp4 "$mod" "$mod" "$fault" "$cause"
done <<'LIST'
glm4_moe layers.1.self_attn.k_proj input-scale-inverted scale_inverted
glm4_moe layers.1.mlp.experts.4.up_proj weight-scale-nan nan_weight_scale
qwen3 layers.1.self_attn.o_proj input-scale-mul=100 scale_saturation
qwen3 layers.0.self_attn.q_proj nibble-swap weight_packing
qwen3_moe layers.0.mlp.down_proj input-scale-mul=0.00000001 scale_underflow
qwen3_moe layers.1.mlp.experts.2.gate_proj nibble-swap weight_packing
mixtral layers.1.block_sparse_moe.experts.4.up_proj weight-global-scale-zero nonfinite_scale
mixtral layers.1.block_sparse_moe.experts.4.down_proj input-scale-inverted scale_inverted
LIST
echo "planted faults on the family fixtures: $pass passed, $fail failed"
[ $fail -eq 0 ]
