#!/usr/bin/env bash
# The bad-input corpus (issue 21): one case per kind of hostile or broken input, each run as a user
# would run it, under the same limits: 20 s of wall time and (outside sanitizer builds) 2 GB of
# address space. Every case asserts its exit code (2 for bad input; 1 with the right verdict for
# the gate's regressions), the file or key named in the message, and never exit 3 or a signal.
# The cases in depth live beside the code (bad_config.sh, test_compare.c, test_trace_badfiles.c,
# synth_outdir.sh, max_memory.sh, test_tmpclean.c); this is the one list that covers them all.
#   usage: corpus.sh NVFP4DBG MK_GATE_CASES SOURCE_ROOT MK_BUNDLE_LIE
set -u
bin="$1"; mk="$2"; root="$(cd "$3" && pwd)"; mk_lie="$4"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
sanitized=0
ldd "$bin" 2>/dev/null | grep -q 'libasan\|libubsan' && sanitized=1

# run CASE WANT_RC PATTERN -- ARGS...: nvfp4dbg ARGS under the limits; stderr+stdout in $tmp/out
run() {
  local name="$1" want="$2" pat="$3"; shift 4
  ( [ $sanitized -eq 0 ] && ulimit -v 2097152; exec timeout 20 "$bin" "$@" ) >"$tmp/out" 2>&1
  local rc=$?
  if [ $rc -eq "$want" ] && grep -q -- "$pat" "$tmp/out"; then pass=$((pass + 1)); return 0; fi
  echo "FAIL $name: exit $rc (want $want), message: $(head -c 400 "$tmp/out" | tr '\n' ' ')"
  fail=$((fail + 1)); return 1
}
ck_with() { # name: a copy of clean-v4 whose config.json has key=value -> $tmp/name
  local d="$tmp/$1"; mkdir -p "$d"
  cp "$root/golden/clean-v4/model.safetensors" "$d/model.safetensors"
  sed "s/^\(  \"$2\": \)[^,]*,/\1$3,/" "$root/golden/clean-v4/config.json" >"$d/config.json"
  cmp -s "$d/config.json" "$root/golden/clean-v4/config.json" && echo "corpus: $2 not changed" >&2
}
T=(--backend cpu --out "$tmp/t.h5" --force)

# 1. config values out of range: exit 2 naming the file and the key, before anything is allocated
for kv in "hc_mult 0" "num_hidden_layers 4294967297" "num_hidden_layers 1e12" "hc_sinkhorn_iters 1000000000" \
          "hc_sinkhorn_iters 0" "qk_rope_head_dim 1000000000" "hidden_size 1000000000" \
          "moe_intermediate_size 1000000000" "rms_norm_eps -1e-6"; do
  read -r k v <<<"$kv"
  ck_with "cfg-$k-$v" "$k" "$v"
  run "config $k=$v" 2 "config.json.*'$k'" -- trace "$tmp/cfg-$k-$v" "${T[@]}"
done

# 2. inputs must be regular files: a FIFO as a shard or as the tokens file never hangs
mkdir -p "$tmp/fifo-ck"; cp "$root/golden/clean-v4/config.json" "$tmp/fifo-ck/"; mkfifo "$tmp/fifo-ck/model.safetensors"
run "FIFO as model.safetensors" 2 "model.safetensors.*not a regular file" -- trace "$tmp/fifo-ck" "${T[@]}"
mkfifo "$tmp/tokfifo"
run "FIFO as --tokens-file" 2 "tokfifo.*not a regular file" -- trace "$root/golden/clean-v4" --tokens-file "$tmp/tokfifo" "${T[@]}"

# 3. contradictory quantization configs: the audit names the module and the fields (a finding)
cp -r "$root/golden/conformance/llama/nvfp4" "$tmp/g7"
sed -i 's/"group_size": 16/"group_size": 7/' "$tmp/g7/config.json"
run "CT group_size 7" 1 "quant_config_mismatch.*group_size 7" -- inspect "$tmp/g7"
cp -r "$root/golden/conformance/llama/nvfp4" "$tmp/fmt"
sed -i 's/"format": "nvfp4-pack-quantized"/"format": "banana-quantized"/' "$tmp/fmt/config.json"
run "CT unknown format" 1 "quant_config_mismatch.*banana-quantized" -- inspect "$tmp/fmt"
cp -r "$root/golden/conformance/llama/modelopt" "$tmp/mo0"
sed -i 's/"group_size": 16/"group_size": 0/' "$tmp/mo0/hf_quant_config.json"
run "ModelOpt group_size 0" 2 "hf_quant_config.json.*group_size" -- trace "$tmp/mo0" "${T[@]}"

# 4. YAML: booleans are YAML booleans, anything else names file, line and key
# (reciprocal_input true on a healthy checkpoint inverts every input scale: the first NVFP4 linear
# diverges, scale_inverted; false leaves it clean)
for b in True true yes 1 False false no 0; do
  printf 'stack: b\nreciprocal_input: %s\n' "$b" >"$tmp/stack-$b.yaml"
  case "$b" in True|true|yes|1) want=1; pat="scale_inverted" ;; *) want=0; pat="no divergence" ;; esac
  run "stack boolean '$b'" $want "$pat" -- trace "$root/golden/clean-v4" --stack "$tmp/stack-$b.yaml" --layers 0 "${T[@]}"
done
printf 'stack: b\nreciprocal_input: banana\n' >"$tmp/stack-banana.yaml"
run "stack boolean 'banana'" 2 "stack-banana.yaml:2: reciprocal_input" -- trace "$root/golden/seed-bug-v4" --stack "$tmp/stack-banana.yaml" "${T[@]}"
printf 'stack: b\nreciprocal_input: "true"\n' >"$tmp/stack-quoted.yaml"
run "stack boolean quoted" 2 "stack-quoted.yaml:2: reciprocal_input must be a YAML boolean .*not the quoted text 'true'" -- trace "$root/golden/clean-v4" --stack "$tmp/stack-quoted.yaml" "${T[@]}"
printf 'stack: b\nreciprocal_inptu: true\n' >"$tmp/stack-typo.yaml"
run "stack key misspelt" 2 "stack-typo.yaml:2: unknown key 'reciprocal_inptu' (did you mean 'reciprocal_input'?)" -- trace "$root/golden/clean-v4" --stack "$tmp/stack-typo.yaml" "${T[@]}"
printf 'stack: b\ntp: 2\ntp_tile: 24\n' >"$tmp/stack-tile.yaml"
run "stack integer off its step" 2 "stack-tile.yaml:3: tp_tile must be a multiple of 16, not 24" -- trace "$root/golden/clean-v4" --stack "$tmp/stack-tile.yaml" "${T[@]}"
# names that reach the header line hold no terminal escapes (round 21): a stack profile's and a
# recipe's name with ESC ] (title) / ESC [ (colour) are refused, naming the file and line
printf 'stack: "ev\\e]0;pwned\\a\\e[31mRED"\nfused_input: own\n' >"$tmp/stack-esc.yaml"
run "stack name with terminal escapes" 2 "stack-esc.yaml:1: stack holds a control character" -- trace "$root/golden/clean-v4" --stack "$tmp/stack-esc.yaml" "${T[@]}"
sed 's/^recipe: deepseek_v4/recipe: "v4\\e]0;pwned\\a"/' "$root/recipes/deepseek_v4.yaml" >"$tmp/recipe-esc.yaml"
run "recipe name with terminal escapes" 2 "recipe-esc.yaml:[0-9]*: 'recipe' holds a control character" -- trace "$root/golden/clean-v4" --recipe "$tmp/recipe-esc.yaml" "${T[@]}"
printf 'default:\n  cosine: {abs: banana}\n' >"$tmp/tol.yaml"
"$mk" "$tmp" || { echo "FAIL: mk_gate_cases"; exit 1; }
run "tolerance 'banana'" 2 "tol.yaml:2: cosine.abs must be a number (unquoted), not 'banana'" -- compare "$tmp/golden.h5" "$tmp/golden.h5" --tolerances "$tmp/tol.yaml"

# 5. the gate: what hides a broken run is a regression, what cannot be compared is refused
cp "$tmp/golden.h5" "$tmp/golden-again.h5"
run "gate: same run passes" 0 "" -- compare "$tmp/golden-again.h5" "$tmp/golden.h5"
run "gate: duplicate stage row" 1 "duplicate stage row" -- compare "$tmp/dup-row.h5" "$tmp/golden.h5"
run "gate: golden of an unknown status" 2 "bogus-status.h5: not a trace the gate can use (an unknown status" -- compare "$tmp/golden.h5" "$tmp/bogus-status.h5"
run "gate: golden with a duplicate stage row" 2 "dup-row.h5: holds the row of stage .* twice" -- compare "$tmp/golden.h5" "$tmp/dup-row.h5"
run "gate: extra row of NaN figures" 2 "golden.h5: lacks 1 of the" -- compare "$tmp/extra-nan-row.h5" "$tmp/golden.h5"
run "gate: missing stage" 1 "missing stage" -- compare "$tmp/missing-stage.h5" "$tmp/golden.h5"
run "gate: NaN figure where the golden has a number" 1 "regression" -- compare "$tmp/nan-figure.h5" "$tmp/golden.h5"
run "gate: run status error" 1 "status" -- compare "$tmp/status-error.h5" "$tmp/golden.h5"
run "gate: golden status error" 2 "status 'error'" -- compare "$tmp/golden.h5" "$tmp/status-error.h5"
run "gate: other tokens" 2 "not comparable" -- compare "$tmp/other-tokens.h5" "$tmp/golden.h5"
run "gate: other recipe" 2 "not comparable" -- compare "$tmp/other-recipe.h5" "$tmp/golden.h5"
run "gate: external link" 2 "external-link.h5.*link" -- compare "$tmp/golden.h5" "$tmp/external-link.h5"
# (issue 37) a golden with no stage rows passed everything; a run of another depth is another model
run "gate: golden without stage rows" 2 "no-rows.h5: holds no stage rows: not a trace to compare against" -- compare "$tmp/golden.h5" "$tmp/no-rows.h5"
run "gate: other depth" 2 "not comparable: their rows cover layers 9-11 and 0-1 " -- compare "$tmp/other-layers.h5" "$tmp/golden.h5"
run "gate: same top layer, other layers" 2 "not comparable: their rows cover layers 0-1 and 1 " -- compare "$tmp/golden.h5" "$tmp/layer-gap.h5"
run "report --against: other depth" 2 "not comparable: their rows cover" -- report "$tmp/other-layers.h5" --html "$tmp/r.html" --against "$tmp/golden.h5"
# terminal escapes in a trace file's strings never reach the terminal raw (show, compare)
run "show: escapes in a trace's strings" 0 'ok\\x1b\[31mred' -- show "$tmp/escapes.h5"
grep -q "$(printf '\033')" "$tmp/out" && { echo "FAIL: show printed a raw ESC"; fail=$((fail + 1)); } || pass=$((pass + 1))
run "compare: escapes in a trace's strings" 1 'verdict' -- compare "$tmp/escapes.h5" "$tmp/golden.h5"
grep -q "$(printf '\033')" "$tmp/out" && { echo "FAIL: compare printed a raw ESC"; fail=$((fail + 1)); } || pass=$((pass + 1))
# one file given as both traces: passes by construction, and is said to
run "compare with itself" 2 "are the same file: a trace compared with itself cannot regress" -- compare "$tmp/golden.h5" "$tmp/golden.h5"
# duplicate keys: a line added below the reviewed one must not loosen the gate silently
printf 'default:\n  cosine: {abs: 0.001}\n  cosine: {abs: 1}\n' >"$tmp/tol-dup.yaml"
run "tolerance key twice" 2 "tol-dup.yaml:3: key 'cosine' given twice in one mapping (first at line 2)" -- compare "$tmp/golden.h5" "$tmp/golden.h5" --tolerances "$tmp/tol-dup.yaml"
# a second document below the reviewed one: never silently ignored
printf 'default:\n  cosine: {abs: 0.001}\n---\ndefault:\n  cosine: {abs: 1}\n' >"$tmp/tol-2doc.yaml"
run "tolerance file with a second document" 2 "tol-2doc.yaml:3: a second YAML document" -- compare "$tmp/golden.h5" "$tmp/golden.h5" --tolerances "$tmp/tol-2doc.yaml"
# aliases: a cycle, and anchors of anchors (a few lines for 10^9 nodes) refused at once
printf 'stack: b\nx: &a [*a]\n' >"$tmp/stack-cycle.yaml"
run "YAML alias cycle" 2 "stack-cycle.yaml: an alias refers to a node that contains it" -- trace "$root/golden/clean-v4" --stack "$tmp/stack-cycle.yaml" "${T[@]}"
{ printf 'stack: b\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n'
  for i in 1 2 3 4 5 6 7 8 9; do printf 'a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n' $i $i $((i-1)) $((i-1)) $((i-1)) $((i-1)) $((i-1)) $((i-1)) $((i-1)) $((i-1)) $((i-1)) $((i-1)); done; } >"$tmp/stack-laughs.yaml"
run "YAML billion laughs" 2 "stack-laughs.yaml: its aliases expand to more than 1000000 nodes" -- trace "$root/golden/clean-v4" --stack "$tmp/stack-laughs.yaml" "${T[@]}"
# --prod-dump whose tensors name no stage judged nothing: exit 2, not "no divergence"
cp "$root/golden/conformance/llama/dequant.safetensors" "$tmp/nomatch.safetensors"
run "--prod-dump matching no stage" 2 "nomatch.safetensors: none of its .* tensors names a stage of this run" -- trace "$root/golden/clean-v4" --prod-dump "$tmp/nomatch.safetensors" "${T[@]}"

# 6. outputs: never over a non-regular file, never into a user's folder, no temporaries on SIGTERM
mkfifo "$tmp/outfifo"
run "--out over a FIFO" 2 "outfifo: is a FIFO; the trace is written only to a new path" -- trace "$root/golden/clean-v4" --backend cpu --out "$tmp/outfifo"
mkdir "$tmp/user"; echo mine >"$tmp/user/model.safetensors"
run "synth into a user's folder" 2 "user: exists and is not empty" -- synth "$tmp/user" --recipe llama
[ "$(cat "$tmp/user/model.safetensors")" = mine ] && pass=$((pass + 1)) || { echo "FAIL: user's file changed"; fail=$((fail + 1)); }
"$bin" trace --force "$root/golden/clean-v4" --backend cpu --out "$tmp/r.h5" >/dev/null 2>&1
left=0
for d in 0.01 0.02 0.05 0.1 0.2; do
  "$bin" report "$tmp/r.h5" --html "$tmp/page.html" >/dev/null 2>&1 &
  p=$!; sleep "$d"; kill -TERM $p 2>/dev/null; wait $p 2>/dev/null
  ls "$tmp"/page.html.tmp >/dev/null 2>&1 && left=$((left + 1))
done
[ $left -eq 0 ] && pass=$((pass + 1)) || { echo "FAIL: SIGTERM during report left page.html.tmp ($left of 5)"; fail=$((fail + 1)); }
( umask 027; "$bin" trace --force "$root/golden/clean-v4" --backend cpu --out "$tmp/mode.h5" >/dev/null 2>&1 )
[ "$(stat -c %a "$tmp/mode.h5")" = 640 ] && pass=$((pass + 1)) || { echo "FAIL: trace mode $(stat -c %a "$tmp/mode.h5") under umask 027 (want 640)"; fail=$((fail + 1)); }

# 7. options that match nothing, prompts that do not fit
run "--layers past the model" 2 "--layers 7-7: .* has 2 layers" -- trace "$root/golden/clean-v4" --layers 7 "${T[@]}"
run "--override matching nothing" 2 "nothing.by.this.name" -- trace "$root/golden/clean-v4" --override nothing.by.this.name=1 "${T[@]}"
seq 0 999999 | awk '{ print $1 % 256 }' >"$tmp/million"
run "10^6 tokens" 2 "1000000 tokens need at least" -- trace "$root/golden/seed-bug-v4" --tokens-file "$tmp/million" --max-memory 1G "${T[@]}"
printf '1,2,3\0004,5,6,7,8\n' >"$tmp/tnul"
run "--tokens-file with a NUL byte (was cut there: ids after it dropped)" 2 "tnul: a NUL byte at byte offset 5" -- trace "$root/golden/clean-v4" --tokens-file "$tmp/tnul" "${T[@]}"
seq 0 256 >"$tmp/t257"
run "prompt past the context" 2 "max_position_embeddings 256" -- trace "$root/golden/conformance/llama/nvfp4" --tokens-file "$tmp/t257" "${T[@]}"

# 8. a checkpoint with nothing quantized says so; control characters never reach the terminal raw
run "unquantized checkpoint" 2 "no quantized module (format unquantized)" -- trace "$root/golden/conformance/llama/bf16" "${T[@]}"
run "unquantized checkpoint, --allow-unquantized" 0 "holds no quantized stage (--allow-unquantized)" -- trace "$root/golden/conformance/llama/bf16" --allow-unquantized "${T[@]}"
run "control characters in a name" 2 'no\\x1b\[31m' -- trace "$root/golden/clean-v4" --recipe "$(printf 'no\033[31mred')" "${T[@]}"
grep -q "$(printf '\033')" "$tmp/out" && { echo "FAIL: raw ESC on the terminal"; fail=$((fail + 1)); } || pass=$((pass + 1))

# 9. bounded work for what a file says (issue 37 item 3)
# a safetensors header of one long list: refused before parsing, memory proportional to the header
mkdir -p "$tmp/bigh"; cp "$root/golden/clean-v4/config.json" "$tmp/bigh/"
perl -e 'my $h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[" . ("0," x 4500000) . "0],\"data_offsets\":[0,0]}}"; print pack("Q<", length $h), $h' >"$tmp/bigh/model.safetensors"
run "header of 4.5M values" 2 "model.safetensors: header holds about 4500... JSON values, more than the 4000000" -- inspect "$tmp/bigh"
# a module-name regex with a back-reference in a compressed-tensors config
mkdir -p "$tmp/backref"; cp "$root/golden/conformance/llama/nvfp4/model.safetensors" "$tmp/backref/"
sed 's/"ignore": \[/"ignore": ["re:(a*)*\\\\1b", /' "$root/golden/conformance/llama/nvfp4/config.json" >"$tmp/backref/config.json"
run "regex with a back-reference" 2 "config.json: .*uses a back-reference" -- inspect "$tmp/backref"
# a module-name regex with catastrophic backtracking (no back-reference): PCRE2's match limit
# stops it on the first module name, exit 2 naming it (glibc's matcher had no limit)
mkdir -p "$tmp/regcost"; cp "$root/golden/conformance/llama/nvfp4/model.safetensors" "$tmp/regcost/"
sed 's/"ignore": \[/"ignore": ["re:(?:[a-z._0-9]|[a-z])*[A-Z]", /' "$root/golden/conformance/llama/nvfp4/config.json" >"$tmp/regcost/config.json"
run "regex past the match limit" 2 "config.json: regular expression .* passed PCRE2's match limit" -- inspect "$tmp/regcost"
# Python's regex syntax (compressed-tensors matches with re.match): a look-behind and \d are read,
# so the ignore entry covers the attention q_proj linears that hold NVFP4 tensors
mkdir -p "$tmp/pyre"; cp "$root/golden/conformance/llama/nvfp4/model.safetensors" "$tmp/pyre/"
sed 's/"ignore": \[/"ignore": ["re:model\\\\.layers\\\\.\\\\d+\\\\..*(?<!mlp)\\\\.q_proj$", /' "$root/golden/conformance/llama/nvfp4/config.json" >"$tmp/pyre/config.json"
run "Python regex syntax in ignore" 1 "quant_config_mismatch model.layers.1.self_attn.q_proj: .*ignores it" -- inspect "$tmp/pyre"
# a pre-tokenizer regex with catastrophic backtracking on the prompt: PCRE2's limits stop it
mkdir -p "$tmp/tokre"; cp "$root/golden/clean-v4/model.safetensors" "$tmp/tokre/"; cp "$root/golden/clean-v4/config.json" "$tmp/tokre/"
cat >"$tmp/tokre/tokenizer.json" <<'TOK'
{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
 "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a|aa)+$"}, "behavior": "Isolated", "invert": false},
 "post_processor": null, "decoder": null,
 "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null,
           "fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": {"a": 0, "b": 1}, "merges": []}}
TOK
run "catastrophic pre-tokenizer regex" 2 "tokenizer.json: the pre-tokenizer's regular expression passed PCRE2's match limit" -- trace "$tmp/tokre" --prompt "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab" "${T[@]}"
# a checkpoint text file linked out of the folder (a private file would land in a bundle)
mkdir -p "$tmp/linkout"; cp "$root/golden/clean-v4/model.safetensors" "$tmp/linkout/"; ln -s "$root/golden/clean-v4/config.json" "$tmp/linkout/"
run "config.json linked out of the checkpoint" 2 "linkout/config.json: a symbolic link out of the checkpoint folder" -- trace "$tmp/linkout" "${T[@]}"
# the weights linked out of the folder: repro would copy another file's bytes into a bundle the user shares
mkdir -p "$tmp/wlinkout"; ln -s "$root/golden/clean-v4/model.safetensors" "$tmp/wlinkout/"; cp "$root/golden/clean-v4/config.json" "$tmp/wlinkout/"
run "weights linked out of the checkpoint (inspect)" 2 "wlinkout/model.safetensors: a symbolic link out of the checkpoint folder" -- inspect "$tmp/wlinkout"
run "weights linked out of the checkpoint (trace)" 2 "wlinkout/model.safetensors: a symbolic link out of the checkpoint folder" -- trace "$tmp/wlinkout" "${T[@]}"
# an output that is the run's own input
cp "$tmp/golden.h5" "$tmp/in.h5"
run "report over its own trace" 2 "in.h5: is also an input of this run" -- report "$tmp/in.h5" --html "$tmp/in.h5" --force
# a message about a path longer than a message holds (1600 bytes) keeps its reason (cut in the middle)
long="$tmp/$(printf 'd%.0s' $(seq 1 200))"; mkdir -p "$long"; for c in e f h i j k; do long="$long/$(printf "$c%.0s" $(seq 1 200))"; done; long="$long/$(printf 'g%.0s' $(seq 1 200))/x.html"
run "long output path: the reason survives" 2 "ggg/x.html: the folder to write the report in does not exist" -- report "$tmp/golden.h5" --html "$long"

# a recipe whose layer section is 2000 stages long (aliases make that a few lines): refused by count
{ echo "recipe: big"; echo "match: [nothing]"; echo "layer:"; for i in $(seq 1 2000); do echo "  - {stage: s$i, op: identity, in: x, out: x}"; done; } >"$tmp/big-recipe.yaml"
run "recipe of 2000 stages" 2 "big-recipe.yaml:4: a stage section of 2000 stages (at most 1024)" -- trace "$root/golden/clean-v4" --recipe "$tmp/big-recipe.yaml" "${T[@]}"
# a tensor name with a terminal escape: inspect's module table shows it escaped, never raw
mkdir -p "$tmp/escname"; cp "$root/golden/clean-v4/config.json" "$tmp/escname/"
perl -e 'local $/; my $b = <STDIN>; my $n = unpack("Q<", substr($b, 0, 8)); my $h = substr($b, 8, $n);
  $h =~ s/"lm_head\.weight"/"lm_head\\u001b[31m.weight"/ or die "no lm_head";
  $h =~ s/ +$//; $h .= " " x ((8 - length($h) % 8) % 8); print pack("Q<", length $h), $h, substr($b, 8 + $n)' \
  <"$root/golden/clean-v4/model.safetensors" >"$tmp/escname/model.safetensors"
# a bundle whose stage names a module its tensors lack: replay's message names the bundle (and the
# part of it), never the temporary folder it unpacked the bundle into (gone when the message is read)
"$bin" trace --force "$root/golden/seed-bug-v4" --backend cpu --out "$tmp/lie-t.h5" >/dev/null 2>&1
"$bin" repro "$tmp/lie-t.h5" --out "$tmp/lie-b.h5" >/dev/null 2>&1
"$mk_lie" "$tmp/lie-b.h5" "$tmp/lie.h5"
run "replay of a bundle whose stage names a missing module" 2 "lie.h5 (its /text/stage_yaml): no stage of the recipe makes" -- replay "$tmp/lie.h5" --backend cpu
grep -q "nvfp4dbg-replay-" "$tmp/out" && { echo "FAIL: replay names its temporary folder: $(head -c 300 "$tmp/out")"; fail=$((fail + 1)); } || pass=$((pass + 1))
# a bundle replayed on no rows, or whose stage definition is another op than its rows (round 18):
# the replay would compare nothing, or something else, and pass
"$mk_lie" "$tmp/lie-b.h5" "$tmp/norows.h5" norows
run "replay of a bundle whose input holds no rows" 2 "norows.h5: input '.*' holds 0 x [0-9]* values: a stage replayed on no rows tests nothing" -- replay "$tmp/norows.h5" --backend cpu
"$mk_lie" "$tmp/lie-b.h5" "$tmp/opyaml.h5" opyaml
run "replay of a bundle whose stage_yaml is another op" 2 "opyaml.h5: stage_yaml says op identity, but the bundle is of stage" -- replay "$tmp/opyaml.h5" --backend cpu
# a decompression bomb: an input of gzip zeros declaring 1 GiB in a few MB is refused before it is
# expanded (the run's limit of 2 GiB of address space would otherwise stop it with no message)
"$mk_lie" "$tmp/lie-b.h5" "$tmp/bomb.h5" inflate
run "replay of a bundle whose input is a decompression bomb" 2 "bomb.h5: .* declares 1024 MiB from .* KiB stored" -- replay "$tmp/bomb.h5" --backend cpu
# a trace whose routing decision declares more rows than its tokens (2^20 rows of gzip zeros in a
# 16-token trace): report refuses it at once instead of reading it (round 20)
"$mk_lie" "$tmp/lie-t.h5" "$tmp/route-rows.h5" routing-rows
run "report of a trace whose /routing declares 2^20 rows" 2 "route-rows.h5: /routing/.*/ref is \[1048576, 4\]; a routing decision is \[tokens, k\] with the trace's 16 tokens" -- report "$tmp/route-rows.h5" --html "$tmp/route-rows.html"
# a routed-expert bundle whose routing names no expert of the stage (negative ids slipped past the
# duplicate check): the replay ran no expert and called zeros against zeros "same verdict" (round 20)
"$bin" repro "$tmp/lie-t.h5" --stage layers.0.mlp.experts --out "$tmp/route-b.h5" >/dev/null 2>&1
"$mk_lie" "$tmp/route-b.h5" "$tmp/badroute.h5" badroute
run "replay of an expert bundle routed to expert -2000000000" 2 "routing decision sends token 0 to expert -2000000000, and the stage has experts 0-7" -- replay "$tmp/badroute.h5" --backend cpu
# a bundle whose /tokens is shorter than its inputs' rows: the rotary and attention kernels read
# positions past the run's (valgrind: invalid reads; figures from whatever lay there, "ok", exit 0:
# round 25)
"$bin" repro "$tmp/lie-t.h5" --stage layers.0.self_attn.attention --out "$tmp/attn-b.h5" >/dev/null 2>&1
"$mk_lie" "$tmp/attn-b.h5" "$tmp/fewtok.h5" fewtok
run "replay of an attention bundle with 1 token and 16-row inputs" 2 "stage layers.0.self_attn.attention: its query has [0-9]* rows, more than the run's 1 tokens" -- replay "$tmp/fewtok.h5" --backend cpu
# a trace made against the original cannot become a bundle (it carries the checkpoint's tensors
# only; replayed alone a packing fault read "ok", exit 0)
"$bin" trace --force "$root/golden/clean-v4" --reference-checkpoint "$root/golden/clean-v4/original" --backend cpu --out "$tmp/rt.h5" >/dev/null 2>&1
run "repro of a trace made with --reference-checkpoint" 2 "rt.h5: the trace was made with --reference-checkpoint" -- repro "$tmp/rt.h5" --stage layers.0.self_attn.q_a_proj --out "$tmp/rb.h5"
# a trace made with other reference numerics: the bundle would replay fp32 and blame the checkpoint (round 22)
"$bin" trace --force "$root/golden/seed-bug-v4" --ref-numerics transformers --backend cpu --out "$tmp/rn.h5" >/dev/null 2>&1
run "repro of a trace made with --ref-numerics transformers" 2 "rn.h5: the trace was made with --ref-numerics transformers; a bundle replays the default" -- repro "$tmp/rn.h5" --stage layers.0.mlp.gate --out "$tmp/rnb.h5"
# a prompt with a C1 control (U+009B, CSI) and a right-to-left override: show prints them escaped
"$bin" trace --force "$root/golden/clean-v4" --backend cpu --prompt "$(printf 'a\xc2\x9b31mb\xe2\x80\xaec')" --out "$tmp/c1.h5" >/dev/null 2>&1
run "show of a prompt with C1 and bidi controls" 0 'prompt: a\\u{009b}31mb\\u{202e}c' -- show "$tmp/c1.h5"
LC_ALL=C grep -q "$(printf '\xc2\x9b')" "$tmp/out" && { echo "FAIL: raw C1 control from show"; fail=$((fail + 1)); } || pass=$((pass + 1))
# inspect's load-check limit: anything but a byte count is exit 2 (it was ignored)
NVFP4DBG_INSPECT_LOAD_LIMIT=1K run "NVFP4DBG_INSPECT_LOAD_LIMIT=1K" 2 "NVFP4DBG_INSPECT_LOAD_LIMIT=1K: expected a byte count" -- inspect "$root/golden/clean-v4"
# compare --max with a value that is not a count (a leading space crashed it: exit 139)
run "compare --max ' 5'" 2 "--max needs a row count" -- compare "$tmp/rt.h5" "$tmp/rt.h5" --max " 5"
# a hash router's table (tid2eid) whose rows name one expert twice: exit 2 naming it (it overran the
# per-expert token lists: heap corruption, or a trace cut short with exit 0)
mkdir -p "$tmp/tid"; cp "$root/golden/clean-v4/config.json" "$tmp/tid/"
perl -e 'local $/; my $b = <STDIN>; my $n = unpack("Q<", substr($b, 0, 8)); my $h = substr($b, 8, $n);
  $h =~ /"model\.layers\.0\.mlp\.gate\.tid2eid":\{[^}]*"data_offsets":\[(\d+),(\d+)\]/ or die "no tid2eid";
  substr($b, 8 + $n + $1, $2 - $1) = pack("l<", 7) x (($2 - $1) / 4); print $b' \
  <"$root/golden/clean-v4/model.safetensors" >"$tmp/tid/model.safetensors"
run "tid2eid rows naming an expert twice" 2 "tid2eid: the row of token [0-9]* names expert 7 twice" -- trace "$tmp/tid" --tokens 0,1,100 "${T[@]}"
run "... and inspect's load check" 1 "unreplayable .*names expert 7 twice" -- inspect "$tmp/tid"
# a checkpoint trace cannot load is never "0 errors" in inspect (its load check replays one token):
# no tensors at all, a layer left out, one module left out
mkdir -p "$tmp/st0"; cp "$root/golden/clean-v4/config.json" "$tmp/st0/"; printf '\006\0\0\0\0\0\0\0{}    ' >"$tmp/st0/model.safetensors"
run "inspect: a weights file with no tensors" 1 "unreplayable .*missing tensor model.embed_tokens.weight" -- inspect "$tmp/st0"
for cut in model.layers.1. model.layers.0.self_attn.q_a_proj.; do
  d="$tmp/cut-$cut"; mkdir -p "$d"; cp "$root/golden/clean-v4/config.json" "$d/"
  # the tensors and their bytes left out (the rest packed again, as a writer would: a data area
  # with bytes no tensor covers is refused on its own)
  perl -MJSON::PP -e 'my $cut = shift; local $/; my $b = <STDIN>; my $n = unpack("Q<", substr($b, 0, 8));
    my $h = JSON::PP->new->decode(substr($b, 8, $n)); my $data = substr($b, 8 + $n);
    my @keep = sort { $h->{$a}{data_offsets}[0] <=> $h->{$b}{data_offsets}[0] }
               grep { $_ ne "__metadata__" && index($_, $cut) != 0 } keys %$h;
    die "nothing cut" if @keep == scalar(grep { $_ ne "__metadata__" } keys %$h);
    my ($out, %nh) = (""); $nh{__metadata__} = $h->{__metadata__} if $h->{__metadata__};
    for my $k (@keep) { my ($s, $e) = @{$h->{$k}{data_offsets}}; my %t = %{$h->{$k}};
      $t{data_offsets} = [length $out, length($out) + $e - $s]; $out .= substr($data, $s, $e - $s); $nh{$k} = \%t; }
    my $j = JSON::PP->new->canonical->encode(\%nh); $j .= " " x ((8 - length($j) % 8) % 8);
    print pack("Q<", length $j), $j, $out' "$cut" \
    <"$root/golden/clean-v4/model.safetensors" >"$d/model.safetensors"
  run "inspect: tensors $cut* left out" 1 "error   unreplayable .*trace cannot replay this checkpoint: stage layers" -- inspect "$d"
done
# (exit 1: lm_head is missing under its own name, so trace could not replay it: finding unreplayable)
run "inspect: an escape in a tensor name" 1 'lm_head\\x1b\[31m' -- inspect "$tmp/escname" --modules
grep -q "$(printf '\033')" "$tmp/out" && { echo "FAIL: raw ESC from inspect"; fail=$((fail + 1)); } || pass=$((pass + 1))

# --- the eighth review's cases ---
# config.json fields the recipe's math depends on: another activation, a vocabulary the embedding
# does not have
mkdir -p "$tmp/act"; cp "$root/golden/clean-v4/model.safetensors" "$tmp/act/model.safetensors"
sed '1s/^{/{"hidden_act": "nonsense",/' "$root/golden/clean-v4/config.json" >"$tmp/act/config.json"
run "hidden_act nonsense" 2 "config.json: hidden_act is 'nonsense'; recipe deepseek_v4 computes silu, swish only" -- trace "$tmp/act" "${T[@]}"
ck_with "vocab" vocab_size 100
run "vocab_size below the embedding's rows" 2 "config.json: vocab_size 100, but model.embed_tokens.weight has 256 rows" -- trace "$tmp/vocab" --tokens 1,2 "${T[@]}"
# the Lightning indexer's sizes at 0 (round 17): refused naming config.json and the key, not a stage
for k in index_topk index_n_heads index_head_dim; do
  ck_with "$k-0" $k 0
  run "$k 0" 2 "config.json: key '$k' is 0: a size of at least 1" -- trace "$tmp/$k-0" --tokens 1,2 "${T[@]}"
done
# --layers over layers kept in high precision compares nothing quantized (round 17): refused as a
# checkpoint without quantized modules is
inj=(); for m in self_attn.q_proj self_attn.k_proj self_attn.v_proj self_attn.o_proj mlp.gate_proj mlp.up_proj mlp.down_proj; do
  inj+=(--inject "dequantize@layers.1.$m" --inject "config-ignore@layers.1.$m"); done
"$bin" synth "$tmp/dq1" --from "$root/golden/conformance/llama/nvfp4" "${inj[@]}" >/dev/null 2>&1
run "--layers over a BF16 layer" 2 "layers 1-1 hold no quantized module" -- trace "$tmp/dq1" --layers 1 --tokens 1,2 "${T[@]}"
run "--layers over a BF16 layer, --allow-unquantized" 0 "no divergence" -- trace "$tmp/dq1" --layers 1 --tokens 1,2 --allow-unquantized "${T[@]}"
run "--layers over the NVFP4 layer" 0 "no divergence" -- trace "$tmp/dq1" --layers 0 --tokens 1,2 "${T[@]}"
# a recipe file that never runs some quantized modules (round 18: no MLP stage): the run is no verdict
# on them, so it is not "no divergence, exit 0"
sed '/"layers.{L}.mlp", op: mlp/d; s/{stage: "layers.{L}", op: add, in: \[x, ym\], out: x}/{stage: "layers.{L}", op: add, in: [x, b], out: x}/' \
  "$root/recipes/llama.yaml" >"$tmp/nomlp.yaml"
run "recipe without the MLP stages" 1 "but 6 quantized modules of the checkpoint ran in no stage of recipe llama (first: model.layers.0.mlp.down_proj)" -- trace "$root/golden/conformance/llama/nvfp4" --recipe "$tmp/nomlp.yaml" --tokens 1,2 "${T[@]}"
run "the shipped recipe runs every quantized module" 0 "no divergence" -- trace "$root/golden/conformance/llama/nvfp4" --tokens 1,2 "${T[@]}"
# repro replays the recipe the trace ran (round 18: an edited copy named llama was bundled with the
# installed llama.yaml): the file the trace loaded while it is unchanged, else refused
{ cat "$root/recipes/llama.yaml"; echo "# a user's copy"; } >"$tmp/myllama.yaml"
"$bin" trace "$root/golden/conformance/llama/nvfp4" --recipe "$tmp/myllama.yaml" --tokens 1,2 --backend cpu -q --out "$tmp/myl.h5" >/dev/null 2>&1
run "repro of a trace made with a recipe file: that file" 0 "bundle written" -- repro "$tmp/myl.h5" --stage layers.0.self_attn.q_proj --out "$tmp/myl-b.h5"
echo "# edited after the trace" >>"$tmp/myllama.yaml"
run "repro after the recipe file changed" 2 "myl.h5: the trace ran recipe file .*myllama.yaml, but llama .* is another recipe and that file has changed or is gone since" -- repro "$tmp/myl.h5" --stage layers.0.self_attn.q_proj --out "$tmp/myl-b2.h5"
# and the stack profile the trace ran (round 25: a --stack FILE declaring "stack: exact" was bundled
# as the shipped exact, and replay said ok): that file while it is unchanged, else refused
mkdir -p "$tmp/stk"; { cat "$root/recipes/stack-exact.yaml"; echo "gate_up_order: w31"; } >"$tmp/stk/my-exact.yaml"
"$bin" trace "$root/golden/conformance/llama/nvfp4" --stack "$tmp/stk/my-exact.yaml" --tokens 1,2 --backend cpu -q --out "$tmp/mys.h5" >/dev/null 2>&1
"$bin" repro "$tmp/mys.h5" --stage layers.0.mlp --out "$tmp/mys-b.h5" >/dev/null 2>&1
run "replay of the bundle: the profile the trace ran, its divergence" 1 "" -- replay "$tmp/mys-b.h5" --backend cpu
echo "# edited after the trace" >>"$tmp/stk/my-exact.yaml"
run "repro after the stack file changed" 2 "mys.h5: the trace ran stack profile file .*my-exact.yaml, which has changed or is gone" -- repro "$tmp/mys.h5" --stage layers.0.mlp --out "$tmp/mys-b2.h5"
# an input global scale stored as F64 (round 19): a kernel that reads float32 gets garbage, which the
# replay (it converts) cannot show: trace exits 1 for the static error, as for a weight global
mkdir -p "$tmp/igs64"; cp "$root/golden/conformance/llama/nvfp4/config.json" "$tmp/igs64/"
perl -MJSON::PP -e 'local $/; my $b = <STDIN>; my $n = unpack("Q<", substr($b, 0, 8)); my $h = JSON::PP->new->decode(substr($b, 8, $n));
  my $d = substr($b, 8 + $n); my $meta = delete $h->{"__metadata__"}; my ($off, $out, %o) = (0, "");
  for my $k (sort { $h->{$a}{data_offsets}[0] <=> $h->{$b}{data_offsets}[0] } keys %$h) {
    my $t = $h->{$k}; my ($s, $e) = @{$t->{data_offsets}}; my $raw = substr($d, $s, $e - $s);
    if ($k eq "model.layers.0.self_attn.q_proj.input_global_scale") { $raw = pack("d<*", unpack("f<*", $raw)); $t->{dtype} = "F64"; }
    $o{$k} = {dtype => $t->{dtype}, shape => $t->{shape}, data_offsets => [$off, $off + length $raw]}; $off += length $raw; $out .= $raw; }
  $o{"__metadata__"} = $meta if $meta; my $hj = JSON::PP->new->canonical->encode(\%o); $hj .= " " x ((8 - length($hj) % 8) % 8);
  print pack("Q<", length $hj), $hj, $out' <"$root/golden/conformance/llama/nvfp4/model.safetensors" >"$tmp/igs64/model.safetensors"
run "inspect: an input global scale stored as F64" 1 "scale_dtype" -- inspect "$tmp/igs64"
run "trace: an input global scale stored as F64 is a static error the replay cannot clear" 1 "a clean replay cannot" -- trace "$tmp/igs64" --tokens 1,2 "${T[@]}"
# a recipe's extends: parent is an input of the run (round 19: --out parent.yaml --force replaced it)
sed 's/^recipe: deepseek_v4/recipe: parent/' "$root/recipes/deepseek_v4.yaml" >"$tmp/parent.yaml"
printf 'recipe: child\nextends: parent.yaml\n' >"$tmp/child.yaml"; cp "$tmp/parent.yaml" "$tmp/parent-before.yaml"
run "trace --out the recipe's parent" 2 "parent.yaml: is also an input of this run" -- trace "$root/golden/clean-v4" --recipe "$tmp/child.yaml" --backend cpu --out "$tmp/parent.yaml" --force
cmp -s "$tmp/parent.yaml" "$tmp/parent-before.yaml" && pass=$((pass + 1)) || { echo "FAIL the recipe's parent was replaced"; fail=$((fail + 1)); }
# numbers written in a recipe get config.json's ranges (round 17): eps -1 or theta -5 was a NaN on
# both paths blamed on the checkpoint
sed '0,/eps: \$rms_norm_eps/s//eps: -1/' "$root/recipes/llama.yaml" >"$tmp/eps-neg.yaml"
sed '0,/theta: \$rope_theta/s//theta: -5/' "$root/recipes/llama.yaml" >"$tmp/theta-neg.yaml"
run "recipe eps -1" 2 "eps-neg.yaml:[0-9]*: stage .*attribute eps is -1, outside the allowed range >0..0.1" -- trace "$root/golden/conformance/llama/nvfp4" --recipe "$tmp/eps-neg.yaml" --tokens 1,2 "${T[@]}"
run "recipe theta -5" 2 "theta-neg.yaml:[0-9]*: stage .*attribute theta is -5, outside the allowed range >0..1e+12" -- trace "$root/golden/conformance/llama/nvfp4" --recipe "$tmp/theta-neg.yaml" --tokens 1,2 "${T[@]}"
# a GLM-4 / GLM-4.5 config saved without partial_rotary_factor builds transformers' default (0.5),
# not a rotary over the whole head (round 17): the same rows as with the key
for fam in glm4 glm4_moe; do
  d="$tmp/nopr-$fam"; mkdir -p "$d"; cp "$root/golden/conformance/$fam/nvfp4/model.safetensors" "$d/"
  sed '/"partial_rotary_factor": 0.5,/d' "$root/golden/conformance/$fam/nvfp4/config.json" >"$d/config.json"
  "$bin" trace "$root/golden/conformance/$fam/nvfp4" --backend cpu --tokens 1,2 -q --out "$tmp/pr-with.h5" --force >/dev/null 2>&1
  "$bin" trace "$d" --backend cpu --tokens 1,2 -q --out "$tmp/pr-without.h5" --force >/dev/null 2>&1
  a=$("$bin" show "$tmp/pr-with.h5" --csv --stage layers.0.self_attn.q_rope 2>&1); b=$("$bin" show "$tmp/pr-without.h5" --csv --stage layers.0.self_attn.q_rope 2>&1)
  if [ -n "$a" ] && [ "$a" = "$b" ] && ! grep -q partial_rotary_factor "$d/config.json"; then pass=$((pass + 1)); else
    echo "FAIL $fam without partial_rotary_factor: q_rope differs from the run with 0.5: $a / $b"; fail=$((fail + 1)); fi
done
# synth --from over a source file whose name holds a newline (round 17): its manifest records one name
# a line, so the name could not be recorded and a later --force refused synth's own output
cp -r "$root/golden/conformance/llama/nvfp4" "$tmp/nlsrc"; touch "$tmp/nlsrc/$(printf 'notes\nv2.txt')"
run "synth --from: a file name with a newline" 2 "nlsrc/notes\\\\x0av2.txt: a file name with a control character" -- synth "$tmp/nlout" --from "$tmp/nlsrc" --inject input-scale-inverted@layers.0.self_attn.q_proj
[ ! -e "$tmp/nlout" ] && pass=$((pass + 1)) || { echo "FAIL synth --from with a newline name left $tmp/nlout"; fail=$((fail + 1)); }
# DeepSeek-V4's native release marks its MXFP4 routed experts only by expert_dtype (field report N15):
# without it, or with another value, the config contradicts the experts' tensors
for ed in none fp8; do
  d="$tmp/native-ed-$ed"; mkdir -p "$d"; cp "$root/golden/conformance/deepseek_v4/native/model.safetensors" "$d/"
  if [ $ed = none ]; then sed '/"expert_dtype": "fp4",/d' "$root/golden/conformance/deepseek_v4/native/config.json" >"$d/config.json"; want="with no expert_dtype"
  else sed 's/"expert_dtype": "fp4",/"expert_dtype": "fp8",/' "$root/golden/conformance/deepseek_v4/native/config.json" >"$d/config.json"; want='with expert_dtype "fp8"'; fi
  run "native V4, expert_dtype $ed (inspect)" 1 "$want, but routed expert layers.0.ffn.experts.0.w1 holds MXFP4 tensors" -- inspect "$d"
  run "native V4, expert_dtype $ed (trace)" 1 "quant_config_mismatch" -- trace "$d" --tokens 1,2 "${T[@]}"
done
run "native V4 with expert_dtype fp4: no finding" 0 "findings: 0 errors, 0 warnings" -- inspect "$root/golden/conformance/deepseek_v4/native"
# the native FP8 quantization_config's words (round 19): another FP8 format, static activations,
# another scale format are refused; quant_method mxfp4 over the FP8 linears contradicts them
for kv in 'fmt/e4m3/e5m2' 'activation_scheme/dynamic/static' 'scale_fmt/ue8m0/float32'; do
  IFS=/ read -r k from to <<<"$kv"
  d="$tmp/native-$k"; mkdir -p "$d"; cp "$root/golden/conformance/deepseek_v4/native/model.safetensors" "$d/"
  sed "s/\"$k\": \"$from\"/\"$k\": \"$to\"/" "$root/golden/conformance/deepseek_v4/native/config.json" >"$d/config.json"
  run "native V4, $k $to" 2 "'quantization_config.$k' is \"$to\", not \"$from\"" -- inspect "$d"
done
d="$tmp/native-mxfp4"; mkdir -p "$d"; cp "$root/golden/conformance/deepseek_v4/native/model.safetensors" "$d/"
sed 's/"quant_method": "fp8"/"quant_method": "mxfp4"/' "$root/golden/conformance/deepseek_v4/native/config.json" >"$d/config.json"
run "native V4 under quant_method mxfp4" 1 "says quant_method mxfp4 (MXFP4 experts, everything else unquantized), but layers.0.attn" -- inspect "$d"
# a NaN E8M0 byte (0xff) in a routed expert's .scale: named nan_weight_scale by the trace, as inspect does
cp -r "$root/golden/conformance/deepseek_v4/native" "$tmp/native-nan"
hl=$(od -An -tu8 -N8 "$tmp/native-nan/model.safetensors" | tr -d ' ')
off=$(dd if="$tmp/native-nan/model.safetensors" bs=1 skip=8 count="$hl" 2>/dev/null | grep -o '"layers.0.ffn.experts.1.w2.scale":{[^}]*}' | sed 's/.*"data_offsets":\[\([0-9]*\),.*/\1/')
printf '\377' | dd of="$tmp/native-nan/model.safetensors" bs=1 seek=$((8 + hl + off)) conv=notrunc 2>/dev/null
run "native V4: a NaN E8M0 expert scale (trace)" 1 "first divergence at layers.0.mlp.experts.1.down_proj (isolated): .*nan_weight_scale" -- trace "$tmp/native-nan" "${T[@]}"
# --override values: decimal numbers as written (round 18: 0x10 and " 5" were taken, "5 " refused)
for v in 0x10 " 5" "5 "; do
  run "--override value '$v'" 2 "is not a decimal number" -- trace "$root/golden/clean-v4" --override "model.layers.0.self_attn.q_a_proj.input_global_scale=$v" "${T[@]}"
done
# a DeepSeek config saved without routed_scaling_factor / scoring_func builds transformers' defaults
# (V3 2.5; V4 1.5 and sqrtsoftplus), not the router op's generic 1 and softmax (round 19)
for fam in deepseek_v3 deepseek_v4; do
  d="$tmp/nodef-$fam"; mkdir -p "$d"; cp "$root/golden/conformance/$fam/nvfp4/model.safetensors" "$d/"
  sed '/"routed_scaling_factor":/d; /"scoring_func":/d' "$root/golden/conformance/$fam/nvfp4/config.json" >"$d/config.json"
  "$bin" trace "$root/golden/conformance/$fam/nvfp4" --backend cpu --tokens 1,2,3 -q --out "$tmp/rd-with.h5" --force >/dev/null 2>&1
  "$bin" trace "$d" --backend cpu --tokens 1,2,3 -q --out "$tmp/rd-without.h5" --force >/dev/null 2>&1
  a=$("$bin" show "$tmp/rd-with.h5" --csv --stage 'layers.1.mlp.experts' 2>&1); b=$("$bin" show "$tmp/rd-without.h5" --csv --stage 'layers.1.mlp.experts' 2>&1)
  if [ -n "$a" ] && [ "$a" = "$b" ] && ! grep -q routed_scaling_factor "$d/config.json"; then pass=$((pass + 1)); else
    echo "FAIL $fam without routed_scaling_factor/scoring_func: the experts' rows differ from the run with the defaults: $a / $b"; fail=$((fail + 1)); fi
done
# --tokens: an empty entry, spaces, a sign are refused, not skipped
run "--tokens 1,,2" 2 "an empty entry in '1,,2'" -- trace "$root/golden/clean-v4" --tokens 1,,2 "${T[@]}"
run "--tokens 1,2," 2 "an empty entry" -- trace "$root/golden/clean-v4" --tokens 1,2, "${T[@]}"
run "--tokens '1 2'" 2 "separated by commas, without spaces" -- trace "$root/golden/clean-v4" --tokens "1 2" "${T[@]}"
run "--tokens +5" 2 "'+5' is not a token id" -- trace "$root/golden/clean-v4" --tokens +5 "${T[@]}"
# a tolerance in hexadecimal is not a number the docs allow
printf 'default:\n  cosine: {abs: 0x10}\n' >"$tmp/hex.yaml"
run "tolerance 0x10" 2 "hex.yaml.*must be a number" -- compare "$tmp/rt.h5" "$tmp/rt.h5" --tolerances "$tmp/hex.yaml"
# the gate compares like with like: a run under another stack than its golden is not comparable
"$bin" trace "$root/golden/clean-v4" --backend cpu --stack vllm --out "$tmp/vllm.h5" >/dev/null 2>&1
"$bin" trace "$root/golden/clean-v4" --backend cpu --out "$tmp/exact.h5" >/dev/null 2>&1
run "compare across stacks" 2 "not comparable: made under stacks vllm and exact" -- compare "$tmp/vllm.h5" "$tmp/exact.h5"
# a replay under a TMPDIR too long for its files: exit 2 naming TMPDIR (it cut the path: exit 2 "cannot open recipe", or 3)
"$bin" trace "$root/golden/seed-bug-v4" --backend cpu --tokens 1,2,3 --out "$tmp/sb.h5" >/dev/null 2>&1
"$bin" repro "$tmp/sb.h5" --out "$tmp/sb-bundle.h5" >/dev/null 2>&1
longtmp="/tmp/$(printf 'x%.0s' $(seq 1 4090))"
TMPDIR="$longtmp" run "replay under a 4 KB TMPDIR" 2 "TMPDIR is 4095 bytes long" -- replay "$tmp/sb-bundle.h5"
# the trace stores the whole checkpoint path (it kept 511 bytes, and repro then looked elsewhere)
deep="$tmp"; for i in 1 2 3; do deep="$deep/$(printf 'd%.0s' $(seq 1 190))"; done
mkdir -p "$deep" && cp "$root/golden/clean-v4/model.safetensors" "$deep/model.safetensors" && cp "$root/golden/clean-v4/config.json" "$deep/"
"$bin" trace "$deep" --backend cpu --tokens 1,2 --out "$tmp/deep.h5" >/dev/null 2>&1
run "a 600-byte checkpoint path kept whole" 0 "\"checkpoint\": \"$deep\"" -- show "$tmp/deep.h5" --json
# escapes from arguments never reach the terminal raw
E=$(printf 'x\033]0;t\007\033[31m')
run "explain with an escape" 2 'x\\x1b' -- explain "scale$E"
run "an unknown command with an escape" 2 'x\\x1b' -- "cmd$E"
if grep -q "$(printf '\033')" "$tmp/out"; then echo "FAIL: raw ESC in an error"; fail=$((fail + 1)); else pass=$((pass + 1)); fi
# a recipe's stage name with a control character (it reached show --csv raw): refused at load
sed 's/{stage: "layers.{L}.input_layernorm"/{stage: "layers.{L}.input\\e]0;pwn\\a_layernorm"/' "$root/recipes/deepseek_v4.yaml" >"$tmp/esc-recipe.yaml"
grep -q 'pwn' "$tmp/esc-recipe.yaml" || echo "corpus: the stage name was not changed" >&2
run "a stage name with ESC" 2 "esc-recipe.yaml:[0-9]*: .stage. holds a control character" -- trace "$root/golden/clean-v4" --recipe "$tmp/esc-recipe.yaml" "${T[@]}"
# a sliding window the recipe does not model (Llama's attends to every earlier token): refused once the
# prompt is longer than the window, accepted when use_sliding_window turns it off (Qwen's configs)
for sw in win off; do
  mkdir -p "$tmp/sw-$sw"; cp "$root/golden/conformance/llama/nvfp4/model.safetensors" "$tmp/sw-$sw/model.safetensors"
  extra='"sliding_window": 4,'; [ $sw = off ] && extra='"sliding_window": 4, "use_sliding_window": false,'
  sed "1s/^{/{$extra/" "$root/golden/conformance/llama/nvfp4/config.json" >"$tmp/sw-$sw/config.json"
done
run "sliding_window 4 under an 8-token prompt" 2 "config.json: sliding_window 4, and the prompt has 8 tokens: recipe llama attends to every earlier token" -- trace "$tmp/sw-win" --tokens 1,2,3,4,5,6,7,8 "${T[@]}"
run "... with use_sliding_window false" 0 "no divergence" -- trace "$tmp/sw-off" --tokens 1,2,3,4,5,6,7,8 "${T[@]}"
run "... a prompt within the window" 0 "no divergence" -- trace "$tmp/sw-win" --tokens 1,2,3,4 "${T[@]}"
# --- the ninth review's cases ---
"$bin" synth "$tmp/n9" --recipe llama -q >/dev/null 2>&1
run "--reference-checkpoint naming the checkpoint itself" 2 "is itself quantized (compressed-tensors, like the checkpoint)" -- trace "$tmp/n9" --reference-checkpoint "$tmp/n9" --tokens 1,2 "${T[@]}"
# an original whose config.json describes another model than the checkpoint's (round 19): the
# reference would run under one of the two configs and hide it; exit 2 naming the key
for ed in 'rms_norm_eps|0.05' 'hidden_act|"gelu"' 'rope_theta|50000.0' 'num_key_value_heads|1'; do
  k="${ed%%|*}"; v="${ed#*|}"; mkdir -p "$tmp/n9o-$k"; cp "$tmp/n9/original/"* "$tmp/n9o-$k/"
  sed -i "s/^\( *\"$k\": \)[^,]*,/\1$v,/" "$tmp/n9o-$k/config.json"
  grep -q "\"$k\": $v" "$tmp/n9o-$k/config.json" || echo "corpus: $k not set in the original's copy" >&2
  run "--reference-checkpoint whose config.json differs ($k)" 2 "n9o-$k: its config.json gives $k = .* where .*n9/config.json gives" -- trace "$tmp/n9" --reference-checkpoint "$tmp/n9o-$k" --tokens 1,2 "${T[@]}"
done
run "--reference-checkpoint with the same model" 0 "no divergence" -- trace "$tmp/n9" --reference-checkpoint "$tmp/n9/original" --tokens 1,2 "${T[@]}"
deq=(); for l in 0 1; do for m in self_attn.q_proj self_attn.k_proj self_attn.v_proj self_attn.o_proj mlp.gate_proj mlp.up_proj mlp.down_proj; do deq+=(--inject "dequantize@layers.$l.$m"); done; done
"$bin" synth "$tmp/n9deq" --from "$tmp/n9" "${deq[@]}" >/dev/null 2>&1
run "a quantization config over dense weights: trace" 2 "format compressed-tensors, but no module holds quantized tensors" -- trace "$tmp/n9deq" --tokens 1,2 "${T[@]}"
run "... and inspect" 1 "quant_config_mismatch : config.json declares a quantized checkpoint (compressed-tensors), but none of its 16 modules" -- inspect "$tmp/n9deq"
for v in 2 -5 "" 0x1p-1 1e-400; do
  run "bisect --min-cosine '$v'" 2 "--min-cosine .*expected a cosine in \[-1, 1\], in decimal" -- bisect "$tmp/n9" --tokens 1,2 --min-cosine "$v"
done
for v in 0x10 1e-400 ""; do
  run "sensitivity --budget-kl '$v'" 2 "--budget-kl .*expected a KL in nats" -- sensitivity "$tmp/n9" --tokens 1,2 --budget-kl "$v"
done
run "trace --stacks=" 2 "--stacks '': names no stack" -- trace "$tmp/n9" --tokens 1,2 --stacks= "${T[@]}"
run "trace --stacks=," 2 "names no stack" -- trace "$tmp/n9" --tokens 1,2 --stacks=, "${T[@]}"
for v in abc -1 ""; do run "trace --device '$v'" 2 "--device .*expected a device index" -- trace "$tmp/n9" --tokens 1,2 --device "$v" "${T[@]}"; done
# a file replaced keeps its permissions; paths are escaped in the "written to" lines
"$bin" trace "$tmp/n9" --backend cpu --tokens 1,2 --out "$tmp/p600.h5" >/dev/null 2>&1; chmod 600 "$tmp/p600.h5"
run "trace --force over a 0600 trace" 0 "trace written to" -- trace "$tmp/n9" --tokens 1,2 --out "$tmp/p600.h5" --backend cpu --force
[ "$(stat -c %a "$tmp/p600.h5")" = 600 ] && pass=$((pass + 1)) || { echo "FAIL: the replaced trace is $(stat -c %a "$tmp/p600.h5"), not 600"; fail=$((fail + 1)); }
run "an escape in --out" 0 'trace written to .*x1b\[31m' -- trace "$tmp/n9" --tokens 1,2 --backend cpu --out "$tmp/e$(printf '\033')[31m.h5"
if grep -q "$(printf '\033')" "$tmp/out"; then echo "FAIL: raw ESC in trace's output"; fail=$((fail + 1)); else pass=$((pass + 1)); fi
# a tagged tolerance (!!str 1) is refused, not read as the number
printf 'default:\n  cosine: {abs: !!str 1}\n' >"$tmp/tag.yaml"
run "tolerance !!str 1" 2 "tag.yaml:2: an explicit YAML tag" -- compare "$tmp/rt.h5" "$tmp/rt.h5" --tolerances "$tmp/tag.yaml"
# synth --force over a 0700 folder of its own output keeps the folder private
"$bin" synth "$tmp/s700" --recipe llama -q >/dev/null 2>&1; chmod 700 "$tmp/s700"
run "synth --force over a 0700 folder" 0 "wrote" -- synth "$tmp/s700" --recipe llama --force
[ "$(stat -c %a "$tmp/s700")" = 700 ] && pass=$((pass + 1)) || { echo "FAIL: the replaced synth folder is $(stat -c %a "$tmp/s700"), not 700"; fail=$((fail + 1)); }
# attention_bias: true over a checkpoint without biases (its q_proj has none): not this model
mkdir -p "$tmp/abias"; cp "$root/golden/conformance/llama/nvfp4/model.safetensors" "$tmp/abias/model.safetensors"
sed 's/"attention_bias": false/"attention_bias": true/' "$root/golden/conformance/llama/nvfp4/config.json" >"$tmp/abias/config.json"
run "attention_bias true without biases" 2 "config.json: attention_bias is true, but model.layers.0.self_attn.q_proj has no bias tensor" -- trace "$tmp/abias" --tokens 1,2 "${T[@]}"
# mlp_bias: true without MLP biases, an intermediate_size the MLP weights do not have (round 14)
mkdir -p "$tmp/mbias" "$tmp/isize"
cp "$root/golden/conformance/llama/nvfp4/model.safetensors" "$tmp/mbias/model.safetensors"
cp "$root/golden/conformance/llama/nvfp4/model.safetensors" "$tmp/isize/model.safetensors"
sed 's/"mlp_bias": false/"mlp_bias": true/' "$root/golden/conformance/llama/nvfp4/config.json" >"$tmp/mbias/config.json"
sed 's/"intermediate_size": 128,/"intermediate_size": 64,/' "$root/golden/conformance/llama/nvfp4/config.json" >"$tmp/isize/config.json"
run "mlp_bias true without biases" 2 "config.json: mlp_bias is true, but model.layers.0.mlp.down_proj has no bias tensor" -- trace "$tmp/mbias" --tokens 1,2 "${T[@]}"
run "intermediate_size unlike the weights" 2 "config.json: intermediate_size is 64, but model.layers.0.mlp.down_proj takes 128 inputs" -- trace "$tmp/isize" --tokens 1,2 "${T[@]}"
run "inspect: intermediate_size unlike the weights" 1 "unreplayable" -- inspect "$tmp/isize"
# config.json widths and counts against the tensors (round 15): each another model than the weights
cfg_case() { # name fixture sed-expression expected
  local d="$tmp/cfg-$1"; mkdir -p "$d"
  for f in "$root/$2"/*.safetensors; do cp "$f" "$d/"; done
  sed "$3" "$root/$2/config.json" >"$d/config.json"
  cmp -s "$d/config.json" "$root/$2/config.json" && echo "corpus: $1 did not change the config" >&2
  run "config $1" 2 "$4" -- trace "$d" --tokens 1,2 "${T[@]}"
}
cfg_case hidden golden/conformance/llama/nvfp4 's/"hidden_size": 64,/"hidden_size": 128,/' "hidden_size is 128, but model.embed_tokens has rows of 64"
cfg_case layers golden/conformance/llama/nvfp4 's/"num_hidden_layers": 2,/"num_hidden_layers": 1,/' "num_hidden_layers is 1, but the checkpoint holds model.layers.1."
cfg_case tie golden/conformance/llama/nvfp4 's/"tie_word_embeddings": false/"tie_word_embeddings": true/' "tie_word_embeddings is true, but lm_head is not model.embed_tokens"
cfg_case moeisz golden/conformance/qwen3_moe/nvfp4 's/"moe_intermediate_size": 32,/"moe_intermediate_size": 64,/' "moe_intermediate_size is 64, but model.layers.1.mlp.experts.0.down_proj takes inputs 32"
cfg_case mlponly golden/conformance/qwen3_moe/nvfp4 '/"mlp_only_layers": \[/,/\]/c\  "mlp_only_layers": [0, 1],' "makes layer 1 dense, but the checkpoint's layer 1 holds routed experts"
cfg_case nshared golden/clean-v4 's/"n_shared_experts": 1,/"n_shared_experts": 3,/' "n_shared_experts 3 x moe_intermediate_size 32 is 96"
# attention_bias false over a checkpoint that holds q/k/v biases (round 18): no loader that follows the
# config reads them, so replaying them judged another model
cfg_case attnbias-false golden/conformance/glm4/nvfp4 's/"attention_bias": true,/"attention_bias": false,/' "attention_bias is false, but model.layers.0.self_attn.q_proj has a bias tensor"
cfg_case greedy golden/conformance/deepseek_v3/nvfp4 '1s/^{/{"topk_method": "greedy",/' "config.json: key 'topk_method' is \"greedy\", a selection this version does not replay"
# wrong config values refused naming config.json and the key (round 19)
cfg_case kvlora golden/conformance/deepseek_v3/nvfp4 's/"kv_lora_rank": 32,/"kv_lora_rank": 16,/' "config.json.*kv_lora_rank"
cfg_case nexp0 golden/conformance/deepseek_v4/nvfp4 's/"n_routed_experts": 4,/"n_routed_experts": 0,/' "config.json: n_routed_experts is 0, but the checkpoint holds routed experts"
cfg_case ogroups0 golden/conformance/deepseek_v4/nvfp4 's/"o_groups": 2,/"o_groups": 0,/' "config.json: o_groups 0 x o_lora_rank 16 is 0"
cfg_case scorex golden/conformance/deepseek_v4/nvfp4 's/"scoring_func": "sqrtsoftplus",/"scoring_func": "x",/' "config.json: key 'scoring_func' is \"x\""
# widths a loader builds modules from, against the tensors (round 19)
cfg_case sei golden/conformance/qwen3_next/nvfp4 's/"shared_expert_intermediate_size": 32,/"shared_expert_intermediate_size": 64,/' "shared_expert_intermediate_size is 64, but model.layers.[0-9].mlp.shared_expert.down_proj takes inputs 32"
cfg_case convk golden/conformance/qwen3_next/nvfp4 's/"linear_conv_kernel_dim": 4,/"linear_conv_kernel_dim": 3,/' "linear_conv_kernel_dim is 3, but .*linear_attn.conv1d.weight has a kernel of 4"
cfg_case mixisz golden/conformance/mixtral/nvfp4 's/"intermediate_size": 32,/"intermediate_size": 64,/' "intermediate_size is 64, but .*experts.0.* takes inputs 32"
cfg_case olora golden/conformance/deepseek_v4/nvfp4 's/"o_lora_rank": 16,/"o_lora_rank": 32,/' "o_groups 2 x o_lora_rank 32 is 64, but model.layers.0.attn.wo_a has rows 32"
# rope_theta both at the top level and in rope_parameters, different (round 19): transformers 4 and 5
# build different models from the file
cfg_case rope-both golden/conformance/llama/nvfp4 's/"rope_parameters": {/"rope_theta": 500000.0, "rope_parameters": {/' "key 'rope_theta' is 500000 at the top level but 10000 in 'rope_parameters'"
cfg_case qknorm-true golden/conformance/glm4_moe/nvfp4 's/"use_qk_norm": false,/"use_qk_norm": true,/' "use_qk_norm is true, but layer 0 has no q/k norm weights"
# Qwen3-Next's hybrid attention: the config's layer kinds against the layers' tensors (round 18)
cfg_case qnext-swap golden/conformance/qwen3_next/nvfp4 '17s/linear_attention/full_attention/; 18s/full_attention/linear_attention/' "layer_types\[0\] is full_attention, but the checkpoint's layer 0 holds Gated DeltaNet (linear_attn) tensors"
cfg_case qnext-kind golden/conformance/qwen3_next/nvfp4 '17s/linear_attention/sliding_attention/' "layer_types\[0\] is 'sliding_attention', not linear_attention or full_attention"
cfg_case qnext-interval golden/conformance/qwen3_next/nvfp4 '/"layer_types": \[/,/\],/d; s/"intermediate_size": 128,/"intermediate_size": 128, "full_attention_interval": 3,/' "full_attention_interval 3 makes layer 1 linear attention, but the checkpoint's layer 1 holds softmax attention"
# head counts that contradict the projections (round 18): the op's refusal names config.json and the keys
cfg_case heads8 golden/conformance/llama/nvfp4 's/"num_attention_heads": 4,/"num_attention_heads": 8,/' "sizes from .*config.json: num_attention_heads 8, head_dim 16.*the config does not describe these weights"
# two config groups naming the same target: vLLM keeps the last one's scheme (FP8 per channel here),
# which the NVFP4 tensors contradict (round 16)
d="$tmp/cfg-groups2"; mkdir -p "$d"; cp "$root/golden/conformance/llama/nvfp4/model.safetensors" "$d/"
sed '/^      }$/{N; s/^      }\n    },$/      },\n      "group_1": {"format": "float-quantized", "targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false}, "input_activations": null}\n    },/}' \
  "$root/golden/conformance/llama/nvfp4/config.json" >"$d/config.json"
run "config groups: a later group names the same target" 1 "quant_config_mismatch" -- inspect "$d"
# which layers are sparse, as transformers builds them from the config, against the layers' tensors
cfg_case mlponly-none golden/conformance/qwen3_moe/nvfp4 '/"mlp_only_layers": \[/,/\]/c\  "mlp_only_layers": [],' "makes layer 0 sparse (routed experts), but the checkpoint's layer 0 holds a dense MLP"
cfg_case sparse-step0 golden/conformance/qwen3_moe/nvfp4 's/"decoder_sparse_step": 1,/"decoder_sparse_step": 0,/' "decoder_sparse_step is not a whole number of at least 1"
cfg_case fkd0 golden/conformance/deepseek_v3/nvfp4 's/"first_k_dense_replace": 1,/"first_k_dense_replace": 0,/' "makes layer 0 sparse (routed experts), but the checkpoint's layer 0 holds a dense MLP"
cfg_case fkd2 golden/conformance/glm4_moe/nvfp4 's/"first_k_dense_replace": 1,/"first_k_dense_replace": 2,/' "makes layer 1 dense, but the checkpoint's layer 1 holds routed experts"
cfg_case hash0 golden/clean-v4 's/"num_hash_layers": 1,/"num_hash_layers": 0,/' "num_hash_layers is 0, but the checkpoint's layer 0 holds a hash router table"
cfg_case csa-both golden/clean-v4 's/"sliding_attention",/"compressed_sparse_attention",/; s/^    0,$/    4,/' "layer_types\[0\] is compressed_sparse_attention, but the checkpoint's layer 0 has no compressor"
# DeepSeek-V4's attention kinds (round 16): HCA holds no Lightning indexer; layer_types (transformers)
# and compress_ratios (DeepSeek's and vLLM's code) must build the same model; mlp_layer_types
# (transformers 5) over num_hash_layers
cfg_case hca-indexer golden/clean-v4 's/"compressed_sparse_attention"$/"heavily_compressed_attention"/; s/^    4$/    8/' "layer_types\[1\] is heavily_compressed_attention, but the checkpoint's layer 1 holds a Lightning indexer"
cfg_case ratios-types golden/clean-v4 's/^    4$/    128/' "layer_types\[1\] is compressed_sparse_attention (compress rate 4), but compress_ratios\[1\] is 128"
cfg_case ratios-only golden/clean-v4 '/"layer_types": \[/,/\],/d; s/^    4$/    8/' "compress_ratios\[1\] is 8, but the checkpoint's layer 1 holds a Lightning indexer"
cfg_case mlptypes golden/clean-v4 's/"num_hash_layers": 1,/"mlp_layer_types": ["moe", "moe"],/' "mlp_layer_types\[0\] is moe, but the checkpoint's layer 0 holds a hash router table"
cfg_case mlptypes-hash golden/clean-v4 's/"num_hash_layers": 1,/"num_hash_layers": 1, "mlp_layer_types": ["hash_moe", "hash_moe"],/' "mlp_layer_types\[1\] is hash_moe but num_hash_layers is 1"
cfg_case types3 golden/clean-v4 's/"compressed_sparse_attention"$/"compressed_sparse_attention", "sliding_attention"/' "layer_types has 3 entries for 2 layers"
cfg_case qlora golden/clean-v4 's/"q_lora_rank": 32,/"q_lora_rank": 64,/' "q_lora_rank is 64, but model.layers.0.self_attn.q_a_proj has rows 32"
# a compressed-tensors group against its NVFP4 tensors (round 17): the group's own format (which
# loaders read first), the top-level one, 4-bit activations in another strategy, a weight-only
# group over tensors that carry input scales (a warning: the model serves W4A16), and blocks the
# replay does not model (an online transform, bitmask-sparse weights: refused, never skipped)
qcfg_case() { # name sed-expression command exit expected
  local d="$tmp/qcfg-$1"; mkdir -p "$d"
  cp "$root/golden/conformance/llama/nvfp4/model.safetensors" "$d/"
  sed "$2" "$root/golden/conformance/llama/nvfp4/config.json" >"$d/config.json"
  cmp -s "$d/config.json" "$root/golden/conformance/llama/nvfp4/config.json" && echo "corpus: $1 did not change the config" >&2
  if [ "$3" = trace ]; then run "qcfg $1 ($3)" "$4" "$5" -- trace "$d" --tokens 1,2 "${T[@]}"; else run "qcfg $1 ($3)" "$4" "$5" -- "$3" "$d"; fi
}
qcfg_case grpfmt '26s/nvfp4-pack-quantized/float-quantized/' inspect 1 "config_groups.group_0 says its format float-quantized (another packing"
qcfg_case grpfmt '26s/nvfp4-pack-quantized/float-quantized/' trace 1 "quant_config_mismatch"
qcfg_case grpjunk '26s/nvfp4-pack-quantized/no-such-format/' inspect 1 "its format no-such-format (not a compressed-tensors format"
qcfg_case topfmt '61s/nvfp4-pack-quantized/float-quantized/; 26d' inspect 1 "says quantization_config.format float-quantized (another packing"
qcfg_case intoken '36s/tensor_group/token/' inspect 1 "input_activations.strategy token (NVFP4 activations are tensor_group)"
qcfg_case w4a16 '27,40d' inspect 0 "warning quant_config_mismatch .*has no input_activations (weights only, W4A16)"
qcfg_case transform 's/"transform_config": {},/"transform_config": {"config_groups": {"u": {"type": "hadamard", "apply": [{"targets": ["Linear"], "location": "input"}]}}},/' trace 2 "config.json: 'quantization_config.transform_config' applies transforms"
qcfg_case sparse24 's/"sparsity_config": {},/"sparsity_config": {"format": "sparse-24-bitmask", "targets": ["Linear"]},/' inspect 2 "'quantization_config.sparsity_config' has format \"sparse-24-bitmask\""
qcfg_case sparsedense 's/"sparsity_config": {},/"sparsity_config": {"format": "dense", "targets": ["Linear"]},/' inspect 0 "findings: 0 errors, 0 warnings"
# output activations quantized, a quantization_status no tool writes or one that says the weights are
# not packed (round 18): refused, not replayed as the plain config
qcfg_case outact '41s/"output_activations": null,/"output_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": true},/' inspect 2 "config_groups.group_0.output_activations' quantizes the linears' outputs"
qcfg_case qstatus '68s/"compressed"/"banana"/' inspect 2 "quantization_status' is \"banana\", not a compressed-tensors status"
qcfg_case qfrozen '68s/"compressed"/"frozen"/' trace 2 "quantization_status' is \"frozen\" (weights stored unpacked), but the format is nvfp4-pack-quantized"
# KV caches the replay does not model (round 18): refused naming the key, not replayed as BF16
qcfg_case kvfp4 's/"kv_cache_scheme": null,/"kv_cache_scheme": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": false},/' inspect 2 "'quantization_config.kv_cache_scheme' announces a float 4-bit tensor_group static KV cache, which this version does not replay"
qcfg_case kvint8 's/"kv_cache_scheme": null,/"kv_cache_scheme": {"num_bits": 8, "type": "int", "strategy": "tensor", "dynamic": false},/' trace 2 "announces a int 8-bit tensor static KV cache"
qcfg_case kvhead 's/"kv_cache_scheme": null,/"kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "attn_head", "dynamic": false},/' inspect 2 "float 8-bit attn_head static KV cache"
for algo in NVFP4 BANANA; do
  d="$tmp/mo-kv-$algo"; mkdir -p "$d"
  cp "$root/golden/conformance/llama/modelopt/model.safetensors" "$root/golden/conformance/llama/modelopt/config.json" "$d/"
  sed "s/\"kv_cache_quant_algo\": null,/\"kv_cache_quant_algo\": \"$algo\",/" "$root/golden/conformance/llama/modelopt/hf_quant_config.json" >"$d/hf_quant_config.json"
  run "modelopt kv_cache_quant_algo $algo" 2 "kv_cache_quant_algo' is \"$algo\"" -- inspect "$d"
done
# ModelOpt: config.json's quantization_config against hf_quant_config.json (round 15): vLLM and
# transformers read the first, TensorRT-LLM and this tool the second
mo_case() { # name sed-expression expected
  local d="$tmp/mo-$1"; mkdir -p "$d"
  cp "$root/golden/conformance/llama/modelopt/model.safetensors" "$d/"
  cp "$root/golden/conformance/llama/modelopt/hf_quant_config.json" "$d/"
  sed "$2" "$root/golden/conformance/llama/modelopt/config.json" >"$d/config.json"
  run "modelopt $1" 2 "$3" -- inspect "$d"
}
mo_case algo 's/"quant_algo": "NVFP4"/"quant_algo": "W4A16_NVFP4"/' "quantization_config.quant_algo is W4A16_NVFP4, but .*hf_quant_config.json says NVFP4"
mo_case method 's/"quant_method": "modelopt"/"quant_method": "compressed-tensors"/' "quant_method is \"compressed-tensors\", but .*hf_quant_config.json is ModelOpt's"
mo_case ignore 's/"lm_head",/"lm_head", "model.layers.0.self_attn.q_proj",/' "quantization_config excludes 'model.layers.0.self_attn.q_proj' from quantization and .*hf_quant_config.json does not"
# NVFP4_AWQ over a checkpoint where no module holds its pre_quant_scale (round 19): the weights hold
# W x diag(s), and an exporter folds s into the layer before for some modules, never for all
d="$tmp/mo-awq-none"; mkdir -p "$d"; cp "$root/golden/conformance/llama/modelopt/model.safetensors" "$d/"
for f in config.json hf_quant_config.json; do
  sed 's/"quant_algo": "NVFP4"/"quant_algo": "NVFP4_AWQ"/' "$root/golden/conformance/llama/modelopt/$f" >"$d/$f"
done
run "modelopt NVFP4_AWQ without any pre_quant_scale (inspect)" 1 "says NVFP4_AWQ for 14 NVFP4 modules, but none holds its AWQ pre_quant_scale" -- inspect "$d"
run "modelopt NVFP4_AWQ without any pre_quant_scale (trace)" 1 "quant_config_mismatch" -- trace "$d" --tokens 1,2 "${T[@]}"
# ModelOpt's microscaling algorithms (W4A8_MXFP4_FP8, MXFP8: U8 E8M0 scales per 32) are refused by
# name, not read as NVFP4 and refused for a dtype (issue 33)
for algo in W4A8_MXFP4_FP8 MXFP8; do
  d="$tmp/mo-mx-$algo"; mkdir -p "$d"
  cp "$root/golden/conformance/llama/modelopt/model.safetensors" "$d/"
  for f in config.json hf_quant_config.json; do
    sed "s/\"quant_algo\": \"NVFP4\"/\"quant_algo\": \"$algo\"/" "$root/golden/conformance/llama/modelopt/$f" >"$d/$f"
  done
  run "modelopt $algo" 2 "quantized with ModelOpt's $algo .*a microscaling scheme" -- trace "$d" --tokens 1,2 "${T[@]}"
done
# model.safetensors beside an index whose shards are others: transformers and vLLM load different files
mkdir -p "$tmp/both"
cp "$root/golden/conformance/llama/nvfp4/config.json" "$tmp/both/"
cp "$root/golden/conformance/llama/nvfp4/model.safetensors" "$tmp/both/model.safetensors"
cp "$root/golden/conformance/llama/nvfp4/model.safetensors" "$tmp/both/model-00001-of-00001.safetensors"
hl=$(od -An -tu8 -N8 "$tmp/both/model.safetensors" | tr -d ' ')
{ printf '{"metadata": {}, "weight_map": {'
  dd if="$tmp/both/model.safetensors" bs=1 skip=8 count="$hl" 2>/dev/null | grep -o '"[^"]*":{"dtype"' | sed 's/:{"dtype"$//' |
    awk 'BEGIN { s = "" } { printf "%s%s: \"model-00001-of-00001.safetensors\"", s, $0; s = ", " }'
  printf '}}\n'; } >"$tmp/both/model.safetensors.index.json"
run "model.safetensors beside an index of other shards" 2 "holds both model.safetensors and model.safetensors.index.json" -- trace "$tmp/both" --tokens 1,2 "${T[@]}"
rm "$tmp/both/model.safetensors"
run "the same index alone" 0 "no divergence" -- trace "$tmp/both" --tokens 1,2 "${T[@]}"
# scales whose derived numbers are unusable although the stored value is finite and positive, and
# a negative real-valued FP8 weight scale (round 15): inspect errors, as trace's static fact
"$bin" synth "$tmp/mo-sub" --from "$root/golden/conformance/llama/modelopt" --inject input-scale-mul=1e38@layers.0.self_attn.q_proj >/dev/null 2>&1
"$bin" synth "$tmp/ct-huge" --from "$root/golden/conformance/llama/nvfp4" --inject weight-global-scale-mul=4e34@layers.0.self_attn.o_proj >/dev/null 2>&1
run "inspect: a ModelOpt input_scale of 1e-40" 1 "input_scale gives a quantizer multiplier of inf" -- inspect "$tmp/mo-sub"
run "inspect: a weight_global_scale of 3e38" 1 "the GEMM's output is zero" -- inspect "$tmp/ct-huge"
# a factor that takes the stored scale past float's range stores Inf, which the fault list called a
# factor (round 24): refused, naming the fault to use, nothing written
run "synth: input-scale-mul that overflows to Inf" 2 "stores model.layers.0.self_attn.q_proj.input_global_scale = inf .past float's range.: use input-scale-inf" -- \
  synth "$tmp/ovf" --recipe llama --inject input-scale-mul=3.4e38@layers.0.self_attn.q_proj
run "synth --from: the same" 2 "= inf .past float's range." -- \
  synth "$tmp/ovf2" --from "$root/golden/conformance/llama/nvfp4" --inject input-scale-mul=3.4e38@layers.0.self_attn.q_proj
cp -r "$root/golden/clean-v4" "$tmp/fp8neg"
hl=$(od -An -tu8 -N8 "$tmp/fp8neg/model.safetensors" | tr -d ' ')
off=$(dd if="$tmp/fp8neg/model.safetensors" bs=1 skip=8 count="$hl" 2>/dev/null | grep -o '"model.layers.0.self_attn.o_a_proj.weight_scale":{[^}]*}' | sed 's/.*"data_offsets":\[\([0-9]*\),.*/\1/')
printf '\000\000\200\277' | dd of="$tmp/fp8neg/model.safetensors" bs=1 seek=$((8 + hl + off)) conv=notrunc 2>/dev/null
run "inspect: a negative FP8 weight scale" 1 "o_a_proj: a weight scale is negative (min -1)" -- inspect "$tmp/fp8neg"
# values stored broken where no repair helps (round 17): the cause names the tensor (SPEC 7: the
# checkpoint itself is broken), and a weight that decodes to zeros on both paths is an error
patch_v4() { # name tensor printf-bytes: a copy of clean-v4 with the tensor's first bytes replaced
  cp -r "$root/golden/clean-v4" "$tmp/$1"
  local hl off
  hl=$(od -An -tu8 -N8 "$tmp/$1/model.safetensors" | tr -d ' ')
  off=$(dd if="$tmp/$1/model.safetensors" bs=1 skip=8 count="$hl" 2>/dev/null | grep -o "\"$2\":{[^}]*}" | sed 's/.*"data_offsets":\[\([0-9]*\),.*/\1/')
  printf "$3" | dd of="$tmp/$1/model.safetensors" bs=1 seek=$((8 + hl + off)) conv=notrunc 2>/dev/null
}
patch_v4 normnan model.layers.0.self_attn.q_a_norm.weight '\300\177'
# a hash router row naming an expert outside the model (round 19): found by inspect, whatever the prompt
patch_v4 tid99 model.layers.0.mlp.gate.tid2eid '\143\000\000\000'
run "inspect: a tid2eid row naming expert 99" 1 "hash_table_invalid .*token 0's row names expert 99, outside the model's experts" -- inspect "$tmp/tid99"
run "a NaN stored in a norm weight: the cause names it" 1 "static fact (nonfinite_weight): model.layers.0.self_attn.q_a_norm.weight (BF16) holds 1 NaN and 0 Inf" -- trace "$tmp/normnan" "${T[@]}" --json
patch_v4 fp8nan model.layers.0.self_attn.o_a_proj.weight_scale '\000\000\300\177'
run "a NaN FP8 block scale: the cause is nan_weight_scale" 1 '"cause": "nan_weight_scale"' -- trace "$tmp/fp8nan" "${T[@]}" --json
patch_v4 fp8zero model.layers.0.self_attn.o_a_proj.weight_scale '\000\000\000\000'
run "inspect: every FP8 weight scale zero" 1 "o_a_proj: every one of the 1 weight scales is zero" -- inspect "$tmp/fp8zero"
run "trace: every FP8 weight scale zero (both paths output zeros)" 1 "a clean replay cannot" -- trace "$tmp/fp8zero" "${T[@]}"
# synth's --force takes no value: -q after it is the quiet switch
run "synth --force -q" 0 "wrote" -- synth "$tmp/sq" --recipe llama --force -q

# 10. the tenth review (issue 37)
# replay escapes the bundle's row strings (name, mode, verdict) before the terminal
"$mk_lie" "$tmp/lie-b.h5" "$tmp/esc-b.h5" esc
run "replay of a bundle with escapes in its rows" 1 "original" -- replay "$tmp/esc-b.h5" --backend cpu
grep -q "$(printf '\033')" "$tmp/out" && { echo "FAIL: replay printed a raw ESC"; fail=$((fail + 1)); } || pass=$((pass + 1))
grep -qF 'ok\x1b]0;T\x07' "$tmp/out" && pass=$((pass + 1)) || { echo "FAIL: replay does not show the escaped verdict: $(head -c 300 "$tmp/out")"; fail=$((fail + 1)); }
# an override of a parameter the stage has but does not apply (round 21): an unquantized linear's
# quantizer multiplier, alpha or global scale, a BF16 KV cache's scale use: the run tests nothing
for ovr in lm_head.quant_mult=1e-30 lm_head.alpha=1e30 lm_head.weight_global_scale=0.5 layers.0.self_attn.kv_cache.kv_scales=2; do
  run "override of a parameter the stage does not apply ($ovr)" 2 "override ${ovr%%=*} matched no checkpoint scale or stage parameter.*the run tests nothing" \
    -- trace "$root/golden/conformance/llama/nvfp4" --override "$ovr" --tokens 1,2,3 "${T[@]}"
done
run "override of a quantized linear's multiplier still applies" 1 "" -- trace "$root/golden/conformance/llama/nvfp4" --override layers.0.self_attn.q_proj.quant_mult=1e-30 --tokens 1,2,3 "${T[@]}"
# a stack behaviour the recipe does not model (round 22): gate_up_order w31 on Phi-3 / GLM-4, whose MLP is
# a fused gate_up_proj, a split and a gate_mul (no stage consults the knob): not "no divergence"
for fam in phi3 glm4; do
  run "$fam under gate_up_order w31" 2 "stack sglang-megamoe-w31 reads fused gate/up halves in W31 order .* no stage of recipe $fam consults it" \
    -- trace "$root/golden/conformance/$fam/nvfp4" --stack sglang-megamoe-w31 --tokens 1,2,3 "${T[@]}"
done
# an override that matches nothing tests nothing: repro and replay refuse it, as trace does
run "repro with a misspelt override knob" 2 "matched no checkpoint scale or stage parameter.*the bundle would test nothing" -- repro "$tmp/lie-t.h5" --out "$tmp/typo-b.h5" --override model.layers.0.self_attn.q_a_proj.input_global_scal=3
[ -e "$tmp/typo-b.h5" ] && { echo "FAIL: repro wrote a bundle with the typo"; fail=$((fail + 1)); } || pass=$((pass + 1))
run "repro with an override of a later layer" 2 "the bundle would test nothing" -- repro "$tmp/lie-t.h5" --out "$tmp/l1-b.h5" --override model.layers.1.self_attn.q_a_proj.input_global_scale=5
run "replay with a misspelt override knob" 2 "lie-b.h5: .*matched no checkpoint scale or stage parameter.*the replay tests nothing" -- replay "$tmp/lie-b.h5" --backend cpu --override layers.0.self_attn.q_a_proj.quant_mlt=958.4
# $NVFP4DBG_RECIPES that is not a folder: refused, never replaced by other recipes
NVFP4DBG_RECIPES="$tmp/no-such-folder" run "NVFP4DBG_RECIPES not there" 2 "NVFP4DBG_RECIPES=.*no-such-folder: No such file" -- trace "$root/golden/clean-v4" "${T[@]}"
NVFP4DBG_RECIPES="$tmp/tol.yaml" run "NVFP4DBG_RECIPES a file" 2 "NVFP4DBG_RECIPES=.*tol.yaml: not a folder" -- inspect "$root/golden/clean-v4"
# a /prompt written as h5py writes it (NULLPAD, filling its size): read whole
run "a NULLPAD prompt" 0 "prompt: hello world" -- show "$tmp/prompt-nullpad.h5"
# a bundle of a private checkpoint is private: at most the source's permission bits, whatever the umask
cp -r "$root/golden/seed-bug-v4" "$tmp/priv"; chmod 700 "$tmp/priv"; chmod 600 "$tmp/priv"/*.json "$tmp/priv"/*.safetensors
(umask 022; "$bin" trace "$tmp/priv" --backend cpu --out "$tmp/priv-t.h5" >/dev/null 2>&1; "$bin" repro "$tmp/priv-t.h5" --out "$tmp/priv-b.h5" >/dev/null 2>&1)
[ "$(stat -c %a "$tmp/priv-t.h5" 2>/dev/null)" = 600 ] && [ "$(stat -c %a "$tmp/priv-b.h5" 2>/dev/null)" = 600 ] && pass=$((pass + 1)) ||
  { echo "FAIL: trace/bundle of a 0600 checkpoint are $(stat -c %a "$tmp/priv-t.h5" "$tmp/priv-b.h5" 2>&1 | tr '\n' ' '), not 600"; fail=$((fail + 1)); }
# a --recipe-out folder from a shared (0644/0755) checkpoint stays enterable (0755 under umask 022)
cp -r "$root/golden/clean-v4" "$tmp/shared"; chmod 755 "$tmp/shared"; chmod 644 "$tmp/shared"/*.json "$tmp/shared"/*.safetensors
(umask 022; "$bin" sensitivity "$tmp/shared" --keep 1 --recipe-out "$tmp/shared-ro" --backend cpu -q >/dev/null 2>&1)
[ "$(stat -c %a "$tmp/shared-ro" 2>/dev/null)" = 755 ] && pass=$((pass + 1)) || { echo "FAIL: --recipe-out folder of a shared checkpoint is $(stat -c %a "$tmp/shared-ro" 2>&1), not 755"; fail=$((fail + 1)); }
# sensitivity --recipe-out never writes into an input folder (the recipes', a tokenizer's)
cp -r "${NVFP4DBG_RECIPES:-$root/recipes}" "$tmp/rc"; mkdir -p "$tmp/tkd"; cp "$root"/golden/clean-v4/tokenizer*.json "$tmp/tkd/"
NVFP4DBG_RECIPES="$tmp/rc" run "sensitivity --recipe-out in the recipes folder" 2 "is inside the input folder" -- sensitivity "$root/golden/clean-v4" -q --keep 1 --recipe-out "$tmp/rc/newdir" --backend cpu
run "sensitivity --recipe-out in the tokenizer's folder" 2 "is inside the input folder" -- sensitivity "$root/golden/clean-v4" -q --keep 1 --prompt hello --tokenizer "$tmp/tkd" --recipe-out "$tmp/tkd/rr" --backend cpu
[ -e "$tmp/rc/newdir" ] || [ -e "$tmp/tkd/rr" ] && { echo "FAIL: a recipe folder was made inside an input folder"; fail=$((fail + 1)); } || pass=$((pass + 1))

# 11. the eleventh review (issue 37)
# an unknown or non-NVFP4 activation scheme over NVFP4 weights is refused, never replayed as weights only
"$bin" synth "$tmp/mo11" --recipe deepseek_v4 --format modelopt --inject input-scale-inverted@layers.0.self_attn.q_a_proj -q >/dev/null 2>&1
for a in EVIL nvfp4; do
  rm -rf "$tmp/mo11b"; cp -r "$tmp/mo11" "$tmp/mo11b"; sed -i "s/\"NVFP4\"/\"$a\"/" "$tmp/mo11b/hf_quant_config.json" "$tmp/mo11b/config.json"
  run "ModelOpt quant_algo $a" 2 "hf_quant_config.json: 'quantization.quant_algo' is \"$a\", not a ModelOpt quantization algorithm" -- trace "$tmp/mo11b" "${T[@]}"
done
rm -rf "$tmp/mo11b"; cp -r "$tmp/mo11" "$tmp/mo11b"; sed -i 's/"NVFP4"/"W4A8_AWQ"/' "$tmp/mo11b/hf_quant_config.json" "$tmp/mo11b/config.json"
run "ModelOpt INT4 algorithm over NVFP4 tensors" 2 "holds NVFP4 tensors, but the ModelOpt config (hf_quant_config.json) gives it quant_algo W4A8_AWQ" -- trace "$tmp/mo11b" "${T[@]}"
rm -rf "$tmp/ct11"; cp -r "$root/golden/seed-bug-v4" "$tmp/ct11"
perl -0pi -e 's/("input_activations":\s*\{\s*"num_bits":\s*)4/${1}8/' "$tmp/ct11/config.json"
run "compressed-tensors 8-bit activations over NVFP4 weights" 2 "input_activations' is 8-bit float over 4-bit float weights" -- trace "$tmp/ct11" "${T[@]}"
# recipe stage names and tf variants are checked when the recipe loads
sed 's|stage: "layers.{L}.self_attn.o_proj"|stage: "layers.{L}.self_attn/o_proj"|' "$root/recipes/llama.yaml" >"$tmp/slash.yaml"
run "stage name with a '/'" 2 "slash.yaml:[0-9]*: stage name 'layers.{L}.self_attn/o_proj' holds '/' or '@'" -- trace "$root/golden/conformance/llama/nvfp4" --recipe "$tmp/slash.yaml" --dump tensors "${T[@]}"
sed 's|tf: bf16_then_weight|tf: bf16_then_wieght|' "$root/recipes/llama.yaml" >"$tmp/tftypo.yaml"
run "misspelt tf variant" 2 "tftypo.yaml:[0-9]*: .*tf variant 'bf16_then_wieght' is not one of .*did you mean 'bf16_then_weight'" -- trace "$root/golden/conformance/llama/nvfp4" --recipe "$tmp/tftypo.yaml" --ref-numerics transformers "${T[@]}"
sed 's|stage: "layers.{L}.self_attn.o_proj"|stage: "layers.0.self_attn.o_proj"|' "$root/recipes/llama.yaml" >"$tmp/noL.yaml"
run "layer stage without {L}" 2 "noL.yaml: stage layers.0.self_attn.o_proj (.*) wrote its row twice" -- trace "$root/golden/conformance/llama/nvfp4" --recipe "$tmp/noL.yaml" "${T[@]}"
sed 's|stage: "layers.{L}.input_layernorm"|stage: "layers.{X}.input_layernorm"|' "$root/recipes/llama.yaml" >"$tmp/ph.yaml"
run "unknown placeholder in a stage name" 2 "ph.yaml:[0-9]*: stage name 'layers.{X}.input_layernorm' holds a placeholder other than {L}" -- trace "$root/golden/conformance/llama/nvfp4" --recipe "$tmp/ph.yaml" "${T[@]}"
# config values the replay would act on, checked
for m in 's/"noaux_tc"/"evil"/|topk_method' 's/"q_lora_rank": [0-9]*/"q_lora_rank": 0/|q_lora_rank' 's/"n_shared_experts": [0-9]*/"n_shared_experts": 0/|n_shared_experts'; do
  rm -rf "$tmp/cfg11"; cp -r "$root/golden/clean-v4" "$tmp/cfg11"; sed -i "${m%|*}" "$tmp/cfg11/config.json"
  run "config $m" 2 "config.json: .*${m#*|}" -- trace "$tmp/cfg11" "${T[@]}"
done
rm -rf "$tmp/cfg11"; cp -r "$root/golden/conformance/gemma3_text/bf16" "$tmp/cfg11"; sed -i '0,/"sliding_attention"/s//"slidng_attention"/' "$tmp/cfg11/config.json"
run "unknown layer type" 2 "config.json: key 'layer_types\[[0-9]*\]' is \"slidng_attention\", not a layer type" -- trace "$tmp/cfg11" --allow-unquantized "${T[@]}"
# token ids quoted whole; a --device the CPU cannot honour is refused
run "--tokens 0x10" 2 "'0x10' is not a token id" -- trace "$root/golden/clean-v4" --tokens 0x10 "${T[@]}"
run "--tokens 1e3" 2 "'1e3' is not a token id" -- trace "$root/golden/clean-v4" --tokens 1e3 "${T[@]}"
run "--device 7 with the CPU backend" 2 "\-\-device 7 names a CUDA device, but --backend cpu" -- trace "$root/golden/clean-v4" --device 7 "${T[@]}"

# 12. the twelfth review (issue 37): compressed-tensors fields a float scheme cannot have
rm -rf "$tmp/ct12"; cp -r "$root/golden/seed-bug-v4" "$tmp/ct12"
perl -0pi -e 's/("input_activations":\s*\{[^}]*?"group_size":\s*)16/${1}32/' "$tmp/ct12/config.json"
run "compressed-tensors activation group_size 32 over 16-blocks" 2 "config.json: .*input_activations.group_size' is 32, the weights' 16" -- inspect "$tmp/ct12"
rm -rf "$tmp/ct12"; cp -r "$root/golden/seed-bug-v4" "$tmp/ct12"
perl -0pi -e 's/("weights":\s*\{[^}]*?"symmetric":\s*)true/${1}false/' "$tmp/ct12/config.json"
run "compressed-tensors float weights with symmetric false" 2 "config.json: .*weights.symmetric' is false for a float format" -- inspect "$tmp/ct12"
# a ModelOpt module that fails to bind: trace names its reason, not "no quantized module"
rm -rf "$tmp/w16"; cp -r "$root/golden/conformance/llama/modelopt_w4a8" "$tmp/w16"
sed -i 's/"group_size": 32/"group_size": 16/; s/W4A8_NVFP4_FP8/NVFP4/' "$tmp/w16/hf_quant_config.json"
sed -i 's/W4A8_NVFP4_FP8/NVFP4/' "$tmp/w16/config.json" # the same lie in both files: the tensors refute it
run "32-block scales read as 16-blocks" 2 "block scales do not match the weight" -- trace "$tmp/w16" "${T[@]}"

echo "bad-input corpus: $pass passed, $fail failed"
[ $fail -eq 0 ]
