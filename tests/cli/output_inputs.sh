#!/usr/bin/env bash
# Outputs never replace what a run reads, and every way a run can end leaves the user's files whole
# (issue 37, second review):
#   - a recipe or stack profile named by a bare file name, by its name or by the model type is an
#     input: --out/--force never replace it (trace, repro), synth's fault list never replaces its
#     recipe, synth OUTDIR is never the recipe folder, synth --from's fault list never replaces a
#     file of the source (a weights file linked to it);
#   - a trace that does not end (SIGTERM, a file-size limit) or ends in an error (exit 2 or 3 after
#     the replay started) leaves the earlier trace at --out as it
#     was, its rows in OUT.incomplete, and the next run needs no --force; compare refuses to gate
#     the earlier trace while a newer OUT.incomplete says the last run did not end;
#   - synth --from never makes the new folder or its weights more open than the source's;
#   - output names up to NAME_MAX work (their temporaries are cut to fit);
#   - stdout that cannot be written (a full disk, closed) is exit 2, never a silent 0;
#   - --backend cuda without a CUDA device is exit 2 (the machine), not 3 (our fault);
#   - a tokens file that cannot be read says why (errno);
#   - the next command repeats --layers, --tokens and --recipe, and a folder name with an ESC is
#     printed as $'...\x1b...' (no raw escape on the terminal) and pastes into bash as that folder.
#   usage: output_inputs.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
. "$(dirname "$0")/../lib.sh"
ck="$root/golden/clean-v4"; seed="$root/golden/seed-bug-v4"
w="$tmp/w"; mkdir "$w"
run() { "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; }
sum() { sha256sum "$1" | cut -c1-64; }
err() { head -c 300 "$tmp/err"; }
# a copy of the recipe folder, so that a failure here never touches the source tree's
cp -r "$root/recipes" "$w/recipes"
export NVFP4DBG_RECIPES="$w/recipes"

# --- recipes and stack profiles are inputs ---------------------------------------------------
cp "$w/recipes/deepseek_v4.yaml" "$w/rec.yaml"
r0=$(sum "$w/rec.yaml")
(cd "$w" && "$bin" trace "$ck" --backend cpu --recipe rec.yaml --out rec.yaml --force >"$tmp/out" 2>"$tmp/err"); rc=$?
ok "trace --recipe rec.yaml --out rec.yaml --force: exit $rc, recipe kept ($(err))" '[ $rc -eq 2 ] && [ "$(sum "$w/rec.yaml")" = "$r0" ] && grep -q "is also an input of this run" "$tmp/err"'
s0=$(sum "$w/recipes/stack-exact.yaml")
run "$bin" trace "$ck" --backend cpu --out "$w/recipes/stack-exact.yaml" --force
ok "trace --out onto the default stack profile --force: exit $rc, kept ($(err))" '[ $rc -eq 2 ] && [ "$(sum "$w/recipes/stack-exact.yaml")" = "$s0" ] && grep -qE "is also an input of this run|inside the input folder" "$tmp/err"'
d0=$(sum "$w/recipes/deepseek_v4.yaml")
run "$bin" trace "$ck" --backend cpu --out "$w/recipes/deepseek_v4.yaml" --force
ok "trace --out onto the recipe chosen by model type --force: exit $rc, kept" '[ $rc -eq 2 ] && [ "$(sum "$w/recipes/deepseek_v4.yaml")" = "$d0" ]'
cp "$w/recipes/stack-vllm.yaml" "$w/mystack.yaml"
m0=$(sum "$w/mystack.yaml")
(cd "$w" && "$bin" trace "$ck" --backend cpu --stack ./mystack.yaml --out mystack.yaml --force >"$tmp/out" 2>"$tmp/err"); rc=$?
ok "trace --stack ./mystack.yaml --out mystack.yaml --force: exit $rc, kept" '[ $rc -eq 2 ] && [ "$(sum "$w/mystack.yaml")" = "$m0" ]'
run "$bin" trace "$seed" --backend cpu --out "$w/seed.h5"
run "$bin" repro "$w/seed.h5" --out "$w/recipes/deepseek_v4.yaml" --force
ok "repro --out onto the trace's recipe --force: exit $rc, kept ($(err))" '[ $rc -eq 2 ] && [ "$(sum "$w/recipes/deepseek_v4.yaml")" = "$d0" ]'
# synth: the fault list beside OUTDIR is never the recipe; OUTDIR is never the recipe folder
cp "$w/recipes/llama.yaml" "$w/s.faults.json"
f0=$(sum "$w/s.faults.json")
(cd "$w" && "$bin" synth s --recipe ./s.faults.json --layers 2 --force >"$tmp/out" 2>"$tmp/err"); rc=$?
ok "synth s --recipe ./s.faults.json --force: exit $rc, recipe kept ($(err))" '[ $rc -eq 2 ] && [ "$(sum "$w/s.faults.json")" = "$f0" ] && [ ! -e "$w/s" ]'
run "$bin" synth "$w/recipes" --recipe llama --layers 2 --force
ok "synth into the recipe folder --force: exit $rc, recipes kept ($(err))" '[ $rc -eq 2 ] && [ -f "$w/recipes/llama.yaml" ] && [ "$(sum "$w/recipes/deepseek_v4.yaml")" = "$d0" ]'
# synth --from: a weights file of the source linked to OUTDIR.faults.json
run "$bin" synth "$w/base" --recipe llama --layers 2
mkdir "$w/src"; cp "$w/base"/*.json "$w/src/"
mv "$w/base/model.safetensors" "$w/o.faults.json"; ln -s "$w/o.faults.json" "$w/src/model.safetensors"
o0=$(sum "$w/o.faults.json")
run "$bin" synth "$w/o" --from "$w/src" --inject nibble-swap@layers.0.self_attn.q_proj --force
ok "synth --from: the fault list would replace the source's weights (a link to it): exit $rc, kept ($(err))" '[ $rc -eq 2 ] && [ "$(sum "$w/o.faults.json")" = "$o0" ]'

# --- a trace that does not end leaves the earlier one ----------------------------------------
run "$bin" trace "$ck" --backend cpu --out "$w/t.h5"
t0=$(sum "$w/t.h5")
# 40 KB: past the file's creation (its fixed-size summary attributes) and within its rows
(ulimit -f 80; "$bin" trace "$ck" --backend cpu --out "$w/t.h5" --force >"$tmp/out" 2>"$tmp/err"); rc=$?
# what the message says of t.h5.incomplete is true: rows kept that show reads, or a file the cut
# write left unreadable (round 18: "keeps 129 rows" of a file no reader opened)
ok "trace past a file-size limit: exit $rc, the earlier trace kept, t.h5.incomplete described truly ($(err))" '[ $rc -eq 2 ] && [ "$(sum "$w/t.h5")" = "$t0" ] && [ -f "$w/t.h5.incomplete" ] && { { grep -q "rows written before the failure: .*t.h5.incomplete" "$tmp/err" && "$bin" show "$w/t.h5.incomplete" >/dev/null 2>&1; } || grep -q "the failed write may have cut the trace file .*t.h5.incomplete so that it does not open" "$tmp/err"; }'
cp "$w/t.h5" "$w/golden.h5"
run "$bin" compare "$w/t.h5" "$w/golden.h5"
ok "compare of the earlier trace while a newer OUT.incomplete says the last run did not end: exit $rc ($(err))" '[ $rc -eq 2 ] && grep -q "t.h5.incomplete is newer: the last trace run to this path did not finish" "$tmp/err"'
"$bin" trace "$ck" --backend cpu --out "$w/t.h5" --force >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 200); do [ -e "$w/t.h5.incomplete" ] && break; sleep 0.01; done
kill -TERM $pid 2>/dev/null; wait $pid; rc=$?
ok "trace killed by SIGTERM (exit $rc): the earlier trace kept" '[ "$(sum "$w/t.h5")" = "$t0" ]'
run "$bin" trace "$ck" --backend cpu --out "$w/t.h5" --force
ok "the next trace replaces the stale .incomplete without --force: exit $rc ($(err))" '[ $rc -eq 0 ] && [ ! -e "$w/t.h5.incomplete" ]'
run "$bin" compare "$w/t.h5" "$w/golden.h5"
ok "then the gate runs on it: exit $rc ($(err))" '[ $rc -eq 0 ]'
# a run that fails after its replay started (exit 3 at a stage; exit 2: a --prod-dump naming no
# stage) keeps the earlier trace too; its rows and status "error" are in the .incomplete
t1=$(sum "$w/t.h5")
NVFP4DBG_TEST_FAULT_STAGE=layers.1.self_attn.q_b_proj run "$bin" trace "$ck" --backend cpu --out "$w/t.h5" --force
ok "a run failing at layer 1 (exit $rc): the earlier trace kept, its rows in t.h5.incomplete ($(err))" '[ $rc -eq 3 ] && [ "$(sum "$w/t.h5")" = "$t1" ] && [ -f "$w/t.h5.incomplete" ] && grep -q "rows written before the failure: .*t.h5.incomplete" "$tmp/err"'
run "$bin" show "$w/t.h5.incomplete"
ok "the failed run's trace says status error: exit $rc" 'grep -q "error" "$tmp/out"'
run "$bin" compare "$w/t.h5" "$w/golden.h5"
ok "the gate refuses the earlier trace while the failed run's is newer: exit $rc" '[ $rc -eq 2 ] && grep -q "is newer" "$tmp/err"'
cp "$root/golden/conformance/llama/dequant.safetensors" "$w/nomatch.safetensors"
run "$bin" trace "$ck" --backend cpu --out "$w/t.h5" --force --prod-dump "$w/nomatch.safetensors"
ok "a --prod-dump naming no stage (exit $rc): the earlier trace kept" '[ $rc -eq 2 ] && [ "$(sum "$w/t.h5")" = "$t1" ]'
NVFP4DBG_TEST_FAULT_STAGE=layers.1.self_attn.q_b_proj run "$bin" trace "$ck" --backend cpu --out "$w/fresh.h5"
ok "with nothing at OUT, the failed run's trace takes the name (exit $rc)" '[ $rc -eq 3 ] && [ -f "$w/fresh.h5" ] && [ ! -e "$w/fresh.h5.incomplete" ]'
run "$bin" trace "$ck" --backend cpu --out "$w/t.h5" --force
ok "the next good run replaces both: exit $rc" '[ $rc -eq 0 ] && [ ! -e "$w/t.h5.incomplete" ]'
# a run that fails before its replay (a bad config, a missing folder, an unknown recipe, a bad
# option after --out) leaves the earlier trace and an OUT.incomplete saying so: compare refuses
# the earlier trace as this run's (it passed it before: a CI job ignoring trace's exit code)
mkdir "$w/badcfg"; cp "$ck/model.safetensors" "$w/badcfg/"
sed 's/"vocab_size": *[0-9]*/"vocab_size": 0/' "$ck/config.json" >"$w/badcfg/config.json"
t2=$(sum "$w/t.h5")
for args in "$w/badcfg" "$w/nosuchfolder" "$ck --recipe nosuchrecipe" "$ck --stack nosuchstack" "$ck --layers 7" \
            "$ck --nosuchoption" "$ck --stacks nosuchstack" "$ck --reference-checkpoint $ck/original --override lm_head.nibble_swap=1"; do
  rm -f "$w/t.h5.incomplete"
  read -r -a av <<<"$args"
  run "$bin" trace "${av[@]}" --backend cpu --out "$w/t.h5" --force
  e1=$(head -c 150 "$tmp/err" | tr '\n' ' ')
  run "$bin" compare "$w/t.h5" "$w/golden.h5"
  ok "trace ${args##*/} failing before its replay: the earlier trace kept, then compare exit $rc ($e1)" '[ "$(sum "$w/t.h5")" = "$t2" ] && [ -f "$w/t.h5.incomplete" ] && [ $rc -eq 2 ] && grep -q "is newer" "$tmp/err"'
done
run "$bin" trace "$ck" --backend cpu --out "$w/t.h5" --force
ok "a good run then clears it: exit $rc" '[ $rc -eq 0 ] && [ ! -e "$w/t.h5.incomplete" ]'
run "$bin" trace "$ck" --backend cpu --out "$w/never.h5" --recipe nosuchrecipe
ok "with no earlier trace, a failed run writes nothing (exit $rc)" '[ $rc -eq 2 ] && [ ! -e "$w/never.h5" ] && [ ! -e "$w/never.h5.incomplete" ]'
echo "mine" >"$w/u.h5.incomplete"
run "$bin" trace "$ck" --backend cpu --out "$w/u.h5"
ok "a file of the user's at OUT.incomplete is not replaced: exit $rc" '[ $rc -eq 2 ] && [ "$(cat "$w/u.h5.incomplete")" = mine ] && [ ! -e "$w/u.h5" ]'

# --- synth --from never widens the folder's or the weights' mode -----------------------------
run "$bin" synth "$w/b2" --recipe llama --layers 2
mkdir "$w/priv"; cp "$w/b2"/* "$w/priv/" 2>/dev/null; chmod 700 "$w/priv"; chmod 600 "$w/priv/model.safetensors"
(umask 022; "$bin" synth "$w/p2" --from "$w/priv" --inject nibble-swap@layers.0.self_attn.q_proj >"$tmp/out" 2>"$tmp/err"); rc=$?
ok "synth --from a 0700 folder with 0600 weights (umask 022): exit $rc, folder $(stat -c %a "$w/p2" 2>/dev/null), weights $(stat -c %a "$w/p2/model.safetensors" 2>/dev/null)" '[ $rc -eq 0 ] && [ "$(stat -c %a "$w/p2")" = 700 ] && [ "$(stat -c %a "$w/p2/model.safetensors")" = 600 ]'

# --- names up to NAME_MAX --------------------------------------------------------------------
long=$(printf 'n%.0s' $(seq 1 250))
run "$bin" trace "$ck" --backend cpu --out "$w/$long.h5"
ok "trace --out with a 253-byte name: exit $rc ($(err))" '[ $rc -eq 0 ] && [ -f "$w/$long.h5" ]'
run "$bin" report "$w/t.h5" --html "$w/$long.html"
ok "report --html with a 255-byte name: exit $rc ($(err))" '[ $rc -eq 0 ] && [ -f "$w/$long.html" ]'
mid=$(printf 'm%.0s' $(seq 1 240))
run "$bin" synth "$w/$mid" --recipe llama --layers 2
ok "synth into a 240-byte folder name (its fault list 252): exit $rc ($(err))" '[ $rc -eq 0 ] && [ -f "$w/$mid/model.safetensors" ] && [ -f "$w/$mid.faults.json" ]'
run "$bin" synth "$w/$long" --recipe llama --layers 2
ok "synth into a 250-byte folder name, whose fault list cannot be named: exit $rc, said ($(err))" '[ $rc -eq 2 ] && grep -q "File name too long" "$tmp/err" && [ ! -e "$w/$long" ]'

# --- what cannot be printed, the machine, unreadable inputs ----------------------------------
"$bin" inspect "$ck" >/dev/full 2>"$tmp/err"; rc=$?
ok "inspect >/dev/full: exit $rc ($(err))" '[ $rc -eq 2 ] && grep -q "cannot write standard output" "$tmp/err"'
"$bin" explain scale_inverted >&- 2>"$tmp/err"; rc=$?
ok "explain with stdout closed: exit $rc ($(err))" '[ $rc -eq 2 ] && grep -q "standard output is closed" "$tmp/err"'
if ! nvidia-smi -L >/dev/null 2>&1; then
    run "$bin" trace "$ck" --backend cuda --out "$w/c.h5"
    ok "--backend cuda without a CUDA device: exit $rc ($(err))" '[ $rc -eq 2 ] && grep -q "cuda: " "$tmp/err"'
fi
run "$bin" trace "$ck" --backend cpu --tokens-file "$w/none.txt" --out "$w/n.h5"
ok "a missing tokens file says why: exit $rc ($(err))" '[ $rc -eq 2 ] && grep -q "none.txt: cannot open tokens file: No such file or directory" "$tmp/err"'

# --- the next command repeats what the run computed on; control bytes as $'...' ---------------
run "$bin" trace "$seed" --backend cpu --layers 0-1 --tokens 5,6,7,8 --recipe deepseek_v4 --out "$w/s2.h5"
next=$(sed -n 's/^  next: //p' "$tmp/out")
ok "the next command keeps --recipe, --layers and --tokens (got: $next)" '[ $rc -eq 1 ] && [[ "$next" == *" --recipe deepseek_v4 "* ]] && [[ "$next" == *" --layers 0-1 "* ]] && [[ "$next" == *" --tokens 5,6,7,8 "* ]]'
esc=$'esc\033[31mdir'
cp -r "$seed" "$w/$esc"
(cd "$w" && "$bin" trace "$esc" --backend cpu --out e.h5 >"$tmp/out" 2>"$tmp/err"); rc=$?
next=$(sed -n 's/^  next: //p' "$tmp/out")
ok "a folder name with an ESC: no raw ESC printed, written \\x1b in \$'...' (got: $next)" '[ $rc -eq 1 ] && ! grep -q $'"'"'\033'"'"' "$tmp/out" && [[ "$next" == "nvfp4dbg trace \$'"'"'esc\\x1b[31mdir'"'"' "* ]]'
mkdir -p "$w/bin" && ln -sf "$bin" "$w/bin/nvfp4dbg"
(cd "$w" && PATH="$w/bin:$PATH" bash -c "$next --backend cpu --out e2.h5 --json" >"$tmp/out" 2>"$tmp/err"); rc=$?
ok "pasted into bash it runs on that folder and repairs the stage: exit $rc ($(err))" '[ $rc -eq 0 ] || [ $rc -eq 1 ] && [ "$(row_verdict layers.0.self_attn.q_a_proj "$tmp/out")" = ok ]'

# --- the third review: a weights file linked out of the source, escapes in bisect, a link to a stale trace ---
cp -r "$seed" "$w/ls"; mv "$w/ls/model.safetensors" "$w/outside.st"; ln -s ../outside.st "$w/ls/model.safetensors"
run "$bin" synth "$w/lsx" --from "$w/ls" --inject nibble-swap@layers.0.self_attn.q_a_proj
ok "synth --from with the weights linked out of the source: exit $rc, nothing written ($(err))" '[ $rc -eq 2 ] && [ ! -e "$w/lsx" ] && grep -q "model.safetensors: a symbolic link out of the checkpoint folder" "$tmp/err"'
mkdir "$w/sec"; cp "$ck/config.json" "$w/sec/"; printf 'root:*:20000:0:99999:7:::\n' >"$w/secret"; ln -s "$w/secret" "$w/sec/model.safetensors"
run "$bin" inspect "$w/sec"
ok "a weights link to a text file: exit $rc, its first bytes not shown as a number ($(err))" '[ $rc -eq 2 ] && ! grep -q "3619251681095544690\|[0-9]\{12,\}" "$tmp/err"'
(cd "$w" && "$bin" bisect "$esc" --backend cpu >"$tmp/out" 2>"$tmp/err"); rc=$?
shown='esc\x1b[31mdir'
ok "bisect on a folder named with an ESC: exit $rc, no raw ESC printed" '! grep -q $'"'"'\033'"'"' "$tmp/out" && grep -qF "$shown" "$tmp/out"'
run "$bin" trace "$ck" --backend cpu --out "$w/st.h5"
cp "$w/st.h5" "$w/st.h5.incomplete"; touch -d '+1 min' "$w/st.h5.incomplete"; ln -s st.h5 "$w/latest.h5"
run "$bin" compare "$w/latest.h5" "$w/golden.h5"
ok "compare through a link to a trace whose .incomplete is newer: exit $rc ($(err))" '[ $rc -eq 2 ] && grep -q "is newer" "$tmp/err"'

run "$bin" synth "$w/dot/." --recipe llama --layers 2
ok "synth OUTDIR/. is refused before anything is made: exit $rc ($(err))" '[ $rc -eq 2 ] && [ ! -e "$w/dot" ]'

ok "no temporaries left" '[ -z "$(find "$w" -name ".*.tmp" -o -name ".*.synth-*" 2>/dev/null)" ]'
echo "output inputs: $pass passed, $fail failed"
[ $fail -eq 0 ]
