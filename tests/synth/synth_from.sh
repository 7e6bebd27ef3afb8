#!/usr/bin/env bash
# `synth OUTDIR --from CKPT --inject FAULT@MODULE` on checkpoints other tools wrote: the llama
# conformance fixtures quantized by llmcompressor (compressed-tensors nvfp4-pack-quantized) and by
# ModelOpt. For every fault of the catalogue on layers.0.self_attn.q_proj: exactly the intended
# tensor changed, to the documented value (or bytes), every other tensor keeps its dtype, shape
# and bytes, every non-safetensors file is copied, and the side file names the change. Also: a
# sharded source becomes one model.safetensors, faults on one module compose in command-line
# order, an involution applied twice gives the source's tensors back, and bad inputs exit 2
# without writing anything.
#   usage: synth_from.sh NVFP4DBG ST_DUMP SOURCE_ROOT
set -u
bin="$1"; dump="$2"; root="$3"
. "$(dirname "$0")/../lib.sh"
M=layers.0.self_attn.q_proj
P=model.$M
# value column of tensor $2 in list file $1 (single-element F32 tensors only)
val() { awk -v n="$2" '$1 == n { print $6 }' "$1"; }
# names of tensors whose line (dtype, shape, size, bytes hash, value) differs between two lists,
# or that only one has
changed() { diff "$1" "$2" | sed -n 's/^[<>] \([^ ]*\) .*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//'; }
# |a/b - 1| <= tol (values are printed with 9 digits: 2e-8 still tells neighbouring floats apart)
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { r = a / b - 1; if (r < 0) r = -r; exit !(b != 0 && r <= t) }'; }

for fmt in nvfp4 modelopt; do
  src="$root/golden/conformance/llama/$fmt"
  if [ $fmt = nvfp4 ]; then IN=input_global_scale; WG=weight_global_scale; PK=weight_packed; ct=1
  else IN=input_scale; WG=weight_scale_2; PK=weight; ct=0; fi
  "$dump" list "$src" >"$tmp/src.list" || { echo "FAIL: st_dump list $src"; exit 1; }
  ig=$(val "$tmp/src.list" "$P.$IN"); wg=$(val "$tmp/src.list" "$P.$WG")
  ok "$fmt: the fixture has $P.$IN and $P.$WG ($ig, $wg)" '[ -n "$ig" ] && [ -n "$wg" ]'

  plant() { # fault -> $out, $tmp/out.list; exit status of synth
    out="$tmp/$fmt-${1%%=*}"
    "$bin" synth "$out" --from "$src" --inject "$1@$M" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; return 1; }
    "$dump" list "$out" >"$tmp/out.list"
  }

  # files: every non-safetensors file of the source, byte for byte, plus one model.safetensors
  plant input-scale-inverted
  rc=$?
  ok "$fmt inverted: synth --from exits $rc (want 0)" '[ $rc -eq 0 ]'
  want=$( (cd "$src" && ls | grep -v '\.safetensors$'; echo model.safetensors) | sort | tr '\n' ' ')
  got=$(cd "$out" && ls | sort | tr '\n' ' ')
  ok "$fmt: OUTDIR holds '$got', want '$want'" '[ "$got" = "$want" ]'
  for f in $(cd "$src" && ls | grep -v '\.safetensors$'); do
    ok "$fmt: $f copied unchanged" 'cmp -s "$src/$f" "$out/$f"'
  done
  ok "$fmt inverted: only $P.$IN changed (changed: $(changed "$tmp/src.list" "$tmp/out.list"))" \
     '[ "$(changed "$tmp/src.list" "$tmp/out.list")" = "$P.$IN" ]'
  v=$(val "$tmp/out.list" "$P.$IN")
  ok "$fmt inverted: $P.$IN = $v = 1/$ig" 'near "$v" "$(awk -v x="$ig" "BEGIN { printf \"%.17g\", 1 / x }")" 1e-7'
  ok "$fmt inverted: the side file names the fault, the tensor and the stored value" \
     'tr -d " \n" <"$out.faults.json" | grep -q "\"fault\":\"input-scale-inverted\",\"module\":\"$M\",\"value\":null,\"tensor\":\"$P.$IN\",\"stored\":"'
  # inspect reads the planted value back, normalised (a CT divisor and a ModelOpt multiplier alike
  # imply the quantizer multiplier amax/2688 here, about 1/660)
  mult=$("$bin" inspect --json "$out" | grep -A30 "\"path\": \"$P\"" | sed -n 's/.*"input_global_mult": \([^,]*\),*/\1/p' | head -n 1)
  ok "$fmt inverted: inspect --json reads input_global_mult $mult (about 1/660)" 'near "$mult" 0.001515 0.01'

  plant input-scale-mul=4
  ok "$fmt mul: only $P.$IN changed" '[ "$(changed "$tmp/src.list" "$tmp/out.list")" = "$P.$IN" ]'
  v=$(val "$tmp/out.list" "$P.$IN")
  if [ $ct = 1 ]; then w=$(awk -v x="$ig" 'BEGIN { printf "%.9g", x * 4 }'); else w=$(awk -v x="$ig" 'BEGIN { printf "%.9g", x / 4 }'); fi
  ok "$fmt mul=4: $P.$IN = $v, want $w (the quantizer multiplier x4)" 'near "$v" "$w" 2e-8'

  plant input-scale-inf
  ok "$fmt inf: only $P.$IN changed, to inf" '[ "$(changed "$tmp/src.list" "$tmp/out.list")" = "$P.$IN" ] && [ "$(val "$tmp/out.list" "$P.$IN")" = inf ]'

  plant weight-global-scale-zero
  ok "$fmt zero: only $P.$WG changed, to 0" '[ "$(changed "$tmp/src.list" "$tmp/out.list")" = "$P.$WG" ] && [ "$(val "$tmp/out.list" "$P.$WG")" = 0 ]'

  plant fused-scale-mismatch=2
  v=$(val "$tmp/out.list" "$P.$WG")
  if [ $ct = 1 ]; then w=$(awk -v x="$wg" 'BEGIN { printf "%.9g", x * 2 }'); else w=$(awk -v x="$wg" 'BEGIN { printf "%.9g", x / 2 }'); fi
  ok "$fmt fused-scale-mismatch=2: only $P.$WG changed, $v, want $w" '[ "$(changed "$tmp/src.list" "$tmp/out.list")" = "$P.$WG" ] && near "$v" "$w" 2e-8'

  plant missing-input-scale
  ok "$fmt missing: only $P.$IN differs" '[ "$(changed "$tmp/src.list" "$tmp/out.list")" = "$P.$IN" ]'
  ok "$fmt missing: $P.$IN is gone" '! grep -q "^$P.$IN " "$tmp/out.list" && [ $(wc -l <"$tmp/out.list") -eq $(($(wc -l <"$tmp/src.list") - 1)) ]'

  plant weight-scale-nan
  ok "$fmt nan: only $P.weight_scale changed" '[ "$(changed "$tmp/src.list" "$tmp/out.list")" = "$P.weight_scale" ]'
  "$dump" hex "$src" "$P.weight_scale" >"$tmp/a.hex"; "$dump" hex "$out" "$P.weight_scale" >"$tmp/b.hex"
  # q_proj is 64x64: 4 block scales a row; column 0 of rows 0, 8, ..., 56 becomes 0x7f, nothing else
  bad=$(paste "$tmp/a.hex" "$tmp/b.hex" | awk '{ i = NR - 1; want = (i % 32 == 0) ? "7f" : $1; if ($2 != want) n++ } END { print n + 0 }')
  nnan=$(grep -c '^7f$' "$tmp/b.hex")
  ok "$fmt nan: block scales differ from the expected bytes at $bad places, $nnan NaN (want 0 and 8)" '[ "$bad" = 0 ] && [ "$nnan" = 8 ] && [ $(wc -l <"$tmp/b.hex") = 256 ]'
  ok "$fmt nan: the side file counts 8 blocks" 'grep -q "\"nan_blocks\": 8" "$out.faults.json"'

  plant nibble-swap
  ok "$fmt nibble-swap: only $P.$PK changed" '[ "$(changed "$tmp/src.list" "$tmp/out.list")" = "$P.$PK" ]'
  "$dump" hex "$src" "$P.$PK" >"$tmp/a.hex"; "$dump" hex "$out" "$P.$PK" >"$tmp/b.hex"
  bad=$(paste "$tmp/a.hex" "$tmp/b.hex" | awk '{ if ($2 != substr($1, 2, 1) substr($1, 1, 1)) n++ } END { print n + 0 }')
  ok "$fmt nibble-swap: $bad of 2048 bytes are not the source byte with its nibbles swapped" '[ "$bad" = 0 ] && [ $(wc -l <"$tmp/b.hex") = 2048 ]'
  # an involution applied twice gives every tensor back
  "$bin" synth "$tmp/$fmt-twice" --from "$out" --inject "nibble-swap@$M" >/dev/null 2>&1
  "$dump" list "$tmp/$fmt-twice" >"$tmp/twice.list"
  ok "$fmt nibble-swap twice: every tensor equals the source's" 'cmp -s "$tmp/src.list" "$tmp/twice.list"'

  # two faults on one module act in command-line order on one value (inverted, then x4)
  "$bin" synth "$tmp/$fmt-two" --from "$src" --inject "input-scale-inverted@$M" --inject "input-scale-mul=4@$M" >/dev/null 2>&1
  "$dump" list "$tmp/$fmt-two" >"$tmp/two.list"
  v=$(val "$tmp/two.list" "$P.$IN")
  if [ $ct = 1 ]; then w=$(awk -v x="$ig" 'BEGIN { printf "%.17g", 4 / x }'); else w=$(awk -v x="$ig" 'BEGIN { printf "%.17g", 1 / x / 4 }'); fi
  ok "$fmt inverted then mul=4: $P.$IN = $v, want $w" 'near "$v" "$w" 1e-7'
  s=$(tr -d ' \n' <"$tmp/$fmt-two.faults.json" | sed 's/.*"stored":\([^}]*\)}]$/\1/')
  ok "$fmt: the side file's last stored value $s is what the file holds" 'near "$s" "$v" 1e-7'

  # bad inputs: exit 2, a message naming the module / folder, nothing written
  for bad in "input-scale-inverted@layers.0.self_attn.nope_proj:nope_proj" "nibble-swap@lm_head:lm_head" \
             "weight-scale-nan@embed_tokens:embed_tokens" "no-such-fault@$M:no-such-fault"; do
    spec=${bad%:*}; word=${bad##*:}
    "$bin" synth "$tmp/bad" --from "$src" --inject "$spec" >/dev/null 2>"$tmp/err"
    rc=$?
    ok "$fmt --inject $spec: exit $rc (want 2), message names $word, nothing written ($(head -c 200 "$tmp/err"))" \
       '[ $rc -eq 2 ] && grep -q -- "$word" "$tmp/err" && [ ! -e "$tmp/bad" ] && [ ! -e "$tmp/bad.faults.json" ]'
  done
  # the fault list is the answer key (round 21): a fault after one that removed or changed the module's
  # tensors, one fault twice, or a factor of 1 would list what the checkpoint does not hold
  for pair in "missing-input-scale@$M input-scale-mul=2@$M|changes which tensors" "dequantize@$M input-scale-inf@$M|changes which tensors" \
              "config-ignore@$M config-ignore@$M|given twice" "input-scale-mul=1@$M|changes nothing"; do
    specs=${pair%|*}; want=${pair#*|}; args=(); for sp in $specs; do args+=(--inject "$sp"); done
    "$bin" synth "$tmp/bad" --from "$src" "${args[@]}" >/dev/null 2>"$tmp/err"
    rc=$?
    ok "$fmt $specs: exit $rc (want 2), '$want', nothing written ($(head -c 200 "$tmp/err"))" \
       '[ $rc -eq 2 ] && grep -q -- "$want" "$tmp/err" && [ ! -e "$tmp/bad" ] && [ ! -e "$tmp/bad.faults.json" ]'
  done
done

# a weight-only module (ModelOpt W4A16) has no input scale: an input-scale fault is refused (round 23:
# the fault list named an input_scale stored inf while the tensors were the source's)
for f in input-scale-inf input-scale-inverted input-scale-mul=4; do
  "$bin" synth "$tmp/w16" --from "$root/golden/conformance/llama/modelopt_w4a16" --inject "$f@layers.0.self_attn.q_proj" >/dev/null 2>"$tmp/err"; rc=$?
  ok "W4A16 --inject $f: exit $rc, nothing written ($(head -c 160 "$tmp/err"))" \
     '[ $rc -eq 2 ] && grep -q "has no input scale (weights only)" "$tmp/err" && [ ! -e "$tmp/w16" ] && [ ! -e "$tmp/w16.faults.json" ]'
done
src="$root/golden/conformance/llama/nvfp4"
"$dump" list "$src" >"$tmp/src.list"
# a module named with its model. prefix, and a checkpoint's own names (DeepSeek-V4 by llmcompressor)
"$bin" synth "$tmp/pref" --from "$src" --inject "weight-global-scale-zero@$P" >/dev/null 2>&1
"$dump" list "$tmp/pref" >"$tmp/pref.list"
ok "model.-prefixed module: only $P.weight_global_scale changed" '[ "$(changed "$tmp/src.list" "$tmp/pref.list")" = "$P.weight_global_scale" ]'
v4="$root/golden/conformance/deepseek_v4/nvfp4"
"$dump" list "$v4" >"$tmp/v4.list"
"$bin" synth "$tmp/v4" --from "$v4" --inject fused-scale-mismatch=2@layers.0.attn.wq_a >/dev/null 2>&1
"$dump" list "$tmp/v4" >"$tmp/v4o.list"
ok "V4 fixture's own name layers.0.attn.wq_a: only its weight_global_scale changed, x2" \
   '[ "$(changed "$tmp/v4.list" "$tmp/v4o.list")" = "model.layers.0.attn.wq_a.weight_global_scale" ] &&
    near "$(val "$tmp/v4o.list" model.layers.0.attn.wq_a.weight_global_scale)" "$(awk -v x="$(val "$tmp/v4.list" model.layers.0.attn.wq_a.weight_global_scale)" "BEGIN { printf \"%.9g\", 2 * x }")" 2e-8'

# a sharded source (3 files and an index) becomes one model.safetensors with all its tensors
"$dump" shard "$src" "$tmp/sharded" 3
ok "the sharded copy has 3 shards and an index" '[ $(ls "$tmp/sharded" | grep -c "^model-0000[123]-of-00003.safetensors$") = 3 ] && [ -f "$tmp/sharded/model.safetensors.index.json" ]'
"$bin" synth "$tmp/fromshards" --from "$tmp/sharded" --inject "input-scale-inf@$M" >/dev/null 2>&1
"$dump" list "$tmp/fromshards" >"$tmp/fs.list"
ok "from shards: one model.safetensors, no index, no shards" '[ "$(cd "$tmp/fromshards" && ls | grep safetensors)" = model.safetensors ]'
ok "from shards: every tensor of every shard, only $P.input_global_scale changed" \
   '[ "$(changed "$tmp/src.list" "$tmp/fs.list")" = "$P.input_global_scale" ] && [ $(wc -l <"$tmp/fs.list") = $(wc -l <"$tmp/src.list") ]'

# OUTDIR: an empty one is used, a non-empty one refused and left alone
mkdir "$tmp/empty"
"$bin" synth "$tmp/empty" --from "$src" --inject "nibble-swap@$M" >/dev/null 2>&1
ok "an empty OUTDIR is written" '[ -f "$tmp/empty/model.safetensors" ]'
mkdir "$tmp/full"; echo keep >"$tmp/full/mine"
"$bin" synth "$tmp/full" --from "$src" --inject "nibble-swap@$M" >/dev/null 2>"$tmp/err"
rc=$?
ok "a non-empty OUTDIR: exit $rc (want 2), named, left alone" \
   '[ $rc -eq 2 ] && grep -q "$tmp/full" "$tmp/err" && [ "$(ls "$tmp/full")" = mine ] && [ ! -e "$tmp/full.faults.json" ]'
# --from with the generator's options, without --inject, from a folder that is no checkpoint
for args in "--recipe llama" "--size tiny" "--seed 0" "--format modelopt" "--unequal-fused-scales"; do
  # shellcheck disable=SC2086
  "$bin" synth "$tmp/bad" --from "$src" $args --inject "nibble-swap@$M" >/dev/null 2>"$tmp/err"
  rc=$?
  ok "--from with $args: exit $rc (want 2), nothing written" '[ $rc -eq 2 ] && grep -q -- "--from" "$tmp/err" && [ ! -e "$tmp/bad" ]'
done
"$bin" synth "$tmp/bad" --from "$src" >/dev/null 2>&1
rc=$?
ok "--from without --inject: exit $rc (want 2)" '[ $rc -eq 2 ] && [ ! -e "$tmp/bad" ]'
"$bin" synth "$tmp/bad" --from "$tmp/nowhere" --inject "nibble-swap@$M" >/dev/null 2>"$tmp/err"
rc=$?
ok "--from a missing folder: exit $rc (want 2), named" '[ $rc -eq 2 ] && grep -q nowhere "$tmp/err" && [ ! -e "$tmp/bad" ]'
echo "synth --from: $pass passed, $fail failed"
[ $fail -eq 0 ]
