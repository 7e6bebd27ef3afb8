#!/usr/bin/env bash
# The fault catalogue on checkpoints nvfp4dbg did not write (issue 13): the conformance fixtures
# (transformers' own model classes, quantized by llmcompressor/compressed-tensors and by ModelOpt,
# golden/conformance) get one fault each with `synth OUT --from CKPT --inject FAULT@MODULE`, and a
# trace under the default stack must name it at that stage with the right cause, proven by repair
# or by a static fact; the next command it prints, run as printed, must clear that stage. The
# DeepSeek-V4 fixture written by llmcompressor has fused shards (wq_a/wkv) with unequal weight
# global scales: an inverted input scale on that projection must still be scale_inverted.
#   usage: planted_faults.sh NVFP4DBG SOURCE_ROOT
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

faults=("input-scale-inverted scale_inverted" "input-scale-mul=100 scale_saturation"
        "input-scale-mul=0.00000001 scale_underflow" "input-scale-inf nonfinite_scale"
        "weight-global-scale-zero nonfinite_scale" "weight-scale-nan nan_weight_scale"
        "missing-input-scale nonfinite_scale" "nibble-swap weight_packing")
for fmt in nvfp4 modelopt; do
  for fc in "${faults[@]}"; do
    read -r fault cause <<<"$fc"
    check llama "$fmt" layers.1.self_attn.o_proj layers.1.self_attn.o_proj "$fault" "$cause"
    check deepseek_v3 "$fmt" layers.0.self_attn.q_b_proj layers.0.self_attn.q_b_proj "$fault" "$cause"
    check deepseek_v4 "$fmt" layers.1.attn.wq_b layers.1.self_attn.q_b_proj "$fault" "$cause"
  done
  # the issue's case: an inverted input scale on a fused shard whose weight globals differ
  check deepseek_v4 "$fmt" layers.0.attn.wq_a layers.0.self_attn.q_a_proj input-scale-inverted scale_inverted
  check llama "$fmt" layers.0.self_attn.k_proj layers.0.self_attn.k_proj input-scale-inverted scale_inverted
done
echo "planted faults on foreign checkpoints: $pass passed, $fail failed"
[ $fail -eq 0 ]
