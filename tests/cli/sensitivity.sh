#!/usr/bin/env bash
# nvfp4dbg sensitivity (issue 35): a planted sensitive module (its input scale 8x the right one,
# so its largest activations clip) ranks first at module, layer and class granularity on
# a Llama synth and at layer granularity on a DeepSeek-V4 synth; keeping it in BF16 wins back most
# of the KL; the budgeted set is measured together and meets its budget (exit 0); a budget the
# model cannot meet (DeepSeek-V4's FP8 KV cache is not a unit) is exit 1; the recipes written name
# the kept modules; bad usage and a bad --recipe-out are exit 2 with nothing written.
#   usage: sensitivity.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
be="${ND_TEST_BACKEND:-cpu}"
toks=3,1,4,1,5,9,2,6,5,3,5,8
flat() { tr -d '\n ' <"$1"; }
num() { flat "$2" | sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p" | head -1; }

"$bin" synth "$tmp/ll" --recipe llama --layers 3 --inject input-scale-mul=8@layers.1.mlp.down_proj >/dev/null 2>&1
ok "synth llama with a planted module" '[ -d "$tmp/ll" ]'
for g in module layer class; do
  case $g in module) want=layers.1.mlp.down_proj;; layer) want="layer 1";; class) want=mlp.down_proj;; esac
  "$bin" sensitivity "$tmp/ll" --backend "$be" --tokens $toks --granularity $g >"$tmp/$g.txt" 2>"$tmp/$g.err"
  rc=$?
  ok "$g: exit $rc ($(head -c 200 "$tmp/$g.err"))" '[ $rc -eq 0 ]'
  first=$(awk '$1 == "1" { $1 = ""; sub(/^ +/, ""); print; exit }' "$tmp/$g.txt")
  ok "$g: '$want' ranks first (got: $first)" '[[ "$first" == "$want "* ]]'
done
"$bin" sensitivity "$tmp/ll" --backend "$be" --tokens $toks --granularity module --json >"$tmp/m.json" 2>/dev/null
kl_all=$(flat "$tmp/m.json" | sed -n 's/.*"all_nvfp4":{"kl":\([-0-9.eE+]*\).*/\1/p')
kl_kept=$(flat "$tmp/m.json" | sed -n 's/.*"rank":1,"unit":"layers.1.mlp.down_proj",[^}]*"kl_kept":\([-0-9.eE+]*\),.*/\1/p' | head -1)
ok "keeping the planted module in BF16 wins back most of the KL ($kl_all -> $kl_kept)" \
  'awk -v a="$kl_all" -v k="$kl_kept" "BEGIN { exit !(a > 0 && k >= 0 && k < a / 2) }"'
n_units=$(grep -o '"rank":' <(flat "$tmp/m.json") | wc -l)
ok "module granularity: one unit per quantized linear (3 layers x 7 = $n_units)" '[ "$n_units" -eq 21 ]'
runs=$(num runs "$tmp/m.json")
ok "two runs per unit and the full run ($runs)" '[ "$runs" -eq 43 ]'

# --screen 1: one full run of both modes ranks the units by their own NVFP4 error; only the first gets
# the two exact runs (the planted layer: its clipped activations), the others are listed screened out
"$bin" sensitivity "$tmp/ll" --backend "$be" --tokens $toks --screen 1 >"$tmp/scr.txt" 2>&1
rc=$?
ok "--screen 1: exit $rc, layer 1 first with exact figures, 2 screened out, 3 runs" \
  '[ $rc -eq 0 ] && grep -qE "^1 +layer 1 +7 +[0-9.e-]+ " "$tmp/scr.txt" && [ "$(grep -c "screened out (own error energy" "$tmp/scr.txt")" -eq 2 ] && grep -q "^3 runs in" "$tmp/scr.txt"'
# a budget: half the full KL; the set is measured together and meets it
budget=$(awk -v a="$kl_all" 'BEGIN { printf "%.6g", a / 2 }')
"$bin" sensitivity "$tmp/ll" --backend "$be" --tokens $toks --granularity module --budget-kl "$budget" --json >"$tmp/b.json" 2>/dev/null
rc=$?
set_kl=$(flat "$tmp/b.json" | sed -n 's/.*"set":{"units":\[[^]]*\],"kl":\([-0-9.eE+]*\).*/\1/p')
ok "budget $budget: exit $rc, measured KL $set_kl within it, the planted module kept" \
  '[ $rc -eq 0 ] && awk -v k="$set_kl" -v b="$budget" "BEGIN { exit !(k <= b) }" && flat "$tmp/b.json" | grep -q "\"set\":{\"units\":\[\"layers.1.mlp.down_proj\""'

# --keep 1 with the recipes
"$bin" sensitivity "$tmp/ll" --backend "$be" --tokens $toks --granularity layer --keep 1 --recipe-out "$tmp/rec" >"$tmp/k.txt" 2>&1
rc=$?
ok "--keep 1 --recipe-out: exit $rc" '[ $rc -eq 0 ] && grep -q "^kept in high precision (1 of 3 units, 7 of the checkpoint.s 21 quantized linears): layer 1$" "$tmp/k.txt"'
ok "llmcompressor recipe: a QuantizationModifier ignoring lm_head and layer 1's 7 linears" \
  'grep -q "^    QuantizationModifier:" "$tmp/rec/llmcompressor-recipe.yaml" && grep -q "^      - lm_head$" "$tmp/rec/llmcompressor-recipe.yaml" && [ "$(grep -c "^      - model.layers.1\." "$tmp/rec/llmcompressor-recipe.yaml")" -eq 7 ]'
ok "ModelOpt patch: the quantizers of layer 1's linears disabled (list entries and the older dict form)" \
  '[ "$(flat "$tmp/rec/modelopt-quant-cfg.json" | grep -o "{\"quantizer_name\":\"\*model.layers.1.[a-z_.]*\.\*\",\"enable\":false}" | wc -l)" -eq 7 ] &&
   [ "$(flat "$tmp/rec/modelopt-quant-cfg.json" | grep -o "\"\*model.layers.1.[a-z_.]*\.\*\":{\"enable\":false}" | wc -l)" -eq 7 ]'
ok "compressed-tensors patch: the ignore list" 'flat "$tmp/rec/compressed-tensors-ignore.json" | grep -q "\"quantization_config\":{\"ignore\":\[\"lm_head\",\"model.layers.1."'

# DIR/ (the docs' spelling, a shell's completion) names DIR: a new one, and an empty one (round 25:
# exit 2 after every run, "does not exist" / "cannot move the new folder into place")
mkdir "$tmp/rec3"
for d in "$tmp/rec2/" "$tmp/rec3/"; do
  "$bin" sensitivity "$tmp/ll" --backend "$be" --tokens $toks --granularity layer --keep 1 --recipe-out "$d" >"$tmp/k2.txt" 2>&1; rc=$?
  ok "--recipe-out $(basename "$d")/ (trailing slash): exit $rc, the three files in it" \
     '[ $rc -eq 0 ] && [ -f "$d/llmcompressor-recipe.yaml" ] && [ -f "$d/modelopt-quant-cfg.json" ] && [ -f "$d/compressed-tensors-ignore.json" ]'
done
# weight-only checkpoints (ModelOpt W4A16, gpt-oss MXFP4): both paths run the same weights, every KL
# is 0 by construction: refused, not "budget met, nothing to keep" (round 25)
for wo in llama/modelopt_w4a16 gpt_oss_mxfp4/mxfp4; do
  "$bin" sensitivity "$root/golden/conformance/$wo" --backend "$be" --tokens $toks --keep 1 --recipe-out "$tmp/wo-$(basename "$wo")" >/dev/null 2>"$tmp/err"; rc=$?
  ok "$wo: exit $rc, weight-only named, no recipes written" '[ $rc -eq 2 ] && grep -q "every quantized linear is weight-only" "$tmp/err" && [ ! -e "$tmp/wo-$(basename "$wo")" ]'
done
# a MoE layer kept: every expert of it in the recipes, those the 3 tokens never routed to too
"$bin" sensitivity "$root/golden/clean-v4" --backend "$be" --tokens 1,2,3 --keep 1 --recipe-out "$tmp/moe" >"$tmp/moe.txt" 2>&1
kept=$(sed -n 's/^kept in high precision.*: layer \([0-9]*\)$/\1/p' "$tmp/moe.txt")
ok "MoE: layer $kept kept, all 8 experts' gate_proj in the recipe ($(grep -c "^      - model.layers.$kept.mlp.experts.[0-9]*.gate_proj$" "$tmp/moe/llmcompressor-recipe.yaml"))" \
  '[ -n "$kept" ] && [ "$(grep -c "^      - model.layers.$kept.mlp.experts.[0-9]*.gate_proj$" "$tmp/moe/llmcompressor-recipe.yaml")" -eq 8 ]'
ok "MoE: the header says how many linears these tokens ran" 'grep -q "units of 64 quantized linears (40 run by these tokens)" "$tmp/moe.txt"'
# DeepSeek-V4 (random weights: layer 0's own NVFP4 error leads when nothing is planted): the planted
# layer ranks first; budget 0 cannot be met (the FP8 KV cache is no unit)
"$bin" synth "$tmp/v4" --recipe deepseek_v4 --layers 3 --inject input-scale-mul=64@layers.1.mlp.shared_experts.down_proj >/dev/null 2>&1
"$bin" sensitivity "$tmp/v4" --backend "$be" --tokens $toks --budget-kl 0 >"$tmp/v4.txt" 2>"$tmp/v4.err"
rc=$?
first=$(awk '$1 == "1" { print $2, $3; exit }' "$tmp/v4.txt")
"$bin" synth "$tmp/v4c" --recipe deepseek_v4 --layers 3 >/dev/null 2>&1
"$bin" sensitivity "$tmp/v4c" --backend "$be" --tokens $toks >"$tmp/v4c.txt" 2>&1
first0=$(awk '$1 == "1" { print $2, $3; exit }' "$tmp/v4c.txt")
ok "deepseek_v4: layer 1 ranks first (got: $first; unplanted: $first0)" '[ "$first" = "layer 1" ] && [ "$first0" = "layer 0" ]'
ok "deepseek_v4: budget 0 not met, exit $rc" '[ $rc -eq 1 ] && grep -q "budget 0 NOT met even with every unit kept" "$tmp/v4.txt"'

# --verify: the written set run again on the checkpoint (issue 35 item 2): its measured KL is the one
# --recipe-out recorded; a budget below it is exit 1; a set naming another checkpoint's module, a
# file without the list, and --verify with a new choice are exit 2
"$bin" sensitivity "$root/golden/clean-v4" --backend "$be" --tokens 1,2,3 --budget-kl 0.005 --recipe-out "$tmp/ver" >"$tmp/ver.txt" 2>&1
"$bin" sensitivity "$root/golden/clean-v4" --backend "$be" --tokens 1,2,3 --verify "$tmp/ver" --json >"$tmp/verj.json" 2>&1; rc=$?
kl=$(sed -n 's/.*"kl": \([0-9.e+-]*\).*/\1/p' "$tmp/verj.json" | head -1)
meas=$(sed -n 's/.*"measured_kl_when_written": \([0-9.e+-]*\).*/\1/p' "$tmp/verj.json" | head -1)
ok "--verify of the written set: exit $rc, KL $kl = the recorded $meas, budget met" \
  '[ $rc -eq 0 ] && [ -n "$kl" ] && awk -v a="$kl" -v b="$meas" "BEGIN { exit !(a - b < 1e-9 && b - a < 1e-9) }" && grep -q "\"budget_met\": true" "$tmp/verj.json"'
sed 's/"budget_kl": [0-9.e+-]*/"budget_kl": 1e-9/' "$tmp/ver/compressed-tensors-ignore.json" >"$tmp/ver-tight.json"
"$bin" sensitivity "$root/golden/clean-v4" --backend "$be" --tokens 1,2,3 --verify "$tmp/ver-tight.json" >"$tmp/vt.txt" 2>&1; rc=$?
ok "--verify against a budget below its KL: exit $rc" '[ $rc -eq 1 ] && grep -q "budget KL 1e-09: NOT met" "$tmp/vt.txt"'
sed 's/"model.layers.0.self_attn.q_a_proj"/"model.layers.0.self_attn.q_zz_proj"/' "$tmp/ver/compressed-tensors-ignore.json" >"$tmp/ver-other.json"
echo '{"quantization_config": {}}' >"$tmp/ver-none.json"
echo '{"modules_kept_in_high_precision": ["model.layers.0"]}' >"$tmp/ver-notlinear.json"
echo '{"modules_kept_in_high_precision": ["model.layers.0.self_attn.q_a_proj", "model.layers.0.self_attn.q_a_proj"]}' >"$tmp/ver-twice.json"
echo '{"modules_kept_in_high_precision": ["model.layers.0.self_attn.q_a_proj"], "nvfp4dbg": {"budget_kl": "0.001"}}' >"$tmp/ver-strbudget.json"
# the config's ignore list unlike the list verified, either way (round 14 of issue 37)
echo '{"quantization_config": {"ignore": ["lm_head", "model.layers.1.self_attn.q_a_proj"]}, "modules_kept_in_high_precision": ["model.layers.0.self_attn.q_a_proj"]}' >"$tmp/ver-ignore-other.json"
echo '{"quantization_config": {"ignore": ["lm_head"]}, "modules_kept_in_high_precision": ["model.layers.0.self_attn.q_a_proj"]}' >"$tmp/ver-ignore-short.json"
for f in ver-other.json ver-none.json ver-notlinear.json ver-twice.json ver-strbudget.json ver-ignore-other.json ver-ignore-short.json; do
  "$bin" sensitivity "$root/golden/clean-v4" --backend "$be" --tokens 1,2,3 --verify "$tmp/$f" >/dev/null 2>"$tmp/e.txt"; rc=$?
  ok "--verify $f: exit $rc ($(head -c 160 "$tmp/e.txt"))" '[ $rc -eq 2 ] && grep -q "$f: " "$tmp/e.txt"'
done
"$bin" sensitivity "$root/golden/clean-v4" --backend "$be" --verify "$tmp/ver" --budget-kl 0.1 >/dev/null 2>"$tmp/e.txt"; rc=$?
ok "--verify with --budget-kl: exit $rc" '[ $rc -eq 2 ] && grep -q "runs a set already chosen" "$tmp/e.txt"'

# bad usage and bad --recipe-out: exit 2, nothing written
mkdir "$tmp/full" && echo x >"$tmp/full/x"
for args in "--budget-kl 0.1 --keep 1" "--recipe-out $tmp/r2" "--granularity expert" "--budget-kl -1" "--keep 0" \
            "--keep 1 --recipe-out $tmp/full" "--keep 1 --recipe-out $tmp/ll/rec"; do
  "$bin" sensitivity "$tmp/ll" --backend "$be" --tokens $toks $args >/dev/null 2>"$tmp/e.txt"
  rc=$?
  ok "'$args': exit $rc ($(head -c 160 "$tmp/e.txt"))" '[ $rc -eq 2 ] && [ ! -e "$tmp/r2" ] && [ ! -e "$tmp/ll/rec" ] && [ "$(ls "$tmp/full")" = x ]'
done
# a checkpoint in its exporter's own names (llmcompressor's DeepSeek-V4: ffn.shared_experts.w1, attn.wq_a):
# --recipe-out names the checkpoint's modules, --verify of that folder measures the recorded KL, and a
# name the run has no stage for is exit 2 (round 21: it was accepted and kept nothing)
v4="$root/golden/conformance/deepseek_v4/nvfp4"
"$bin" sensitivity "$v4" --backend "$be" --tokens 1,2,3,4 --granularity module --keep 2 --recipe-out "$tmp/v4r" -q >/dev/null 2>"$tmp/e.txt"
mods=$(tr -d ' \n' <"$tmp/v4r/compressed-tensors-ignore.json" | sed 's/.*"modules_kept_in_high_precision":\[\([^]]*\)\].*/\1/' | tr -d '"' | tr ',' ' ')
have=0; for m in $mods; do grep -q "\"$m.weight_packed\"" <(head -c 200000 "$v4/model.safetensors" | strings) && have=$((have + 1)); done
ok "V4 in its own names: --recipe-out lists the checkpoint's modules ($mods)" '[ -n "$mods" ] && [ $have -eq 2 ]'
"$bin" sensitivity "$v4" --backend "$be" --tokens 1,2,3,4 --verify "$tmp/v4r" --json >"$tmp/v4j.json" 2>"$tmp/e.txt"; rc=$?
kl=$(sed -n 's/.*"kl": \([0-9.e+-]*\).*/\1/p' "$tmp/v4j.json" | head -1)
meas=$(sed -n 's/.*"measured_kl_when_written": \([0-9.e+-]*\).*/\1/p' "$tmp/v4j.json" | head -1)
all=$(sed -n 's/.*"kl_all_nvfp4": \([0-9.e+-]*\).*/\1/p' "$tmp/v4j.json" | head -1)
ok "V4 in its own names: --verify exit $rc, KL $kl = the recorded $meas, not the all-NVFP4 $all ($(head -c 200 "$tmp/e.txt"))" \
  '[ $rc -eq 0 ] && [ -n "$kl" ] && [ "$kl" = "$meas" ] && [ "$kl" != "$all" ]'
printf '{"modules_kept_in_high_precision": ["model.layers.1.ffn.shared_experts.w1", "model.layers.1.nothing.w9"]}\n' >"$tmp/v4bad.json"
"$bin" sensitivity "$v4" --backend "$be" --tokens 1,2,3,4 --verify "$tmp/v4bad.json" >/dev/null 2>"$tmp/e.txt"; rc=$?
ok "V4: --verify naming a module the checkpoint lacks: exit $rc ($(head -c 160 "$tmp/e.txt"))" '[ $rc -eq 2 ] && grep -q "nothing.w9" "$tmp/e.txt"'
echo "sensitivity: $pass passed, $fail failed"
[ $fail -eq 0 ]
