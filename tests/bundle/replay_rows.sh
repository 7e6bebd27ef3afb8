#!/usr/bin/env bash
# replay_rows.sh NVFP4DBG ROOT — every stage of a trace goes through repro and replay, and the replayed
# row is the trace's, figure for figure (issue 23: one single-stage replay serves repro, replay and
# the diagnosis). For each checkpoint: trace it, then for every row name of the isolated mode (linear
# projections, routers, routed experts and one expert's projection, attention with and without an
# indexer's key picks, norms, the head) `repro --stage NAME` and `replay --json`; the replay's
# ref_amax, prod_amax, cosine, SQNR, floor, multiplier, alpha, scale ratio, NaN count and verdict
# must print exactly as the original row's (JSON reals carry 17 digits). Checkpoints: the shipped
# DeepSeek-V4 seed bug (our synth) and transformers-made fixtures quantized by llmcompressor
# (Qwen3-MoE, Qwen3-Next with Gated DeltaNet) and gpt-oss's MXFP4 release layout.
# The traces and replays compared figure for figure run on the CPU (repro captures on the CPU);
# with ND_TEST_BACKEND=cuda the bundles of the first row of each op and of every row that is not ok
# are also replayed on CUDA, whose verdict must be the trace's (its GEMMs sum in another order: the
# figures agree, not to the last digit).
set -u
N=$1
ROOT=$2
BE=cpu
ALSO=${ND_TEST_BACKEND:-cpu}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0; pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fail=$((fail + 1)); }
# the figure lines of the "replay" object and of the original isolated row, one "key value" per line
figures() {
    awk -v which="$2" '
        /"replay": \{/ { inr = 1; next }
        /"original": \[/ { ino = 1; next }
        inr && /^ *\}/ { inr = 0 }
        ino && /^ *\{/ { blk = ""; next }
        ino && /^ *\}/ { if (which == "original" && blk ~ /"mode": "isolated"/ && !done) { printf "%s", blk; done = 1 }; next }
        { line = $0; sub(/,$/, "", line); gsub(/^ +/, "", line) }
        inr && which == "replay" && line ~ /^"(ref_amax|prod_amax|cosine|sqnr_db|floor_sqnr_db|scale_mult|alpha|scale_ratio|prod_nan|verdict|name)"/ { print line }
        ino && line ~ /^"(ref_amax|prod_amax|cosine|sqnr_db|floor_sqnr_db|scale_mult|alpha|scale_ratio|prod_nan|verdict|name|mode)"/ { blk = blk line "\n" }
    ' "$1" | grep -v '"mode"'
}
tokens_of() { tr -d ' \n' < "$1/manifest.json" | sed 's/.*"tokens":\[\([0-9,]*\)\].*/\1/'; }

sweep() { # label checkpoint [trace args...]
    local label=$1 ck=$2; shift 2
    "$N" trace --force "$ck" --backend "$BE" "$@" --json --quiet --out "$T/$label.h5" > "$T/$label.json" 2> "$T/$label.err"
    local rc=$?
    [ $rc -le 1 ] && ok || { bad "$label: trace exit $rc: $(head -c 400 "$T/$label.err")"; return; }
    # the isolated rows' names, in trace order, once each
    local names
    names=$(tr -d '\n ' < "$T/$label.json" | grep -o '"name":"[^"]*","op":"[^"]*","mode":"isolated"' | sed 's/"name":"\([^"]*\)","op":"\([^"]*\)".*/\1:\2/' | awk '!s[$0]++')
    local seen_ops=" "
    local n=0 same=0
    for entry in $names; do
        st=${entry%:*}; op=${entry##*:}
        n=$((n + 1))
        "$N" repro "$T/$label.h5" --checkpoint "$ck" --stage "$st" --out "$T/b.h5" > "$T/repro.txt" 2>&1
        local r1=$?
        "$N" replay "$T/b.h5" --backend "$BE" --json > "$T/p.json" 2> "$T/p.err"
        local r2=$?
        if [ $r1 -ne 0 ] || [ $r2 -gt 1 ]; then bad "$label $st: repro exit $r1, replay exit $r2: $(head -c 300 "$T/repro.txt") $(head -c 300 "$T/p.err")"; continue; fi
        figures "$T/p.json" replay > "$T/a.txt"
        figures "$T/p.json" original > "$T/o.txt"
        if [ -s "$T/a.txt" ] && cmp -s "$T/a.txt" "$T/o.txt"; then same=$((same + 1)); ok
        else bad "$label $st: the replayed row differs from the trace's: $(diff "$T/a.txt" "$T/o.txt" | head -8 | tr '\n' ' ')"; fi
        # on the other backend: the first row of each op and every row that is not ok (a CUDA
        # context per replay makes all 420 rows take minutes)
        if [ "$ALSO" != cpu ] && { [ "${seen_ops#* $op }" = "$seen_ops" ] || ! grep -q '"verdict": "ok"' "$T/a.txt"; }; then
            seen_ops="$seen_ops$op "
            "$N" replay "$T/b.h5" --backend "$ALSO" --json > "$T/pc.json" 2> "$T/pc.err"
            r2=$?
            if [ $r2 -le 1 ] && grep -q '"same_verdict": true' "$T/pc.json" && grep -q "\"backend\": \"$ALSO\"" "$T/pc.json"; then ok
            else bad "$label $st: replay on $ALSO (exit $r2): $(head -c 300 "$T/pc.err") $(figures "$T/pc.json" replay | tr '\n' ' ')"; fi
        fi
    done
    echo "$label: $same of $n rows replayed from their bundles with the trace's figures"
    [ "$n" -ge 10 ] && ok || bad "$label: only $n isolated rows in the trace"
}

sweep seed-v4 "$ROOT/golden/seed-bug-v4"
# the comparison can fail: a replay with the right input scale of the seed bug's q_a_proj prints other figures
"$N" repro "$T/seed-v4.h5" --checkpoint "$ROOT/golden/seed-bug-v4" --stage layers.0.self_attn.q_a_proj --out "$T/q.h5" > /dev/null 2>&1
stored=$(grep -o '"stored": [0-9.eE+-]*' "$ROOT/golden/seed-bug-v4.faults.json" | head -1 | awk '{print $2}')
"$N" replay "$T/q.h5" --backend "$BE" --json --override "model.layers.0.self_attn.q_a_proj.input_global_scale=$(awk -v s="$stored" 'BEGIN { printf "%.9g", 1 / s }')" > "$T/q.json" 2>&1
figures "$T/q.json" replay > "$T/a.txt"; figures "$T/q.json" original > "$T/o.txt"
grep -q '"verdict": "ok"' "$T/a.txt" && ! cmp -s "$T/a.txt" "$T/o.txt" && ok || bad "the repaired replay should differ from the trace's row: $(cat "$T/a.txt")"
C=$ROOT/golden/conformance
sweep qwen3_moe "$C/qwen3_moe/nvfp4" --tokens "$(tokens_of "$C/qwen3_moe")"
sweep qwen3_next "$C/qwen3_next/nvfp4" --tokens "$(tokens_of "$C/qwen3_next")"
sweep gpt_oss_mxfp4 "$C/gpt_oss_mxfp4/mxfp4" --tokens "$(tokens_of "$C/gpt_oss_mxfp4")"

echo "replay_rows: $pass passed, $fail failed"
[ $fail -eq 0 ]
