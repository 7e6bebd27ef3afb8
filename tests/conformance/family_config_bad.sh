#!/usr/bin/env bash
# Second-wave family configs that lack or misstate what their recipe reads (the bf16 fixtures of
# golden/conformance/{smollm3,phi3} with config.json edited): exit 2 naming the file and the key or
# the stage, never a trace of wrong numbers (a SmolLM3 without no_rope_layers would otherwise
# rotate its NoPE layers).
#   usage: family_config_bad.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"

. "$(dirname "$0")/edit_trace.sh"
bad() { # family[/folder] name sed-expression expected-message-part (bf16/ when no folder is named)
  local src="$root/golden/conformance/$1"
  case "$1" in */*) ;; *) src="$src/bf16" ;; esac
  edited_trace_bad "$1 $2" "$src" config.json "$3" "$4"
}
nrl='"no_rope_layers": \[[^]]*\]'
bad smollm3 "no_rope_layers missing" "s/$nrl,//" \
    "config.json: stage layers.0.self_attn.q_rope runs only where 'no_rope_layers.0' is set"
bad smollm3 "no_rope_layers too short" "s/$nrl/\"no_rope_layers\": [1, 1]/" "'no_rope_layers.2' is set"
bad smollm3 "no_rope_layers of strings" "s/$nrl/\"no_rope_layers\": [\"yes\", \"yes\", \"yes\", \"yes\"]/" "'no_rope_layers.0' is set"
# q/k/v widths that do not add up to qkv_proj's rows
bad phi3 "4 key/value heads of 2" 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' "stage layers.0.self_attn.qkv_split: input width"
# Gemma 3 configs that set what the recipe does not model (Gemma 2's soft-capping, EmbeddingGemma's
# bidirectional attention), and a per-type rope the rope stage does not know
bad gemma3_text "attention soft-capping 50" 's/"attn_logit_softcapping": null/"attn_logit_softcapping": 50.0/' \
    "'attn_logit_softcapping' is set (not null, 0 or false), which recipe gemma3_text does not model"
bad gemma3_text "bidirectional attention" 's/"use_bidirectional_attention": false/"use_bidirectional_attention": true/' \
    "'use_bidirectional_attention' is set"
bad gemma3_text "global rope yarn" 's/"rope_type": "linear"/"rope_type": "yarn"/' \
    "rope_parameters.full_attention.rope_type 'yarn' is not supported by stage layers.1.self_attn.q_rope"
# the Hub originals' spelling, converted as transformers 5 does: a wrong type there is named
bad gemma3_text/bf16-old-config "rope_local_base_freq a string" 's/"rope_local_base_freq": [0-9.]+/"rope_local_base_freq": "1e4"/' \
    "key 'rope_local_base_freq' must be a number"
bad gemma3_text/bf16-old-config "sliding_window_pattern 0" 's/"sliding_window_pattern": 2/"sliding_window_pattern": 0/' \
    "key 'sliding_window_pattern' must be a positive integer"
# quantization_config fields no quantizer writes (issue 33: group_size 0 passed silently): exit 2 naming the key
bad qwen3/nvfp4 "weights group_size 0" 's/("weights": \{[^}]*"group_size": )16/\10/' \
    "config_groups.group_0.weights.group_size' is 0 (a positive number of values per scale"
bad qwen3/nvfp4 "activations group_size 0" 's/("input_activations": \{[^}]*"group_size": )16/\10/' \
    "config_groups.group_0.input_activations.group_size' is 0"
bad qwen3/nvfp4 "num_bits 99" 's/("weights": \{[^}]*"num_bits": )4/\199/' "weights.num_bits' is 99 (1 to 32)"
bad qwen3/nvfp4 "type banana" 's/("weights": \{([^{}]|\{\})*"type": )"float"/\1"banana"/' "weights.type' is \"banana\" (float or int)"
bad qwen3/nvfp4 "strategy vibes" 's/("weights": \{([^{}]|\{\})*"strategy": )"tensor_group"/\1"vibes"/' "weights.strategy' is \"vibes\""
echo "family config bad inputs: $pass passed, $fail failed"
[ $fail -eq 0 ]
