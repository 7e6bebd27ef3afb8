#!/usr/bin/env bash
# transformers 5's fused expert layout (golden/conformance/qwen3_moe/bf16-fused-experts: per layer
# mlp.experts.gate_up_proj [E, 2I, H] and down_proj [E, H, I]) with shapes that do not pair up: exit 2
# naming the tensors and both layouts, never a trace of sliced garbage.
#   usage: fused_experts_bad.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
src="$root/golden/conformance/qwen3_moe/bf16-fused-experts"

. "$(dirname "$0")/edit_trace.sh"
bad() { # name header-edit (same length) expected-message-part
  edited_trace_bad "$1" "$src" model.safetensors "$2" "$3"
  ok "$1: the header edit kept the file's size" '[ $(stat -c %s "$tmp/ck/model.safetensors") -eq $(stat -c %s "$src/model.safetensors") ]'
}
# four experts' down_proj of width 64 beside eight gate_up_proj: the expert counts disagree
bad "down_proj of 4 experts" 's/"model.layers.1.mlp.experts.down_proj":\{"dtype":"BF16","shape":\[8,64,32\]/"model.layers.1.mlp.experts.down_proj":{"dtype":"BF16","shape":[4,64,64]/' \
    "fused experts 'model.layers.1.mlp.experts': model.layers.1.mlp.experts.gate_up_proj is BF16 [8, 64, 64] and model.layers.1.mlp.experts.down_proj is BF16 [4, 64, 64]"
# a gate_up_proj without its down_proj (renamed away)
bad "down_proj missing" 's/"model.layers.1.mlp.experts.down_proj"/"model.layers.1.mlp.experts.down_prox"/' \
    "fused experts 'model.layers.1.mlp.experts': missing or malformed tensor 'model.layers.1.mlp.experts.down_proj'"
# the same checkpoint as stored: the reference of bf16/, figure for figure
"$bin" trace --force "$src" --allow-unquantized --backend cpu --out "$tmp/f.h5" >/dev/null 2>&1; rc=$?
ok "the fused layout traces: exit $rc" '[ $rc -eq 0 ]'
"$bin" trace --force "$root/golden/conformance/qwen3_moe/bf16" --allow-unquantized --backend cpu --out "$tmp/o.h5" >/dev/null 2>&1
"$bin" compare "$tmp/f.h5" "$tmp/o.h5" >"$tmp/c.out" 2>&1; rc=$?
ok "the same rows as the per-expert layout: compare exit $rc ($(tail -1 "$tmp/c.out"))" '[ $rc -eq 0 ] && grep -q "0 regressions" "$tmp/c.out"'
echo "fused experts bad inputs: $pass passed, $fail failed"
[ $fail -eq 0 ]
