#!/usr/bin/env bash
# One output discipline for every writer (issue 37 items 1, 2, 6): writer x kind of existing path.
#   writers: trace --out, report --html, repro --out, synth OUTDIR (and its OUTDIR.faults.json),
#            synth --from
#   kinds:   new path; an earlier output of the same kind (replaced); another file (refused, kept;
#            --force replaces it); a link to a file, a dangling link (never replaced or followed);
#            a folder, a FIFO, /dev/null through a link (refused, no hang); an input of the run
#            itself, a hard link to it, a path inside the input checkpoint (refused even with
#            --force); a missing folder; a file-size limit reached mid-write (exit 2, named, no
#            temporary left); SIGTERM mid-write (no temporary left).
#   synth --from never follows a link out of the source (a private file is not copied), accepts a
#   Hugging Face cache snapshot (links into ../../blobs), and never widens a file's mode.
#   usage: output_discipline.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
ck="$root/golden/clean-v4"
w="$tmp/w"; mkdir "$w"
# no temporaries of ours anywhere under $w: hidden ".NAME.XXXXXX.tmp" files, synth staging folders
no_temps() { [ -z "$(find "$w" -name '.*.tmp' -o -name '.*.synth-*' 2>/dev/null)" ]; }
run() { "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; }
sum() { sha256sum "$1" | cut -c1-64; }

# --- trace --out ---------------------------------------------------------------------------
run timeout 60 "$bin" trace "$ck" --backend cpu --out "$w/t.h5"
ok "trace to a new path: exit $rc" '[ $rc -eq 0 ] && [ -f "$w/t.h5" ]'
before=$(sum "$w/t.h5")
run timeout 60 "$bin" trace "$ck" --backend cpu --out "$w/t.h5"
ok "trace over an earlier trace: exit $rc, kept, --force named: $(head -c 200 "$tmp/err")" \
    '[ $rc -eq 2 ] && [ "$(sum "$w/t.h5")" = "$before" ] && grep -q "t.h5: holds an earlier trace; not replacing it (--force replaces it, or give another --out)" "$tmp/err"'
run timeout 60 "$bin" trace "$ck" --backend cpu --out "$w/t.h5" --force
ok "trace over an earlier trace with --force: exit $rc (replaced)" '[ $rc -eq 0 ] && [ -f "$w/t.h5" ] && [ ! -e "$w/t.h5.incomplete" ]'
echo "my notes" >"$w/notes.txt"
run timeout 60 "$bin" trace "$ck" --backend cpu --out "$w/notes.txt"
ok "trace over another file: exit $rc, kept: $(head -c 200 "$tmp/err")" '[ $rc -eq 2 ] && [ "$(cat "$w/notes.txt")" = "my notes" ] && grep -q "notes.txt: exists and is not an nvfp4dbg trace; not replacing it (--force replaces it)" "$tmp/err"'
run timeout 60 "$bin" trace "$ck" --backend cpu --out "$w/notes.txt" --force
ok "trace --force over another file: exit $rc" '[ $rc -eq 0 ] && [ "$(head -c 4 "$w/notes.txt" | od -An -c | tr -d " ")" = "211HDF" ]'
echo "target" >"$w/target.txt"; ln -s "$w/target.txt" "$w/link.h5"
run timeout 60 "$bin" trace "$ck" --backend cpu --out "$w/link.h5" --force
ok "trace over a link (even with --force): exit $rc, link and target kept" '[ $rc -eq 2 ] && [ -L "$w/link.h5" ] && [ "$(cat "$w/target.txt")" = target ] && grep -q "link.h5: is a symbolic link" "$tmp/err"'
ln -s "$w/nowhere" "$w/dangling.h5"
run timeout 60 "$bin" trace "$ck" --backend cpu --out "$w/dangling.h5"
ok "trace over a dangling link: exit $rc, nothing created at its target" '[ $rc -eq 2 ] && [ -L "$w/dangling.h5" ] && [ ! -e "$w/nowhere" ]'
ln -s /dev/null "$w/null.h5"
run timeout 60 "$bin" trace "$ck" --backend cpu --out "$w/null.h5" --force
ok "trace over a link to /dev/null: exit $rc, /dev/null still a device" '[ $rc -eq 2 ] && [ -c /dev/null ] && [ -L "$w/null.h5" ]'
mkdir "$w/adir"
run timeout 60 "$bin" trace "$ck" --backend cpu --out "$w/adir"
ok "trace over a folder: exit $rc" '[ $rc -eq 2 ] && grep -q "adir: is a folder" "$tmp/err"'
mkfifo "$w/fifo.h5"
run timeout 20 "$bin" trace "$ck" --backend cpu --out "$w/fifo.h5"
ok "trace over a FIFO: exit $rc, no hang" '[ $rc -eq 2 ] && [ -p "$w/fifo.h5" ]'
# the run's own inputs
mkdir "$w/ck"; cp "$ck"/*.json "$ck"/*.safetensors "$w/ck/"
before=$(sum "$w/ck/model.safetensors")
run timeout 60 "$bin" trace "$w/ck" --backend cpu --out "$w/ck/model.safetensors" --force
ok "trace over the checkpoint's own weights (--force): exit $rc, weights kept" '[ $rc -eq 2 ] && [ "$(sum "$w/ck/model.safetensors")" = "$before" ] && grep -q "is also an input of this run" "$tmp/err"'
run timeout 60 "$bin" trace "$w/ck" --backend cpu --out "$w/ck/new.h5" --force
ok "trace into the input checkpoint folder: exit $rc, nothing written there" '[ $rc -eq 2 ] && [ ! -e "$w/ck/new.h5" ] && grep -q "is inside the input folder" "$tmp/err"'
ln "$w/ck/config.json" "$w/hardlink.json"
run timeout 60 "$bin" trace "$w/ck" --backend cpu --out "$w/hardlink.json" --force
ok "trace over a hard link to an input: exit $rc" '[ $rc -eq 2 ] && grep -q "is also an input of this run" "$tmp/err"'
echo "1 2 3" >"$w/toks.txt"
run timeout 60 "$bin" trace "$ck" --backend cpu --tokens-file "$w/toks.txt" --out "$w/toks.txt" --force
ok "trace over its --tokens-file: exit $rc, kept" '[ $rc -eq 2 ] && [ "$(cat "$w/toks.txt")" = "1 2 3" ]'
run timeout 60 "$bin" trace "$ck" --backend cpu --out "$w/no/such/t.h5"
ok "trace into a missing folder: exit $rc, named" '[ $rc -eq 2 ] && grep -q "no/such/t.h5: the folder to write the trace in does not exist" "$tmp/err"'
ok "trace: no temporaries left" 'no_temps'

# --- report --html ---------------------------------------------------------------------------
run "$bin" report "$w/t.h5" --html "$w/r.html"
ok "report to a new path: exit $rc" '[ $rc -eq 0 ] && [ -s "$w/r.html" ]'
run "$bin" report "$w/t.h5" --html "$w/r.html"
ok "report over an earlier report: exit $rc" '[ $rc -eq 0 ]'
before=$(sum "$w/t.h5")
run "$bin" report "$w/t.h5" --html "$w/t.h5" --force
ok "report over its own trace (--force): exit $rc, trace kept" '[ $rc -eq 2 ] && [ "$(sum "$w/t.h5")" = "$before" ] && grep -q "is also an input of this run" "$tmp/err"'
echo "my page" >"$w/page.html"
run "$bin" report "$w/t.h5" --html "$w/page.html"
ok "report over another file: exit $rc, kept" '[ $rc -eq 2 ] && [ "$(cat "$w/page.html")" = "my page" ]'
# a report the user annotated (its header kept, its body edited) is the user's now (round 14)
sed 's/<title>/<title>my notes: /' "$w/r.html" >"$w/annotated.html"
cp "$w/annotated.html" "$w/annotated-before.html"
run "$bin" report "$w/t.h5" --html "$w/annotated.html"
ok "report over an annotated report: exit $rc, kept" '[ $rc -eq 2 ] && cmp -s "$w/annotated.html" "$w/annotated-before.html"'
run "$bin" report "$w/t.h5" --html "$w/annotated.html" --force
ok "report over an annotated report with --force: exit $rc" '[ $rc -eq 0 ] && ! grep -q "my notes" "$w/annotated.html"'
run "$bin" report "$w/t.h5" --html "$w/link.h5" --force
ok "report over a link: exit $rc, target kept" '[ $rc -eq 2 ] && [ "$(cat "$w/target.txt")" = target ]'
# a file-size limit reached mid-write: exit 2 naming the output, the earlier report kept, no temporary
cp "$w/r.html" "$w/r-before.html"
(ulimit -f 8; "$bin" report "$w/t.h5" --html "$w/r.html" >"$tmp/out" 2>"$tmp/err"); rc=$?
ok "report past the file-size limit: exit $rc, named: $(head -c 300 "$tmp/err")" '[ $rc -eq 2 ] && grep -q "r.html: cannot write the page: File too large (over the file-size limit)" "$tmp/err" && cmp -s "$w/r.html" "$w/r-before.html"'
ok "report: no temporaries left" 'no_temps'

# --- repro --out -----------------------------------------------------------------------------
run "$bin" trace "$root/golden/seed-bug-v4" --backend cpu --out "$w/bug.h5"
run "$bin" repro "$w/bug.h5" --out "$w/b.h5"
ok "repro to a new path: exit $rc" '[ $rc -eq 0 ] && [ -f "$w/b.h5" ]'
run "$bin" repro "$w/bug.h5" --out "$w/b.h5"
ok "repro over an earlier bundle: exit $rc" '[ $rc -eq 0 ]'
before=$(sum "$w/bug.h5")
run "$bin" repro "$w/bug.h5" --out "$w/bug.h5" --force
ok "repro over its own trace (--force): exit $rc, kept" '[ $rc -eq 2 ] && [ "$(sum "$w/bug.h5")" = "$before" ]'
run "$bin" repro "$w/bug.h5" --out "$w/t.h5"
ok "repro over a trace (not a bundle) without --force: exit $rc" '[ $rc -eq 2 ] && grep -q "not an nvfp4dbg bundle" "$tmp/err"'
run "$bin" repro "$w/bug.h5" --out "$w/null.h5" --force
ok "repro over a link to /dev/null: exit $rc" '[ $rc -eq 2 ] && [ -c /dev/null ]'
ok "repro: no temporaries left" 'no_temps'
# an HDF5 file at OUT.incomplete that is not a trace (a bundle here) is not an earlier run's
# leftover: refused, kept (round 14)
cp "$w/b.h5" "$w/bt.h5.incomplete"; cp "$w/b.h5" "$w/bt-before.h5"
run "$bin" trace "$ck" --backend cpu --tokens 1,2 --out "$w/bt.h5" -q
ok "trace beside an HDF5 OUT.incomplete that is no trace: exit $rc, kept" '[ $rc -eq 2 ] && cmp -s "$w/bt.h5.incomplete" "$w/bt-before.h5" && grep -q "is not a trace that an earlier run left unfinished" "$tmp/err"'

# an OUT.incomplete a live run is writing (it holds a lock on it) is not stale: a second run to OUT
# refuses rather than take it over (round 17: the first run's rows were lost, both renamed onto OUT)
# (an unfinished trace: the marker a failed run leaves; a finished trace there is a user's file)
cp "$w/t.h5" "$w/live.h5"; "$bin" trace "$ck" --backend cpu --layers 9 --out "$w/live.h5" --force >/dev/null 2>&1; rm -f "$w/live.h5"
cp "$w/live.h5.incomplete" "$w/live-before.h5"
( exec 9<"$w/live.h5.incomplete"; flock -x 9; exec sleep 30 ) & holder=$!   # the holder is the sleep itself
for _ in $(seq 50); do flock -xn "$w/live.h5.incomplete" true 2>/dev/null || break; sleep 0.1; done
run "$bin" trace "$ck" --backend cpu --tokens 1,2 --out "$w/live.h5" -q
ok "trace beside an OUT.incomplete a live run holds: exit $rc, kept ($(head -c 160 "$tmp/err"))" '[ $rc -eq 2 ] && cmp -s "$w/live.h5.incomplete" "$w/live-before.h5" && [ ! -e "$w/live.h5" ] && grep -q "live.h5.incomplete: a trace run to .*live.h5 is writing it right now" "$tmp/err"'
kill $holder 2>/dev/null; wait $holder 2>/dev/null
run "$bin" trace "$ck" --backend cpu --tokens 1,2 --out "$w/live.h5" -q
ok "once that run is gone the .incomplete is stale and replaced: exit $rc" '[ $rc -eq 0 ] && [ -f "$w/live.h5" ] && [ ! -e "$w/live.h5.incomplete" ]'

# a finished trace at OUT.incomplete (written there with --out) is a user's file: the next run to OUT
# refuses to take it over (round 25: it was the run's temporary, and the trace was gone)
rm -f "$w/fin.h5" "$w/fin.h5.incomplete"
"$bin" trace "$ck" --backend cpu --out "$w/fin.h5.incomplete" >/dev/null 2>&1; cp "$w/fin.h5.incomplete" "$w/fin.keep"
run "$bin" trace "$ck" --backend cpu --out "$w/fin.h5"
ok "trace to OUT beside a finished trace at OUT.incomplete: exit $rc, that trace kept" \
   '[ $rc -eq 2 ] && cmp -s "$w/fin.h5.incomplete" "$w/fin.keep" && [ ! -e "$w/fin.h5" ]'
# repro of the marker such a failed run leaves says the run failed, not "no divergence" (round 24)
rm -f "$w/er.h5.incomplete"; cp "$w/t.h5" "$w/er.h5"
"$bin" trace "$ck" --backend cpu --layers 9 --out "$w/er.h5" --force >/dev/null 2>&1
"$bin" repro "$w/er.h5.incomplete" --out "$w/erb.h5" >/dev/null 2>"$tmp/err"; rc=$?
ok "repro of a failed run's trace: exit $rc, says the run failed ($(head -c 160 "$tmp/err"))" \
   '[ $rc -eq 2 ] && grep -q "the run that wrote the trace failed" "$tmp/err" && [ ! -e "$w/erb.h5" ]'
# a run refused while its arguments are read marks the --out it names, wherever the refused
# argument stands (round 24: a bad value before --out marked ./nvfp4dbg-trace.h5 instead, so
# compare gated the stale earlier OUT and passed; an unrelated trace in the cwd was poisoned)
mkdir "$w/cwd"; cp "$w/t.h5" "$w/cwd/nvfp4dbg-trace.h5"; cp "$w/t.h5" "$w/ord.h5"
abs_bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
for bad in "--layers 9-3" "--mode nosuch" "--tokens 1,,2" "--prompt --out --layers 9-3"; do
  rm -f "$w/ord.h5.incomplete" "$w/cwd/nvfp4dbg-trace.h5.incomplete"
  # shellcheck disable=SC2086
  (cd "$w/cwd" && "$abs_bin" trace "$ck" --backend cpu $bad --out "$w/ord.h5" --force >/dev/null 2>"$tmp/err"); rc=$?
  "$bin" compare "$w/ord.h5" "$w/t.h5" >/dev/null 2>&1; crc=$?
  ok "trace ... $bad --out OUT: exit $rc, OUT.incomplete written (compare exit $crc), nothing beside the cwd's own trace" \
     '[ $rc -eq 2 ] && [ -f "$w/ord.h5.incomplete" ] && [ $crc -eq 2 ] && [ ! -e "$w/cwd/nvfp4dbg-trace.h5.incomplete" ]'
done

# a trace --force over an earlier 0644 trace of a private checkpoint (0600 weights) is no wider than
# a new trace of it (round 19: it kept 0644 while repro and report narrowed to 0600)
mkdir -p "$w/priv"; cp "$ck"/config.json "$ck"/model.safetensors "$w/priv/"; chmod 600 "$w/priv/model.safetensors"
(umask 022; "$bin" trace "$w/priv" --backend cpu --tokens 1,2 --dump tensors -q --out "$w/priv-new.h5" >/dev/null 2>&1)
newmode=$(stat -c %a "$w/priv-new.h5" 2>/dev/null)
cp "$w/t.h5" "$w/priv-old.h5"; chmod 644 "$w/priv-old.h5"
(umask 022; "$bin" trace "$w/priv" --backend cpu --tokens 1,2 --dump tensors -q --out "$w/priv-old.h5" --force >/dev/null 2>&1); rc=$?
ok "trace --force over a 0644 trace of a private checkpoint: exit $rc, mode $(stat -c %a "$w/priv-old.h5") (a new one: $newmode)" '[ $rc -eq 0 ] && [ "$(stat -c %a "$w/priv-old.h5")" = "$newmode" ]'

# --- synth OUTDIR and its fault list ----------------------------------------------------------
run "$bin" synth "$w/s1" --recipe llama
ok "synth to a new folder: exit $rc, fault list beside it" '[ $rc -eq 0 ] && [ -f "$w/s1/model.safetensors" ] && [ -f "$w/s1.faults.json" ]'
ln -s "$w/adir" "$w/s2"
run "$bin" synth "$w/s2" --recipe llama
ok "synth into a link to a folder: exit $rc, nothing written there" '[ $rc -eq 2 ] && [ -z "$(ls -A "$w/adir")" ] && grep -q "s2: is a symbolic link" "$tmp/err"'
echo "target" >"$w/target.txt"; ln -s "$w/target.txt" "$w/s3.faults.json"
run "$bin" synth "$w/s3" --recipe llama --force
ok "synth whose fault-list path is a link: exit $rc, target kept, no folder left" '[ $rc -eq 2 ] && [ "$(cat "$w/target.txt")" = target ] && [ ! -e "$w/s3" ]'
echo "mine" >"$w/s4.faults.json"
run "$bin" synth "$w/s4" --recipe llama
ok "synth whose fault-list path is a user's file: exit $rc, kept" '[ $rc -eq 2 ] && [ "$(cat "$w/s4.faults.json")" = mine ] && [ ! -e "$w/s4" ]'
# a file that only starts like a fault list ("[]" then notes, an array of other objects) is a user's
printf '[]   <- results of experiment 7\nrun 1: cosine 0.9991\n' >"$w/s4b.faults.json"; cp "$w/s4b.faults.json" "$w/s4b.keep"
run "$bin" synth "$w/s4b" --recipe llama
ok "synth whose fault-list path starts with [] and holds notes: exit $rc, kept" '[ $rc -eq 2 ] && cmp -s "$w/s4b.faults.json" "$w/s4b.keep" && [ ! -e "$w/s4b" ]'
printf '[{"fault": "x"}]\n' >"$w/s4c.faults.json"
run "$bin" synth "$w/s4c" --recipe llama
ok "synth whose fault-list path is an array of other objects: exit $rc, kept" '[ $rc -eq 2 ] && grep -q "\"x\"" "$w/s4c.faults.json" && [ ! -e "$w/s4c" ]'
run "$bin" synth "$w/s1" --recipe llama --force
ok "synth over its own folder and fault list (--force): exit $rc" '[ $rc -eq 0 ] && [ -f "$w/s1.faults.json" ]'
# SIGTERM while synth writes: neither the folder nor a staging folder is left
"$bin" synth "$w/s5" --recipe llama --size small >/dev/null 2>&1 &
pid=$!; sleep 0.3; kill -TERM $pid 2>/dev/null; wait $pid; rc=$?
ok "synth killed by SIGTERM (exit $rc): no half-written folder, no staging folder" '[ ! -e "$w/s5" ] || [ -f "$w/s5/.nvfp4dbg-synth" ]'
ok "synth: no temporaries left" 'no_temps'
# replay killed by SIGHUP / SIGTERM at a spread of moments: its temporary checkpoint folder under
# TMPDIR never stays behind (round 20: about one kill in six left it)
"$bin" synth "$w/rp" --recipe deepseek_v4 --size small -q >/dev/null 2>&1
"$bin" trace "$w/rp" --backend cpu --out "$w/rp.h5" -q >/dev/null 2>&1
"$bin" repro "$w/rp.h5" --stage layers.0.mlp.experts --out "$w/rpb.h5" -q >/dev/null 2>&1
mkdir -p "$w/rptmp"; killed=0; left=0
for i in $(seq 0 40); do
  d=$(awk -v i=$i 'BEGIN { printf "%.3f", 0.10 + i * 0.005 }'); sig=HUP; [ $((i % 2)) -eq 1 ] && sig=TERM
  TMPDIR="$w/rptmp" timeout -s $sig "$d" "$bin" replay "$w/rpb.h5" --backend cpu >/dev/null 2>&1; [ $? -eq 124 ] && killed=$((killed + 1))
  [ -n "$(ls -A "$w/rptmp")" ] && { left=$((left + 1)); rm -rf "$w/rptmp"/*; }
done
ok "replay killed $killed times of 41 by SIGHUP/SIGTERM: temporary folders left $left" '[ -f "$w/rpb.h5" ] && [ $left -eq 0 ]'
# a file-size limit reached while synth writes: exit 2, nothing left, the earlier output kept
(ulimit -f 64; "$bin" synth "$w/s1" --recipe llama --force >"$tmp/out" 2>"$tmp/err"); rc=$?
ok "synth past the file-size limit: exit $rc, earlier output kept: $(head -c 200 "$tmp/err")" '[ $rc -eq 2 ] && grep -q "over the file-size limit" "$tmp/err" && [ -f "$w/s1/model.safetensors" ] && no_temps'

# --- synth --from: links, special files, modes -----------------------------------------------
mkdir "$w/src"; cp "$w/s1"/*.json "$w/s1/model.safetensors" "$w/src/"
echo "secret" >"$tmp/private.txt"; chmod 600 "$tmp/private.txt"
ln -s "$tmp/private.txt" "$w/src/notes.txt"
run "$bin" synth "$w/f1" --from "$w/src" --inject nibble-swap@layers.0.self_attn.q_proj
ok "synth --from with a link out of the source: exit $rc, nothing copied" '[ $rc -eq 2 ] && [ ! -e "$w/f1" ] && grep -q "notes.txt: a symbolic link out of the checkpoint folder" "$tmp/err"'
rm "$w/src/notes.txt"
run "$bin" inspect "$w/src"
ok "inspect of the source without the link: exit $rc" '[ $rc -eq 0 ]'
ln -s "$tmp/private.txt" "$w/src/tokenizer.json"
run "$bin" inspect "$w/src"
ok "inspect with a tokenizer.json linked out: exit $rc" '[ $rc -eq 2 ] && grep -q "tokenizer.json: a symbolic link out of the checkpoint folder" "$tmp/err"'
rm "$w/src/tokenizer.json"
mkfifo "$w/src/extra.txt"
run timeout 20 "$bin" synth "$w/f2" --from "$w/src" --inject nibble-swap@layers.0.self_attn.q_proj
ok "synth --from with a FIFO in the source: exit $rc, no hang" '[ $rc -eq 2 ] && [ ! -e "$w/f2" ]'
rm "$w/src/extra.txt"
chmod 600 "$w/src/config.json"
(umask 022; "$bin" synth "$w/f3" --from "$w/src" --inject nibble-swap@layers.0.self_attn.q_proj >/dev/null 2>&1); rc=$?
ok "synth --from keeps a 0600 file 0600 (umask 022): exit $rc, mode $(stat -c %a "$w/f3/config.json" 2>/dev/null)" '[ $rc -eq 0 ] && [ "$(stat -c %a "$w/f3/config.json")" = 600 ]'
run "$bin" synth "$w/src/inner" --from "$w/src" --inject nibble-swap@layers.0.self_attn.q_proj
ok "synth --from into its own source: exit $rc" '[ $rc -eq 2 ] && [ ! -e "$w/src/inner" ]'
# a Hugging Face cache snapshot: every file a link into ../../blobs
hub="$w/hub/models--x--y"; mkdir -p "$hub/blobs" "$hub/snapshots/abc"
for f in "$w/src"/*; do h=$(sum "$f"); cp "$f" "$hub/blobs/$h"; ln -s "../../blobs/$h" "$hub/snapshots/abc/$(basename "$f")"; done
run "$bin" synth "$w/f4" --from "$hub/snapshots/abc" --inject nibble-swap@layers.0.self_attn.q_proj
ok "synth --from a Hugging Face cache snapshot: exit $rc, regular files written" '[ $rc -eq 0 ] && [ -f "$w/f4/config.json" ] && [ ! -L "$w/f4/config.json" ]'
run "$bin" inspect "$hub/snapshots/abc"
ok "inspect of a Hugging Face cache snapshot: exit $rc" '[ $rc -eq 0 ]'
ok "synth --from: no temporaries left" 'no_temps'

echo "output discipline: $pass passed, $fail failed"
[ $fail -eq 0 ]
