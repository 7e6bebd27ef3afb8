#!/usr/bin/env bash
# The printed next command repairs every fused shard the diagnosis proves broken (issue 36 item 1):
# q/k/v with all three input scales inverted, and gate/up with both, each traced with --tokens and
# --layers; the next command names an override per broken shard, repeats the run's --tokens and
# --layers, and pasted into sh -c (this build's nvfp4dbg) it clears the divergence: exit 0. A single
# broken shard gets a single override (its healthy partners are not touched). After the overrides
# the static findings they replace are not listed as breaking the run (one line counts them), and
# bisect names the broken fused partners of its set and counts its traces the same on stdout and
# in its closing progress line (issue 36 item 10).
#   usage: next_shards.sh NVFP4DBG
set -u
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
. "$(dirname "$0")/../lib.sh"
cd "$tmp" || exit 1
mkdir bin && ln -s "$bin" bin/nvfp4dbg
be="${ND_TEST_BACKEND:-cpu}"

# name, layer of the faults, the shards, the ones broken
check() {
    local name=$1 layer=$2 shards=$3
    local inj=()
    for s in $shards; do inj+=(--inject "input-scale-inverted@layers.$layer.$s"); done
    "$bin" synth "$name" --recipe llama --layers 2 "${inj[@]}" >/dev/null 2>err.txt
    ok "$name: synth ($(head -c 200 err.txt))" '[ -d "$name" ]'
    "$bin" trace "$name" --backend "$be" --tokens 3,1,4,1,5,9,2,6 --layers "$layer" --out "$name.h5" >"$name.txt" 2>&1
    local rc=$?
    ok "$name: the fault is found (exit $rc)" '[ $rc -eq 1 ]'
    local next
    next=$(sed -n 's/^  next: //p' "$name.txt")
    local n_ovr
    n_ovr=$(grep -o -- "--override" <<<"$next" | wc -l)
    ok "$name: one override per broken shard ($n_ovr for '$shards'; got: $next)" '[ "$n_ovr" -eq "$(wc -w <<<"$shards")" ]'
    for s in $shards; do
        ok "$name: the next command repairs $s" 'grep -qF -- "--override model.layers.$layer.$s.input_global_scale=" <<<"$next"'
    done
    ok "$name: it repeats --tokens and --layers" 'grep -qF -- "--layers $layer --tokens 3,1,4,1,5,9,2,6" <<<"$next"'
    ok "$name: it writes $name-repaired.h5 beside $name.h5" 'grep -q -- " --out $name-repaired.h5\$" <<<"$next"'
    PATH="$tmp/bin:$PATH" sh -c "$next --backend $be" >"$name-next.txt" 2>&1
    rc=$?
    ok "$name: pasted into sh -c, the run has no divergence (exit $rc: $(tail -n 3 "$name-next.txt" | head -c 300))" \
        '[ $rc -eq 0 ] && grep -q "no divergence" "$name-next.txt" && [ -s "$name-repaired.h5" ]'
    local n
    n=$(wc -w <<<"$shards")
    ok "$name: the overridden modules' findings are not listed as breaking the run" \
        '! grep -q "static findings that break" "$name-next.txt" && grep -q "^$n static findings\? on modules this run.s --override replaces" "$name-next.txt"'
    PATH="$tmp/bin:$PATH" sh -c "$next --backend $be" >"$name-again.txt" 2>&1
    rc=$?
    ok "$name: run again, the earlier $name-repaired.h5 is kept: exit $rc, --force named" \
        '[ $rc -eq 2 ] && grep -q "holds an earlier trace; not replacing it (--force replaces it" "$name-again.txt"'
}
check qkv 0 "self_attn.q_proj self_attn.k_proj self_attn.v_proj"
check gateup 1 "mlp.gate_proj mlp.up_proj"
check qonly 0 "self_attn.q_proj"
# bisect on q/k/v: the set is q_proj (the symptom is judged there); k_proj and v_proj named as its
# broken fused partners; the trace count agrees between stdout and the progress on stderr
NVFP4DBG_PROGRESS_INTERVAL=0 "$bin" bisect qkv --backend "$be" --tokens 3,1,4,1,5,9,2,6 >bis.out 2>bis.err
rc=$?
ok "bisect: exit $rc, set q_proj" '[ $rc -eq 1 ] && grep -qx "  layers.0.self_attn.q_proj" bis.out'
ok "bisect: the broken fused partners named" \
    'grep -q "^fused with a stage of the set, diverged on its own in the full run too.*: layers.0.self_attn.k_proj, layers.0.self_attn.v_proj$" bis.out'
n_out=$(sed -n 's/^\([0-9]*\) traces run$/\1/p' bis.out)
n_err=$(sed -n 's/.*bisect: done, \([0-9]*\) traces run.*/\1/p' bis.err)
ok "bisect: $n_out traces on stdout, $n_err in the closing progress line" '[ -n "$n_out" ] && [ "$n_out" = "$n_err" ]'
echo "next shards: $pass passed, $fail failed"
[ $fail -eq 0 ]
