#!/usr/bin/env bash
# repro_seed.sh NVFP4DBG ROOT — issue 8 on the shipped seed-bug checkpoint:
#  repro then replay shows the fault (scale_inverted) on the CPU backend (and CUDA when a GPU is
#  present), an override of the scale in the replay clears it; --stack vllm reproduces the empty
#  output at q_a_proj and the right scales (1/stored, from golden/seed-bug-v4.faults.json) make
#  the trace clean; bisect names q_a_proj/kv_proj; bad bundles exit 2.
set -u
N=$1
ROOT=$2
CK=$ROOT/golden/seed-bug-v4
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0; pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fail=$((fail + 1)); }
expect_rc() { local want=$1 got=$2 what=$3; if [ "$got" = "$want" ]; then ok; else bad "$what: exit $got, expected $want"; fi; }
# the "replay" object of `replay --json`, on one line
replay_row() { tr -d '\n' < "$1" | grep -o '"replay": {[^}]*}'; }

"$N" trace --force "$CK" --backend cpu --out "$T/seed.h5" > "$T/trace.txt" 2>&1
expect_rc 1 $? "trace seed-bug"
"$N" repro "$T/seed.h5" --out "$T/b.h5" > "$T/repro.txt" 2>&1
expect_rc 0 $? "repro"
grep -q "stage layers.0.self_attn.q_a_proj" "$T/repro.txt" && ok || bad "repro did not pick the first divergence: $(cat "$T/repro.txt")"

"$N" replay "$T/b.h5" --backend cpu --json > "$T/r.json" 2> "$T/r.err"
expect_rc 1 $? "replay cpu"
row=$(replay_row "$T/r.json")
echo "$row" | grep -q '"verdict": "scale_inverted"' && ok || bad "replay cpu row: $row $(cat "$T/r.err")"
echo "$row" | grep -q '"prod_amax": 0.0' && ok || bad "replay cpu: production output not empty: $row"
grep -q '"same_verdict": true' "$T/r.json" && ok || bad "replay cpu: verdict differs from the trace"
ls "${TMPDIR:-/tmp}" | grep -q "nvfp4dbg-replay-$" && bad "replay left its temporary folder" || ok

if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
    "$N" replay "$T/b.h5" --backend cuda --json > "$T/rc.json" 2> "$T/rc.err"
    expect_rc 1 $? "replay cuda"
    row=$(replay_row "$T/rc.json")
    echo "$row" | grep -q '"verdict": "scale_inverted"' && ok || bad "replay cuda row: $row $(cat "$T/rc.err")"
    grep -q '"backend": "cuda"' "$T/rc.json" && ok || bad "replay cuda did not run on cuda"
else
    echo "note: no GPU, the CUDA replay is skipped"
fi

# the right multiplier is 1/stored (the stored value is amax/2688, compressed-tensors means 2688/amax)
stored=$(grep -o '"stored": [0-9.eE+-]*' "$ROOT/golden/seed-bug-v4.faults.json" | head -1 | awk '{print $2}')
fix=$(awk -v s="$stored" 'BEGIN { printf "%.9g", 1 / s }')
QA=model.layers.0.self_attn.q_a_proj.input_global_scale
KV=model.layers.0.self_attn.kv_proj.input_global_scale
"$N" replay "$T/b.h5" --backend cpu --override "$QA=$fix" --json > "$T/rf.json" 2>&1
expect_rc 0 $? "replay with the right scale"
replay_row "$T/rf.json" | grep -q '"verdict": "ok"' && ok || bad "replay with the right scale: $(replay_row "$T/rf.json")"

# the vllm profile: the report's empty output, and the fix
"$N" trace --force "$CK" --backend cpu --stack vllm --json --out "$T/v.h5" > "$T/v.json" 2>&1
expect_rc 1 $? "trace --stack vllm"
row=$(tr -d '\n' < "$T/v.json" | grep -o '{[^{}]*"name": "layers.0.self_attn.q_a_proj",[^}]*"mode": "isolated"[^}]*}')
echo "$row" | grep -q '"prod_amax": 0.0' && ok || bad "vllm: q_a_proj production output not empty: $row"
grep -q '"first_divergence": "layers.0.self_attn.q_a_proj"' "$T/v.json" && ok || bad "vllm: first divergence"
"$N" trace --force "$CK" --backend cpu --stack vllm --override "$QA=$fix" --override "$KV=$fix" --out "$T/fixed.h5" > "$T/fixed.txt" 2>&1
expect_rc 0 $? "trace --stack vllm with the right scales"
grep -q "warning" "$T/fixed.txt" && bad "an override matched nothing: $(grep warning "$T/fixed.txt")" || ok
# the overrides travel with the trace into the bundle
"$N" repro "$T/v.h5" --out "$T/bv.h5" > /dev/null 2>&1
expect_rc 0 $? "repro vllm"
"$N" replay "$T/bv.h5" --backend cpu --json > "$T/rv.json" 2>&1
expect_rc 1 $? "replay vllm"
grep -q '"stack": "vllm"' "$T/rv.json" && ok || bad "replay vllm: stack not carried"
"$N" repro "$T/fixed.h5" --stage layers.0.self_attn.kv_proj --out "$T/bf.h5" > /dev/null 2>&1
expect_rc 0 $? "repro of the fixed trace"
"$N" replay "$T/bf.h5" --backend cpu --json > "$T/rbf.json" 2>&1
expect_rc 0 $? "replay of the fixed trace (its overrides are in the bundle)"

# bisect: the fused q_a/kv projection
"$N" bisect "$CK" --backend cpu --json > "$T/bis.json" 2> "$T/bis.err"
expect_rc 1 $? "bisect"
stages=$(tr -d '\n ' < "$T/bis.json" | grep -o '"stages":\[[^]]*\]' | sed 's/"stages":\[//; s/\]//; s/"//g' | tr ',' '\n')
[ -n "$stages" ] && ok || bad "bisect named no stage: $(cat "$T/bis.json" "$T/bis.err")"
for s in $stages; do
    case "$s" in layers.0.self_attn.q_a_proj|layers.0.self_attn.kv_proj) ok ;; *) bad "bisect named $s" ;; esac
done
"$N" bisect "$ROOT/golden/clean-v4" --backend cpu > "$T/bc.txt" 2>&1
expect_rc 0 $? "bisect on the clean checkpoint"

# bad bundles
head -c 3000 "$T/b.h5" > "$T/trunc.h5"
"$N" replay "$T/trunc.h5" > "$T/e1" 2>&1; expect_rc 2 $? "replay truncated"
grep -q "trunc.h5" "$T/e1" && ok || bad "message does not name the file: $(cat "$T/e1")"
"$N" replay "$T/seed.h5" > "$T/e2" 2>&1; expect_rc 2 $? "replay of a trace (foreign HDF5)"
"$N" replay "$T/none.h5" > /dev/null 2>&1; expect_rc 2 $? "replay missing file"
"$N" repro "$T/seed.h5" --stage no.such.stage --out "$T/x.h5" > /dev/null 2>&1; expect_rc 2 $? "repro unknown stage"
"$N" repro "$T/trunc.h5" --out "$T/x.h5" > /dev/null 2>&1; expect_rc 2 $? "repro of a non-trace"
# another checkpoint given with --checkpoint: its stage is not the trace's row (round 14 of issue 37)
"$N" repro "$T/seed.h5" --checkpoint "$ROOT/golden/clean-v4" --out "$T/other.h5" > "$T/e3" 2>&1; expect_rc 2 $? "repro with another checkpoint"
grep -q "does not give the trace's row layers.0.self_attn.q_a_proj" "$T/e3" && [ ! -e "$T/other.h5" ] && ok || bad "another checkpoint: $(cat "$T/e3")"

echo "repro_seed: $pass passed, $fail failed"
[ "$fail" = 0 ]
