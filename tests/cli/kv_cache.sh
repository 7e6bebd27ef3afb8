#!/usr/bin/env bash
# FP8 KV-cache scales end to end (issue 18, kv_scale_ignored), on checkpoints other code wrote: the
# llmcompressor (compressed-tensors) and ModelOpt conformance fixtures of Llama and DeepSeek-V3
# (MLA: the latent row cached with k_scale alone), with scales planted by synth --from:
#   - kv-scales@layers.L.self_attn writes k_scale = amax(K after RoPE)/448 (and v_scale) under the
#     format's names and announces the FP8 cache; inspect lists them with the same values;
#   - a BF16 cache (default stack) has no kv_cache rows; vllm-fp8kv (scales applied) is clean;
#   - vllm-ct-fp8kv-flashinfer (written with the scale, read back with 1.0: vLLM before PR #39418)
#     diverges first at layers.0.self_attn.kv_cache, cause kv_scale_ignored proven by repair, its
#     output clipped at 448; the printed next command makes that stage ok; the per-stage override
#     alone (write_only, twice) breaks the stage the same way under vllm-fp8kv, ignore does not;
#   - a scale 1000x too small (kv-scale-mul) is scale_saturation, an inverted one scale_underflow,
#     both proven by the calibrated-scale repair; the dropped-scales stack (sglang before PR #35455)
#     runs them with 1.0 and is clean; a zero scale is nonfinite_scale;
#   - static findings: announced but missing on a layer (kv_scale_missing), present but not
#     announced (kv_scale_orphan): errors only under a stack with an FP8 cache;
#   - bad input: exit 2 naming the value, the key or the module.
#   usage: kv_cache.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"
root="$2"
be="${ND_TEST_BACKEND:-cpu}"
. "$(dirname "$0")/../lib.sh"
json_field() { grep -m1 "\"$1\":" "$2" | sed 's/.*: "\{0,1\}\([^",]*\)"\{0,1\},*/\1/'; }
row_field() { awk -v want="$1" -v key="$2" -v mode="${4:-isolated}" '
  function val(s) { sub(/^[^:]*: "?/, "", s); sub(/"?,?$/, "", s); return s }
  /^ *"name":/ { n = val($0) }
  /^ *"mode":/ { m = val($0) }
  $0 ~ "^ *\"" key "\":" && n == want && m == mode { print val($0); exit }' "$3"; }
rows_named() { grep -c "\"name\": \"$1\"" "$2"; }
trace() { # out.json ckpt [args]: rc in $rc
  local out="$1"; shift
  "$bin" trace --force "$@" --backend "$be" --json --out "$tmp/t.h5" >"$out" 2>"$tmp/err"
  rc=$?
}
# k_scale / v_scale ($3: 3 or 4) of attention layer $2 in inspect's text table $1 ("-": none)
kv_value() { awk -v m="model.layers.$2.self_attn" -v col="$3" '$1 == m && NF >= 4 { print $col; exit }' "$1"; }

for fam in llama deepseek_v3; do
  for fmt in nvfp4 modelopt; do
    src="$root/golden/conformance/$fam/$fmt"
    c="$tmp/$fam-$fmt"
    if [ "$fmt" = nvfp4 ]; then kname=k_scale; vname=v_scale; else kname=k_proj.k_scale; vname=v_proj.v_scale; fi
    "$bin" synth "$c" --from "$src" --inject kv-scales@layers.0.self_attn --inject kv-scales@layers.1.self_attn >/dev/null 2>"$tmp/err"
    ok "$fam/$fmt: synth --from kv-scales exit 0 ($(cat "$tmp/err"))" '[ $? -eq 0 ]'
    ok "$fam/$fmt: the fault list names model.layers.0.self_attn.$kname" \
       'grep -q "\"tensor\": \"model.layers.0.self_attn.$kname\"" "$c.faults.json"'
    if [ "$fmt" = nvfp4 ]; then
      ok "$fam/$fmt: kv_cache_scheme announced in config.json" 'grep -q "\"kv_cache_scheme\": {" "$c/config.json"'
    else
      ok "$fam/$fmt: kv_cache_quant_algo FP8 in hf_quant_config.json" 'grep -q "\"kv_cache_quant_algo\": \"FP8\"" "$c/hf_quant_config.json"'
    fi
    "$bin" inspect "$c" --json >"$tmp/i.json"
    ok "$fam/$fmt: inspect exit 0 under the default stack" '[ $? -eq 0 ]'
    ok "$fam/$fmt: inspect: FP8 KV cache announced" 'grep -q "\"fp8\": true" "$tmp/i.json"'
    "$bin" inspect "$c" >"$tmp/i.txt"
    k0="$(kv_value "$tmp/i.txt" 0 3)"; v0="$(kv_value "$tmp/i.txt" 0 4)"
    stored="$(grep -m1 '"stored":' "$c.faults.json" | sed 's/.*: //; s/,//')"
    ok "$fam/$fmt: inspect's k_scale ($k0) is what synth stored ($stored), in (0, 1)" \
       "awk -v a='$k0' -v b='$stored' 'BEGIN { exit !(a > 0 && a < 1 && (a - b) < 1e-5 * b && (b - a) < 1e-5 * b) }'"
    if [ "$fam" = deepseek_v3 ]; then
      ok "$fam/$fmt: MLA: no v_scale (k_scale scales the latent row)" '[ "$v0" = - ]'
      ok "$fam/$fmt: inspect says latent" 'grep -q "\"latent\": true" "$tmp/i.json"'
    else
      ok "$fam/$fmt: v_scale present ($v0)" "awk -v a='$v0' 'BEGIN { exit !(a > 0 && a < 1) }'"
    fi

    trace "$tmp/d.json" "$c"
    ok "$fam/$fmt: default stack (BF16 cache): exit 0" '[ $rc -eq 0 ]'
    ok "$fam/$fmt: default stack: no kv_cache rows" '[ "$(rows_named layers.0.self_attn.kv_cache "$tmp/d.json")" = 0 ]'
    trace "$tmp/a.json" "$c" --stack vllm-fp8kv
    ok "$fam/$fmt: vllm-fp8kv (scales applied): exit 0 ($(tail -1 "$tmp/err"))" '[ $rc -eq 0 ]'
    ok "$fam/$fmt: vllm-fp8kv: kv_cache row ok" '[ "$(row_field layers.0.self_attn.kv_cache verdict "$tmp/a.json")" = ok ]'
    ok "$fam/$fmt: vllm-fp8kv: the row has an FP8 floor (above 25 dB)" \
       "awk -v f='$(row_field layers.0.self_attn.kv_cache floor_sqnr_db "$tmp/a.json")' 'BEGIN { exit !(f > 25 && f < 60) }'"

    trace "$tmp/w.json" "$c" --stack vllm-ct-fp8kv-flashinfer
    ok "$fam/$fmt: write_only profile: exit 1" '[ $rc -eq 1 ]'
    ok "$fam/$fmt: write_only: first divergence layers.0.self_attn.kv_cache" \
       '[ "$(json_field first_divergence "$tmp/w.json")" = layers.0.self_attn.kv_cache ]'
    ok "$fam/$fmt: write_only: cause kv_scale_ignored" '[ "$(json_field cause "$tmp/w.json")" = kv_scale_ignored ]'
    ok "$fam/$fmt: write_only: proven by repair" 'grep -q "\"proof\": \"repair\"" "$tmp/w.json"'
    ok "$fam/$fmt: write_only: read back unscaled, the output clips at 448" \
       "awk -v a='$(row_field layers.0.self_attn.kv_cache prod_amax "$tmp/w.json")' 'BEGIN { exit !(a == 448) }'"
    nxt="$(grep -m1 '"next_command":' "$tmp/w.json" | sed 's/.*"next_command": "//; s/",*$//')"
    ok "$fam/$fmt: next command applies kv_scales=1 to the stage" '[[ "$nxt" == *"--override layers.0.self_attn.kv_cache.kv_scales=1"* ]]'
    trace "$tmp/n.json" "$c" --stack vllm-ct-fp8kv-flashinfer --override layers.0.self_attn.kv_cache.kv_scales=1
    ok "$fam/$fmt: with the repair the stage is ok" '[ "$(row_field layers.0.self_attn.kv_cache verdict "$tmp/n.json")" = ok ]'
    ok "$fam/$fmt: ... and the next divergence is layer 1's cache" \
       '[ "$(json_field first_divergence "$tmp/n.json")" = layers.1.self_attn.kv_cache ]'
    for sw in 3 2; do
      trace "$tmp/o.json" "$c" --stack vllm-fp8kv --override "layers.0.self_attn.kv_cache.kv_scales=$sw"
      ok "$fam/$fmt: kv_scales=$sw alone under vllm-fp8kv: kv_scale_ignored at the stage" \
         '[ $rc -eq 1 ] && [ "$(json_field first_divergence "$tmp/o.json")" = layers.0.self_attn.kv_cache ] && [ "$(json_field cause "$tmp/o.json")" = kv_scale_ignored ]'
    done
    trace "$tmp/o.json" "$c" --stack vllm-fp8kv --override layers.0.self_attn.kv_cache.kv_scales=0
    ok "$fam/$fmt: kv_scales=0 (ignore) with K, V inside the E4M3 range: clean" '[ $rc -eq 0 ]'

    # checkpoint-side faults of the scale values
    "$bin" synth "$c-mul" --from "$c" --inject kv-scale-mul=0.001@layers.0.self_attn >/dev/null 2>&1
    ok "$fam/$fmt: kv-scale-mul stores k_scale/1000" \
       "awk -v a='$(grep -m1 '"stored":' "$c-mul.faults.json" | sed 's/.*: //; s/,//')' -v b='$stored' 'BEGIN { r = a / b; exit !(r > 0.000999 && r < 0.001001) }'"
    trace "$tmp/m.json" "$c-mul" --stack vllm-fp8kv
    ok "$fam/$fmt: scale 1000x too small: scale_saturation by repair at the stage" \
       '[ $rc -eq 1 ] && [ "$(json_field first_divergence "$tmp/m.json")" = layers.0.self_attn.kv_cache ] && [ "$(json_field cause "$tmp/m.json")" = scale_saturation ] && grep -q kv_scale_calibrated "$tmp/m.json"'
    trace "$tmp/m.json" "$c-mul" --stack sglang-ct-fp8kv-dropped
    ok "$fam/$fmt: ... the stack that drops the scales runs it with 1.0: clean" '[ $rc -eq 0 ]'
    "$bin" synth "$c-inv" --from "$c" --inject kv-scale-inverted@layers.0.self_attn >/dev/null 2>&1
    trace "$tmp/v.json" "$c-inv" --stack vllm-fp8kv
    ok "$fam/$fmt: inverted scale: scale_underflow by repair at the stage" \
       '[ $rc -eq 1 ] && [ "$(json_field first_divergence "$tmp/v.json")" = layers.0.self_attn.kv_cache ] && [ "$(json_field cause "$tmp/v.json")" = scale_underflow ]'
    trace "$tmp/z.json" "$c" --stack vllm-fp8kv --override "model.layers.0.self_attn.$kname=0"
    ok "$fam/$fmt: a zero k_scale: nonfinite_scale" '[ $rc -eq 1 ] && [ "$(json_field cause "$tmp/z.json")" = nonfinite_scale ]'

    # static findings
    "$bin" synth "$c-half" --from "$src" --inject kv-scales@layers.0.self_attn >/dev/null 2>&1
    "$bin" inspect "$c-half" --json >"$tmp/h.json"; r1=$?
    "$bin" inspect "$c-half" --json --stack vllm-fp8kv >"$tmp/h2.json"; r2=$?
    ok "$fam/$fmt: announced, layer 1 without scales: kv_scale_missing at model.layers.1.self_attn" \
       'grep -q "\"code\": \"kv_scale_missing\"" "$tmp/h.json" && grep -A2 "\"code\": \"kv_scale_missing\"" "$tmp/h.json" | grep -q "model.layers.1.self_attn"'
    ok "$fam/$fmt: ... a warning under exact (exit $r1), an error under vllm-fp8kv (exit $r2)" '[ $r1 -eq 0 ] && [ $r2 -eq 1 ]'
  done
done

# producer-version semantics (issue 33): ModelOpt before 0.43 wrote FP8 KV scales as max(amax/448, 1)
# (CHANGELOG 0.43, PR #1012), so its calibrated scale, the floor the cache row is judged against and
# the calibrated-scale repair, is at least 1; 0.43 and later store amax/448 raw
floor_of() { row_field layers.0.self_attn.kv_cache floor_sqnr_db "$1"; }
trace "$tmp/p47.json" "$tmp/llama-modelopt" --stack vllm-fp8kv; f47=$(floor_of "$tmp/p47.json")
cp -r "$tmp/llama-modelopt" "$tmp/mo042"
sed -i 's/"version": "0.47.0"/"version": "0.42.0"/' "$tmp/mo042/hf_quant_config.json"
"$bin" inspect "$tmp/mo042" >"$tmp/p.txt"; "$bin" inspect "$tmp/mo042" --json >"$tmp/p.json"
ok "ModelOpt 0.42: inspect says its scales are clamped at 1" \
   'grep -q "written by modelopt 0.42.0: before 0.43" "$tmp/p.txt" && grep -q "\"min_scale\": 1" "$tmp/p.json"'
"$bin" inspect "$tmp/llama-modelopt" --json >"$tmp/p.json"
ok "ModelOpt 0.47: no clamp" 'grep -q "\"min_scale\": 0" "$tmp/p.json" && grep -q "\"producer\": \"modelopt 0.47.0\"" "$tmp/p.json"'
trace "$tmp/p42.json" "$tmp/mo042" --stack vllm-fp8kv; f42=$(floor_of "$tmp/p42.json")
# (E4M3 keeps its relative precision at scale 1 unless values fall to its subnormals: the two floors
# differ, by little on this model)
ok "ModelOpt 0.42: exit $rc; the cache's floor is computed with scales of at least 1 ($f42 dB, 0.47: $f47 dB)" \
   "[ $rc -eq 0 ] && awk -v a='$f42' -v b='$f47' 'BEGIN { exit !(a > 0 && b > 0 && a != b) }'"
"$bin" synth "$tmp/mo042-inv" --from "$tmp/mo042" --inject kv-scale-inverted@layers.0.self_attn >/dev/null 2>&1
trace "$tmp/p42i.json" "$tmp/mo042-inv" --stack vllm-fp8kv
ok "ModelOpt 0.42, inverted scale: the calibrated repair sets it to 1 (exit $rc)" \
   '[ $rc -eq 1 ] && grep -q "at least 1 as ModelOpt < 0.43 wrote it" "$tmp/p42i.json"'

# present but not announced: the ModelOpt Llama with kv_cache_quant_algo null
cp -r "$tmp/llama-modelopt" "$tmp/orphan"
sed -i 's/"kv_cache_quant_algo": "FP8"/"kv_cache_quant_algo": null/' "$tmp/orphan/hf_quant_config.json"
"$bin" inspect "$tmp/orphan" --json --stack vllm-fp8kv >"$tmp/o.json"; r=$?
ok "scales not announced: kv_scale_orphan, an error under vllm-fp8kv (exit $r)" '[ $r -eq 1 ] && grep -q "\"code\": \"kv_scale_orphan\"" "$tmp/o.json"'
"$bin" inspect "$tmp/orphan" >/dev/null; r=$?
ok "scales not announced: a warning under exact (exit $r)" '[ $r -eq 0 ]'

# bad input
c="$tmp/llama-nvfp4"
"$bin" trace --force "$c" --backend "$be" --stack vllm-fp8kv --override layers.0.self_attn.kv_cache.kv_scales=4 --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"
ok "kv_scales=4: exit 2 naming the values" '[ $? -eq 2 ] && grep -q "kv_scales takes 0 (ignore), 1 (apply), 2 (twice) or 3 (write_only)" "$tmp/err"'
printf 'stack: bad\nkv_scales: half\n' >"$tmp/stack-bad.yaml"
"$bin" trace --force "$c" --backend "$be" --stack "$tmp/stack-bad.yaml" --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"
ok "kv_scales: half in a profile: exit 2 with file:line" '[ $? -eq 2 ] && grep -q "stack-bad.yaml:2: kv_scales must be ignore, apply, twice or write_only" "$tmp/err"'
printf 'stack: bad\nkv_cache: fp4\n' >"$tmp/stack-bad.yaml"
"$bin" trace --force "$c" --backend "$be" --stack "$tmp/stack-bad.yaml" --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"
ok "kv_cache: fp4 in a profile: exit 2" '[ $? -eq 2 ] && grep -q "kv_cache must be bf16 or fp8" "$tmp/err"'
"$bin" synth "$tmp/x1" --from "$c" --inject kv-scales@layers.9.self_attn >/dev/null 2>"$tmp/err"
ok "kv-scales on a layer the model lacks: exit 2 naming it" '[ $? -eq 2 ] && grep -q "layers.9.self_attn. is not an attention module" "$tmp/err"'
"$bin" synth "$tmp/x2" --from "$c" --inject kv-scales@layers.0.self_attn >/dev/null 2>"$tmp/err"
ok "kv-scales where scales exist: exit 2" '[ $? -eq 2 ] && grep -q "already has KV-cache scales" "$tmp/err"'
"$bin" synth "$tmp/x3" --from "$root/golden/conformance/llama/nvfp4" --inject kv-scale-mul=2@layers.0.self_attn >/dev/null 2>"$tmp/err"
ok "kv-scale-mul without scales: exit 2" '[ $? -eq 2 ] && grep -q "has no KV-cache scales" "$tmp/err"'
"$bin" synth "$tmp/x4" --recipe llama --size tiny --inject kv-scales@layers.0.self_attn >/dev/null 2>"$tmp/err"
ok "kv-scales without --from: exit 2" '[ $? -eq 2 ] && grep -q "KV-cache scale faults apply to an existing checkpoint" "$tmp/err"'
cp -r "$c" "$tmp/badcfg"
sed -i 's/"kv_cache_scheme": {/"kv_cache_scheme": "fp8", "x": {/' "$tmp/badcfg/config.json"
"$bin" inspect "$tmp/badcfg" >/dev/null 2>"$tmp/err"
ok "kv_cache_scheme that is a string: exit 2 naming the key" '[ $? -eq 2 ] && grep -q "quantization_config.kv_cache_scheme. must be an object or null" "$tmp/err"'

# round 23: repro of a KV-cache stage bundles the scales it reads (k_scale / v_scale; a bundle without
# them replayed the cache at scale 1, "ok", exit 0), and bisect names the stage (its reference-path
# run made no row, exit 2)
"$bin" synth "$tmp/r23kv" --from "$root/golden/conformance/llama/nvfp4" --inject kv-scales@layers.0.self_attn -q >/dev/null 2>&1
"$bin" synth "$tmp/r23bad" --from "$tmp/r23kv" --inject kv-scale-inverted@layers.0.self_attn -q >/dev/null 2>&1
"$bin" trace "$tmp/r23bad" --backend "$be" --stack vllm-fp8kv --out "$tmp/r23.h5" -q >/dev/null 2>&1; rc=$?
"$bin" repro "$tmp/r23.h5" --stage layers.0.self_attn.kv_cache --out "$tmp/r23b.h5" >"$tmp/rp.txt" 2>&1
"$bin" replay "$tmp/r23b.h5" --backend cpu >"$tmp/rl.txt" 2>&1; rrc=$?
ok "repro of the kv_cache stage: 2 checkpoint tensors bundled, replay exit $rrc (trace exit $rc)" \
  '[ $rc -eq 1 ] && grep -q "2 checkpoint tensor" "$tmp/rp.txt" && [ $rrc -eq 1 ]'
"$bin" bisect "$tmp/r23bad" --backend "$be" --stack vllm-fp8kv >"$tmp/bs.txt" 2>&1; rc=$?
ok "bisect of a kv_cache divergence: exit $rc, the stage named ($(tail -c 200 "$tmp/bs.txt"))" \
  '[ $rc -eq 1 ] && grep -q "^  layers.0.self_attn.kv_cache$" "$tmp/bs.txt"'

# round 23: a per-tensor KV scale stored with two values (a loader cannot put it into the cache's one
# scale; the replay read the largest, exit 0): an error for the FP8-cache stacks
"$bin" synth "$tmp/r23m" --from "$root/golden/conformance/llama/nvfp4" --inject kv-scales@layers.0.self_attn -q >/dev/null 2>&1
perl -e '
  my $p = shift; open(F, "<", $p) or die; binmode F; local $/; my $b = <F>; close F;
  my $n = unpack("Q<", substr($b, 0, 8)); my $h = substr($b, 8, $n); my $d = substr($b, 8 + $n);
  $h =~ /"model\.layers\.0\.self_attn\.k_scale":\{"dtype":"F32","shape":\[[^\]]*\],"data_offsets":\[(\d+),(\d+)\]\}/ or die "no k_scale";
  my ($b0, $b1) = ($1, $2); my $off = length($d); $d .= substr($d, $b0, 4) . pack("f<", 1.0);
  $h =~ s/("model\.layers\.0\.self_attn\.k_scale":\{"dtype":"F32","shape":)\[[^\]]*\](,"data_offsets":)\[\d+,\d+\]/$1\[2\]$2\[$off,@{[$off + 8]}\]/;
  # the old 4 bytes stay covered (a data area with bytes no tensor covers is refused on its own)
  $h =~ s/^\{/{"extra.pad":{"dtype":"F32","shape":[1],"data_offsets":[$b0,$b1]},/;
  $h =~ s/ +$//; $h .= " " x ((8 - length($h) % 8) % 8);
  open(O, ">", "$p.new") or die; binmode O; print O pack("Q<", length $h), $h, $d; close O; rename("$p.new", $p) or die;' "$tmp/r23m/model.safetensors"
"$bin" inspect "$tmp/r23m" --stack vllm-fp8kv >"$tmp/m.txt" 2>&1; rc=$?
ok "a two-valued k_scale: inspect exit $rc, named" '[ $rc -eq 1 ] && grep -q "quant_config_mismatch model.layers.0.self_attn: KV-cache scale model.layers.0.self_attn.k_scale holds 2 values" "$tmp/m.txt"'
"$bin" trace "$tmp/r23m" --backend "$be" --stack vllm-fp8kv --out "$tmp/m.h5" -q >/dev/null 2>&1; rc=$?
ok "a two-valued k_scale: trace under vllm-fp8kv exit $rc" '[ $rc -eq 1 ]'

# round 23: GLM-4.5/4.6 MoE has its KV cache stage too (the recipe had none: every FP8 KV stack
# replayed a BF16 cache there, exit 0)
"$bin" synth "$tmp/g45kv" --from "$root/golden/conformance/glm4_moe/nvfp4" --inject kv-scales@layers.0.self_attn -q >/dev/null 2>&1
"$bin" synth "$tmp/g45bad" --from "$tmp/g45kv" --inject kv-scale-inverted@layers.0.self_attn -q >/dev/null 2>&1
"$bin" trace "$tmp/g45bad" --backend "$be" --stack vllm-fp8kv --out "$tmp/g45.h5" -q >/dev/null 2>&1; rc=$?
"$bin" show "$tmp/g45.h5" --stage layers.0.self_attn.kv_cache >"$tmp/g45.txt" 2>&1
ok "glm4_moe with an inverted k_scale under vllm-fp8kv: exit $rc, the kv_cache row flagged" \
  '[ $rc -eq 1 ] && grep -q "^layers.0.self_attn.kv_cache .*<== first divergence" "$tmp/g45.txt"'

# a checkpoint without KV scales under an FP8-cache stack: the stack's default 1.0 (vLLM's) is no
# calibrated value, so the far-multiplier rule does not judge it (round 22: Phi-3's ModelOpt fixture,
# K amax 3, flagged 1.2 dB under its floor); a cache at 1.0 that loses past the floor margin (K and V
# of amax 0.003: subnormals) is scale_underflow, proven by giving the absent scales their calibrated
# value under the names the format stores them (ModelOpt: k_proj.k_scale, Phi-3 with its fused qkv_proj too;
# compressed-tensors: k_scale), and the printed next command clears it
"$bin" trace "$root/golden/conformance/phi3/modelopt" --backend "$be" --stack vllm-fp8kv --out "$tmp/p3.h5" -q >/dev/null 2>&1; rc=$?
ok "phi3/modelopt without KV scales under vllm-fp8kv: clean (exit $rc)" '[ $rc -eq 0 ]'
for src_fam in llama/nvfp4 llama/modelopt phi3/modelopt; do
  d="$tmp/abs-$(echo "$src_fam" | tr / -)"
  qkv="--inject weight-mul=0.001@layers.0.self_attn.q_proj --inject weight-mul=0.001@layers.0.self_attn.k_proj --inject weight-mul=0.001@layers.0.self_attn.v_proj"
  case "$src_fam" in phi3/*) qkv="--inject weight-mul=0.001@layers.0.self_attn.qkv_proj" ;; esac
  # shellcheck disable=SC2086
  "$bin" synth "$d" --from "$root/golden/conformance/$src_fam" $qkv >/dev/null 2>&1
  "$bin" trace --force "$d" --backend "$be" --stack vllm-fp8kv --out "$tmp/a.h5" >"$tmp/a.txt" 2>&1; rc=$?
  case "$src_fam" in */modelopt) kn=k_proj.k_scale ;; *) kn=k_scale ;; esac
  ok "$src_fam, K/V of amax 0.003 without KV scales: exit $rc, scale_underflow proven by kv_scale_calibrated at the kv_cache, next command sets $kn" \
     '[ $rc -eq 1 ] && grep -q "^first divergence at layers.0.self_attn.kv_cache" "$tmp/a.txt" && grep -q "^cause scale_underflow (proven by repair)" "$tmp/a.txt" && grep -q "absent: 1.0" "$tmp/a.txt" && grep "^  next:" "$tmp/a.txt" | grep -q -- "--override model.layers.0.self_attn.$kn="'
  next=$(sed -n 's/^  next: //p' "$tmp/a.txt")
  PATH="$(dirname "$bin"):$PATH" sh -c "$next --backend $be --force -q" >/dev/null 2>&1; rc=$?
  ok "$src_fam: the next command as printed clears the run (exit $rc)" '[ $rc -eq 0 ]'
done
"$bin" trace "$tmp/abs-llama-modelopt" --backend "$be" --stack vllm-fp8kv --out "$tmp/a.h5" --force -q --override model.layers.0.self_attn.k_scale=0.001 >/dev/null 2>"$tmp/err"; rc=$?
ok "ModelOpt: the compressed-tensors name k_scale is not the one it reads: unused, exit $rc" '[ $rc -eq 2 ]'

echo "kv_cache: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
