#!/usr/bin/env bash
# The folder synth writes into (issue 21): a user's files are never deleted or mixed in.
#  - a folder holding anything is refused (exit 2, naming it and an entry), its files untouched;
#  - --force replaces an earlier synth output, listed in OUTDIR/.nvfp4dbg-synth (original/ too);
#  - --force on a folder synth did not write, or one that holds a file synth did not write (at
#    the top or in original/), is refused and nothing at all is removed;
#  - the same rules for synth --from; a path that is a file is refused.
#   usage: synth_outdir.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
run() { "$bin" synth "$@" >/dev/null 2>"$tmp/err"; rc=$?; }
sum() { (cd "$1" && find . -type f ! -name .nvfp4dbg-synth | sort | xargs sha256sum) ; }

# a user's own shard in the folder
mkdir "$tmp/user"; echo mine >"$tmp/user/model-00001-of-00002.safetensors"
run "$tmp/user" --recipe llama
ok "non-empty folder refused: exit $rc (want 2)" '[ $rc -eq 2 ]'
ok "message names the folder and the entry: $(cat "$tmp/err")" 'grep -q "$tmp/user: exists and is not empty (it holds .model-00001-of-00002.safetensors.)" "$tmp/err"'
run "$tmp/user" --recipe llama --force
ok "--force on a folder synth did not write: exit $rc (want 2)" '[ $rc -eq 2 ] && grep -q "not written by synth" "$tmp/err"'
ok "the user's file is untouched" '[ "$(cat "$tmp/user/model-00001-of-00002.safetensors")" = mine ] && [ "$(ls -A "$tmp/user" | wc -l)" -eq 1 ]'

# a new folder (parents created), then the same folder again
run "$tmp/a/b/ck" --recipe llama
ok "new folder with parents: exit $rc (want 0)" '[ $rc -eq 0 ] && [ -f "$tmp/a/b/ck/model.safetensors" ] && [ -f "$tmp/a/b/ck/original/model.safetensors" ]'
ok "manifest lists what synth wrote (each with its inode, size and time)" 'grep -q "^config.json	[0-9]* [0-9]* [0-9.]*$" "$tmp/a/b/ck/.nvfp4dbg-synth" && grep -q "^original	[0-9]* 0 0$" "$tmp/a/b/ck/.nvfp4dbg-synth" && grep -q "^model.safetensors	" "$tmp/a/b/ck/original/.nvfp4dbg-synth"'
run "$tmp/a/b/ck" --recipe llama
ok "an earlier synth output without --force: exit $rc (want 2)" '[ $rc -eq 2 ] && grep -q -- "--force" "$tmp/err"'
run "$tmp/a/b/ck" --recipe llama --format modelopt --force
ok "--force replaces it: exit $rc (want 0)" '[ $rc -eq 0 ] && [ -f "$tmp/a/b/ck/hf_quant_config.json" ]'
# the replaced checkpoint is byte-identical to a fresh one
run "$tmp/fresh" --recipe llama --format modelopt
ok "replaced output equals a fresh one" '[ "$(sum "$tmp/a/b/ck")" = "$(sum "$tmp/fresh")" ]'

# a foreign file at the top, then in original/: refused, nothing removed
before="$(sum "$tmp/a/b/ck")"
echo notes >"$tmp/a/b/ck/notes.txt"
run "$tmp/a/b/ck" --recipe llama --force
ok "--force with a foreign file: exit $rc (want 2), names it" '[ $rc -eq 2 ] && grep -q "holds .notes.txt., which synth did not write" "$tmp/err"'
# ... also when the manifest names it (added by hand, or shipped with the folder): synth lists a
# file with the inode, size and time it wrote it with, which the user's file does not have
printf 'notes.txt\t1 6 0.000000000\n' >>"$tmp/a/b/ck/.nvfp4dbg-synth"
run "$tmp/a/b/ck" --recipe llama --force
ok "--force with a foreign file the manifest names: exit $rc (want 2), the file kept" '[ $rc -eq 2 ] && [ "$(cat "$tmp/a/b/ck/notes.txt")" = notes ]'
sed -i '/^notes.txt/d' "$tmp/a/b/ck/.nvfp4dbg-synth"
echo "notes.txt" >>"$tmp/a/b/ck/.nvfp4dbg-synth"
run "$tmp/a/b/ck" --recipe llama --force
ok "... or names it without a stamp (an older manifest's line): exit $rc (want 2), the file kept" '[ $rc -eq 2 ] && [ "$(cat "$tmp/a/b/ck/notes.txt")" = notes ]'
sed -i '/^notes.txt$/d' "$tmp/a/b/ck/.nvfp4dbg-synth"
rm "$tmp/a/b/ck/notes.txt"
ok "nothing removed" '[ "$(sum "$tmp/a/b/ck")" = "$before" ]'
echo mine >"$tmp/a/b/ck/original/mine.safetensors"
run "$tmp/a/b/ck" --recipe llama --force
ok "--force with a foreign file in original/: exit $rc (want 2)" '[ $rc -eq 2 ] && grep -q "original: holds .mine.safetensors." "$tmp/err"'
rm "$tmp/a/b/ck/original/mine.safetensors"
ok "nothing removed (original/)" '[ "$(sum "$tmp/a/b/ck")" = "$before" ]'

# a manifest cannot reach outside the folder
echo keep >"$tmp/outside"
printf '../outside\t1 1 0.0\n/etc/passwd\t1 1 0.0\n' >>"$tmp/a/b/ck/.nvfp4dbg-synth"
run "$tmp/a/b/ck" --recipe llama --force
ok "manifest entries with '/' ignored: exit $rc (want 0)" '[ $rc -eq 0 ] && [ "$(cat "$tmp/outside")" = keep ]'

# a file where the folder should be
echo x >"$tmp/file"
run "$tmp/file" --recipe llama
ok "a file as OUTDIR: exit $rc (want 2)" '[ $rc -eq 2 ] && grep -q "exists and is not a directory" "$tmp/err"'

# synth --from: the same rules
src="$root/golden/conformance/llama/nvfp4"
M=layers.0.self_attn.q_proj
run "$tmp/user" --from "$src" --inject "nibble-swap@$M"
ok "--from into a non-empty folder: exit $rc (want 2)" '[ $rc -eq 2 ] && [ "$(cat "$tmp/user/model-00001-of-00002.safetensors")" = mine ]'
run "$tmp/from" --from "$src" --inject "nibble-swap@$M"
ok "--from into a new folder: exit $rc (want 0)" '[ $rc -eq 0 ] && grep -q "^model.safetensors	" "$tmp/from/.nvfp4dbg-synth"'
run "$tmp/from" --from "$src" --inject "nibble-swap@$M"
ok "--from again without --force: exit $rc (want 2)" '[ $rc -eq 2 ]'
run "$tmp/from" --from "$src" --inject "input-scale-inverted@$M" --force
ok "--from --force: exit $rc (want 0)" '[ $rc -eq 0 ] && grep -q input-scale-inverted "$tmp/from.faults.json"'

echo "synth output folders: $pass passed, $fail failed"
[ $fail -eq 0 ]
