#!/usr/bin/env bash
# Block-scale representation faults in checkpoints (issue 18), planted with synth --inject into the
# conformance fixtures that llmcompressor (compressed-tensors) and ModelOpt wrote, and into synth's
# own DeepSeek-V3 where a fault needs whole 128x4 scale tiles:
#   scale-pow2          scales rounded up to powers of two, codes kept     -> scale_pow2_rounding (block_scale_refit)
#   scale-transposed    the [K/16, N] matrix stored in the [N, K/16] tensor -> scale_layout_mismatch (scale_layout)
#   scale-swizzled      the 128x4 swizzled layout stored                     -> scale_layout_mismatch (scale_layout)
#   scale-encoding=e8m0 E8M0 exponents (MX conversion) where E4M3 is read    -> scale_encoding_mismatch (scale_encoding)
# Both paths read the checkpoint's bytes, so these need the original (--reference-checkpoint): the
# trace must name the planted stage with the cause, proven by repair, and the printed next command,
# run as printed, must make that stage ok. Faults that cannot apply are exit 2 naming the reason.
#   usage: scale_faults.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
conf="$root/golden/conformance"
be="${ND_TEST_BACKEND:-cpu}"
. "$(dirname "$0")/../lib.sh"

check() { # label ckpt original stage cause repair
  local label="$1" ck="$2" orig="$3" stage="$4" cause="$5" repair="$6"
  "$bin" trace --force "$ck" --backend "$be" --json --out "$tmp/t.h5" --reference-checkpoint "$orig" >"$tmp/o.json" 2>"$tmp/err"
  local rc=$? gs gc pr rp next
  gs=$(json_field first_divergence "$tmp/o.json"); gc=$(json_field cause "$tmp/o.json")
  pr=$(json_field proof "$tmp/o.json"); rp=$(json_field repair "$tmp/o.json")
  ok "$label: exit 1 at $stage, $cause proven by $repair (got $rc, '$gs' '$gc' '$pr' '$rp')" \
    '[ $rc -eq 1 ] && [ "$gs" = "$stage" ] && [ "$gc" = "$cause" ] && [ "$pr" = repair ] && [ "$rp" = "$repair" ]'
  next=$(json_field next_command "$tmp/o.json")
  local -a argv
  read -r -a argv <<<"${next#nvfp4dbg trace }"
  "$bin" trace --force "${argv[@]}" --backend "$be" --json --out "$tmp/n.h5" >"$tmp/n.json" 2>/dev/null
  ok "$label: after the next command ($next) $stage is ok" '[ "$(row_verdict "$stage" "$tmp/n.json")" = ok ]'
}

plant() { # out src fault@module -> 0 on success
  rm -rf "$1" "$1.faults.json"
  "$bin" synth "$1" --from "$2" --inject "$3" >/dev/null 2>"$tmp/err" || { echo "FAIL synth --from $2 $3: $(cat "$tmp/err")"; fail=$((fail + 1)); return 1; }
}

for fmt in nvfp4 modelopt; do
  for fam in llama deepseek_v3; do
    case "$fam" in
      llama) mod=layers.1.self_attn.o_proj ;;
      deepseek_v3) mod=layers.0.self_attn.q_b_proj ;;
    esac
    for fc in "scale-pow2 scale_pow2_rounding block_scale_refit" "scale-transposed scale_layout_mismatch scale_layout" \
              "scale-encoding=e8m0 scale_encoding_mismatch scale_encoding"; do
      read -r fault cause repair <<<"$fc"
      plant "$tmp/ck" "$conf/$fam/$fmt" "$fault@$mod" || continue
      check "$fam/$fmt $fault@$mod" "$tmp/ck" "$conf/$fam/bf16" "$mod" "$cause" "$repair"
    done
  done
  # swizzled needs whole 128x4 tiles: llama's gate_proj is [128, 64] (scales [128, 4])
  plant "$tmp/ck" "$conf/llama/$fmt" scale-swizzled@layers.1.mlp.gate_proj &&
    check "llama/$fmt scale-swizzled@layers.1.mlp.gate_proj" "$tmp/ck" "$conf/llama/bf16" layers.1.mlp.gate_proj scale_layout_mismatch scale_layout
done
# synth's own DeepSeek-V3 (its original next to it): the dense MLP's gate_proj is [128, 64]
for fmt in compressed-tensors modelopt; do
  rm -rf "$tmp/v3" "$tmp/v3.faults.json"
  "$bin" synth "$tmp/v3" --recipe deepseek_v3 --size tiny --format "$fmt" --inject scale-swizzled@layers.0.mlp.gate_proj \
    --inject scale-pow2@layers.1.mlp.experts.2.down_proj >/dev/null 2>"$tmp/err" || { echo "FAIL synth v3 $fmt: $(cat "$tmp/err")"; fail=$((fail + 1)); continue; }
  check "synth deepseek_v3 $fmt scale-swizzled@layers.0.mlp.gate_proj" "$tmp/v3" "$tmp/v3/original" layers.0.mlp.gate_proj scale_layout_mismatch scale_layout
  ok "synth deepseek_v3 $fmt: the side file records both faults with the scales they changed" \
    'grep -q "\"fault\": \"scale-swizzled\"" "$tmp/v3.faults.json" && grep -q "\"fault\": \"scale-pow2\"" "$tmp/v3.faults.json" && grep -q "\"scales_changed\": [1-9]" "$tmp/v3.faults.json"'
done

# the pow2 fault rounds every scale (all of them powers of two afterwards) and, with a 448 scale in
# the tensor, halves the global with them: the side file records the new global
plant "$tmp/ck" "$conf/llama/nvfp4" scale-pow2@layers.1.self_attn.o_proj &&
  ok "scale-pow2 on a compressed-tensors fixture records the halved global" 'grep -q "\"stored_global\":" "$tmp/ck.faults.json"'

# faults that cannot apply
nope() { # label want fault@module
  local want="$2"
  rm -rf "$tmp/x"
  "$bin" synth "$tmp/x" --from "$conf/llama/nvfp4" --inject "$3" >/dev/null 2>"$tmp/err"
  local r=$?
  ok "$1: exit 2 naming '$want' (got $r: $(head -c 200 "$tmp/err"))" '[ $r -eq 2 ] && grep -q -- "$want" "$tmp/err"'
}
nope "swizzled on [64, 4] scales" "pads \[64, 4\] block scales to \[128, 4\]" scale-swizzled@layers.1.self_attn.o_proj
nope "encoding u8 is a reading, not a way to write" "not 'u8'" scale-encoding=u8@layers.1.self_attn.o_proj
nope "encoding without a value" "needs a value" scale-encoding@layers.1.self_attn.o_proj
nope "pow2 with a value" "takes no value" scale-pow2=2@layers.1.self_attn.o_proj

echo "block-scale representation faults: $pass passed, $fail failed"
[ $fail -eq 0 ]
