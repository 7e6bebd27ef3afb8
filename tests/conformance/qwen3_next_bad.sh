#!/usr/bin/env bash
# Qwen3-Next checkpoints whose Gated DeltaNet layout does not add up (the bf16 fixture of
# golden/conformance/qwen3_next with one config.json key changed): exit 2 naming the file and the
# key or the stage, never a crash or a trace of wrong numbers.
#   usage: qwen3_next_bad.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
src="$root/golden/conformance/qwen3_next/bf16"

. "$(dirname "$0")/edit_trace.sh"
bad() { edited_trace_bad "$1" "$src" config.json "$2" "$3"; } # name sed-expression expected-message-part
# value heads not a multiple of key heads: the derived group width has no value
bad "value heads 3 of 2 key heads" 's/"linear_num_value_heads": 4/"linear_num_value_heads": 3/' \
    "config.json: stage layers.0.linear_attn.qkvz_split needs 'linear_value_group_dim'"
bad "key heads missing" 's/"linear_num_key_heads": 2,//' "needs config.json key 'linear_num_key_heads'"
# a key head width that does not match in_proj_qkvz's rows
bad "key head dim 8" 's/"linear_key_head_dim": 16/"linear_key_head_dim": 8/' \
    "stage layers.0.linear_attn.qkvz_split: input width 192 is not 2 groups of 80"
# head_dim off: gated attention's q_proj no longer holds [q | gate] per head
bad "head_dim 8" 's/"head_dim": 16/"head_dim": 8/' "layers.1.self_attn.q_split"
echo "qwen3_next bad inputs: $pass passed, $fail failed"
[ $fail -eq 0 ]
