#!/usr/bin/env bash
# bisect's probes through the single-stage replay (issue 23): a probe judged by a row's chained
# cosine replays that row on the chained path and stops there; the result must be the one whole
# chained traces give (NVFP4DBG_BISECT_WHOLE_TRACES=1), figure for figure, on checkpoints other code
# wrote: llmcompressor's Qwen3-MoE with the seed bug planted at layer 1's o_proj, and Qwen3-Next
# (Gated DeltaNet) with an infinite input scale in one routed expert of layer 1.
#   usage: bisect_replay.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
be="${ND_TEST_BACKEND:-cpu}"
. "$(dirname "$0")/../lib.sh"
C="$root/golden/conformance"
tokens_of() { tr -d ' \n' < "$C/$1/manifest.json" | sed 's/.*"tokens":\[\([0-9,]*\)\].*/\1/'; }
case_() { # label fixture fault@module expected-stage (the ok expressions read the locals below)
    L=$1; FX=$2; WANT=$4
    "$bin" synth "$tmp/$L" --from "$C/$FX/nvfp4" --inject "$3" > /dev/null 2>"$tmp/$L.err"
    ok "$L: synth --from ($(head -c 200 "$tmp/$L.err"))" '[ -d "$tmp/$L" ]'
    "$bin" bisect "$tmp/$L" --backend "$be" --tokens "$(tokens_of "$FX")" --json > "$tmp/$L.rep.json" 2> "$tmp/$L.rep.err"
    rc=$?
    ok "$L: bisect finds a set (exit $rc: $(tail -c 300 "$tmp/$L.rep.err"))" '[ $rc -eq 1 ]'
    NVFP4DBG_BISECT_WHOLE_TRACES=1 "$bin" bisect "$tmp/$L" --backend "$be" --tokens "$(tokens_of "$FX")" --json > "$tmp/$L.whole.json" 2>/dev/null
    ok "$L: the replayed probes give what whole traces give ($(diff "$tmp/$L.rep.json" "$tmp/$L.whole.json" | head -6 | tr '\n' ' '))" \
        'cmp -s "$tmp/$L.rep.json" "$tmp/$L.whole.json"'
    ok "$L: judged by the chained cosine" 'grep -q "\"criterion\": \"cosine\"" "$tmp/$L.rep.json"'
    stages=$(tr -d '\n ' < "$tmp/$L.rep.json" | sed 's/.*"stages":\[\([^]]*\)\].*/\1/')
    ok "$L: bisect names the planted stage (got $stages)" '[ "$stages" = "\"$WANT\"" ]'
}
case_ qwen3_moe qwen3_moe input-scale-inverted@layers.1.self_attn.o_proj layers.1.self_attn.o_proj
case_ qwen3_next qwen3_next input-scale-inf@layers.1.mlp.experts.2.down_proj layers.1.mlp.experts.2.down_proj
echo "bisect replay: $pass passed, $fail failed"
[ $fail -eq 0 ]
