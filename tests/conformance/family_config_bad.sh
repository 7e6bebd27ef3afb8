#!/usr/bin/env bash
# Second-wave family configs that lack or misstate what their recipe reads (the bf16 fixtures of
# golden/conformance/{smollm3,phi3} with config.json edited): exit 2 naming the file and the key or
# the stage, never a trace of wrong numbers (a SmolLM3 without no_rope_layers would otherwise
# rotate its NoPE layers).
#   usage: family_config_bad.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"

bad() { # family name sed-expression (whole file as one line) expected-message-part
  rm -rf "$tmp/ck" && cp -r "$root/golden/conformance/$1/bf16" "$tmp/ck"
  sed -z -i -E "$3" "$tmp/ck/config.json"
  ok "$1 $2: config.json edited" '! cmp -s "$tmp/ck/config.json" "$root/golden/conformance/$1/bf16/config.json"'
  "$bin" trace "$tmp/ck" --backend cpu --out "$tmp/t.h5" >"$tmp/out" 2>"$tmp/err"
  rc=$? want="$4"
  ok "$1 $2: exit 2 (got $rc: $(head -c 300 "$tmp/err"))" '[ $rc -eq 2 ]'
  ok "$1 $2: the message names '$want' ($(head -c 300 "$tmp/err"))" 'grep -qF -- "$want" "$tmp/err"'
}
nrl='"no_rope_layers": \[[^]]*\]'
bad smollm3 "no_rope_layers missing" "s/$nrl,//" \
    "config.json: stage layers.0.self_attn.q_rope runs only where 'no_rope_layers.0' is set"
bad smollm3 "no_rope_layers too short" "s/$nrl/\"no_rope_layers\": [1, 1]/" "'no_rope_layers.2' is set"
bad smollm3 "no_rope_layers of strings" "s/$nrl/\"no_rope_layers\": [\"yes\", \"yes\", \"yes\", \"yes\"]/" "'no_rope_layers.0' is set"
# q/k/v widths that do not add up to qkv_proj's rows
bad phi3 "4 key/value heads of 2" 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' "stage layers.0.self_attn.qkv_split: input width"
echo "family config bad inputs: $pass passed, $fail failed"
[ $fail -eq 0 ]
