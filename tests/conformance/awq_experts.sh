#!/usr/bin/env bash
# The static class awq_uncalibrated_expert (issue 33 item 2) on two MoE families (DeepSeek-V3 and
# MiniMax-M2's w1/w2/w3 experts, ModelOpt NVFP4 fixtures given AWQ pre_quant_scales by mk_awq_experts,
# quant_algo NVFP4_AWQ): an expert whose scale is all ones while its siblings' are searched is named,
# at that expert only; none when every expert is calibrated, or when every one is ones (nothing to
# tell apart). The run replays the scales (trace exit 0 on each) and inspect's scheme says awq.
#   usage: awq_experts.sh NVFP4DBG MK_AWQ_EXPERTS SOURCE_ROOT
set -u
bin="$1"; mk="$2"; root="$3"
. "$(dirname "$0")/../lib.sh"
json_field() { tr -d '\n' <"$2" | sed -n "s/.*\"$1\": *\"\([^\"]*\)\".*/\1/p" | head -n 1; }
conf="$root/golden/conformance"
for fam in deepseek_v3 minimax_m2; do
  src="$conf/$fam/modelopt"
  for ones in "" 1 all; do
    d="$tmp/$fam-${ones:-none}"; mkdir -p "$d"
    # the algorithm in both files, as ModelOpt writes them (they must agree)
    for f in config.json hf_quant_config.json; do sed 's/"quant_algo": "NVFP4"/"quant_algo": "NVFP4_AWQ"/' "$src/$f" >"$d/$f"; done
    "$mk" "$src" "$d/model.safetensors" $ones >/dev/null || { echo "FAIL mk_awq_experts $fam $ones"; fail=$((fail + 1)); continue; }
    "$bin" inspect "$d" --json >"$tmp/i.json" 2>&1
    "$bin" inspect "$d" >"$tmp/i.txt" 2>&1; rc=$?
    n=$(grep -c "awq_uncalibrated_expert" "$tmp/i.txt")
    case "$ones" in
      1) ok "$fam, expert 1 all ones: named at expert 1 only, as a warning (exit $rc, $n lines: $(grep -m1 awq_uncalibrated "$tmp/i.txt" | cut -c1-160))" \
            '[ $rc -eq 0 ] && [ "$n" -gt 0 ] && ! grep "awq_uncalibrated_expert" "$tmp/i.txt" | grep -qv "experts\.1\." && grep -q "all ones while" "$tmp/i.txt"' ;;
      *) ok "$fam, ones on '${ones:-no}' experts: no awq_uncalibrated_expert (exit $rc)" '[ "$n" -eq 0 ]' ;;
    esac
    ok "$fam/${ones:-none}: scheme awq" 'grep -q "^schemes .*g16 awq" "$tmp/i.txt"'
    "$bin" trace --force "$d" --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/t.h5" >"$tmp/t.txt" 2>&1; rc=$?
    ok "$fam/${ones:-none}: trace exit $rc ($(tail -n 2 "$tmp/t.txt" | head -c 200))" '[ $rc -eq 0 ]'
  done
done
# a broken scale (0, NaN) on expert 1: a static fact (nonfinite_scale), an error in inspect and the
# cause of the trace
for val in 0 nan; do
  d="$tmp/ds-$val"; mkdir -p "$d"; src="$conf/deepseek_v3/modelopt"
  for f in config.json hf_quant_config.json; do sed 's/"quant_algo": "NVFP4"/"quant_algo": "NVFP4_AWQ"/' "$src/$f" >"$d/$f"; done
  "$mk" "$src" "$d/model.safetensors" 1 $val >/dev/null
  "$bin" inspect "$d" >"$tmp/i.txt" 2>&1; rc=$?
  ok "pre_quant_scale $val on expert 1: inspect exit $rc, nonfinite_scale ($(grep -m1 nonfinite "$tmp/i.txt" | cut -c1-140))" \
     '[ $rc -eq 1 ] && grep -q "error   nonfinite_scale .*experts\.1\..*pre_quant_scale\[0\]" "$tmp/i.txt"'
  "$bin" trace --force "$d" --backend "${ND_TEST_BACKEND:-cpu}" --json --out "$tmp/t.h5" >"$tmp/t.json" 2>&1; rc=$?
  ok "pre_quant_scale $val on expert 1: trace exit $rc, cause $(json_field cause "$tmp/t.json")" '[ $rc -eq 1 ] && [ "$(json_field cause "$tmp/t.json")" = nonfinite_scale ]'
done
# pre_quant_scale tensors under a config that does not announce AWQ: not applied, and named
d="$tmp/ds-unannounced"; mkdir -p "$d"; src="$conf/deepseek_v3/modelopt"
cp "$src/config.json" "$src/hf_quant_config.json" "$d/"; "$mk" "$src" "$d/model.safetensors" >/dev/null
"$bin" inspect "$d" >"$tmp/i.txt" 2>&1; rc=$?
ok "pre_quant_scale under quant_algo NVFP4: inspect exit $rc, quant_config_mismatch, scheme not awq" \
   '[ $rc -eq 1 ] && grep -q "quant_config_mismatch .*holds an AWQ pre_quant_scale, but the config" "$tmp/i.txt" && ! grep -q "^schemes .*awq" "$tmp/i.txt"'
echo "awq experts: $pass passed, $fail failed"
[ $fail -eq 0 ]
