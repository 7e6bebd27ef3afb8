#!/usr/bin/env bash
# Zero false alarms on a real trained model (issue 31 item 2): every quantized variant the real tools
# wrote (llmcompressor NVFP4 W4A4 and W4A16, ModelOpt NVFP4 and W4A8_NVFP4_FP8) gives inspect exit 0 with no finding and
# trace exit 0 with every layer line ok, under each healthy stack profile of its format and with
# --reference-checkpoint set to the BF16 original. The manifest's prompt (real English text) is used.
#   usage: real_clean.sh NVFP4DBG FAMILY
set -u
. "$(dirname "$0")/real_lib.sh" "$@"
for v in $(variants); do
  # judged against every profile at once: no static finding breaks any of them
  "$bin" inspect "$m/$v" --stack all >"$tmp/i.txt" 2>&1
  rc=$?
  ok "$fam/$v inspect --stack all: exit 0, no finding (exit $rc)" '[ $rc -eq 0 ] && grep -q "^findings: 0 errors, 0 warnings" "$tmp/i.txt"'
  for st in $(stacks_of "$v"); do
    "$bin" inspect "$m/$v" --stack "$st" >"$tmp/i.txt" 2>&1
    rc=$?
    ok "$fam/$v inspect --stack $st: exit 0, no finding (exit $rc: $(grep -m3 -E '^  (error|warning)' "$tmp/i.txt"))" \
      '[ $rc -eq 0 ] && grep -q "^findings: 0 errors, 0 warnings" "$tmp/i.txt"'
    "$bin" trace --force "$m/$v" --stack "$st" --tokens "$toks" --backend "$be" --out "$tmp/t.h5" -q >"$tmp/t.txt" 2>&1
    rc=$?
    # a layer line: "N ...", or "A-B ..." for a run of quiet layers; its verdict is field 7
    notok=$(grep -E "^([0-9]+(-[0-9]+)?|in|head) " "$tmp/t.txt" | awk '$7 != "ok"' | wc -l)
    nlay=$(grep -cE "^[0-9]+(-[0-9]+)? " "$tmp/t.txt")
    ok "$fam/$v trace --stack $st: exit 0, $nlay layer lines all ok (exit $rc, $notok not ok: $(grep -E "^([0-9]+(-[0-9]+)?|head) " "$tmp/t.txt" | awk '$7 != "ok"' | head -2))" \
      '[ $rc -eq 0 ] && [ "$notok" -eq 0 ] && [ "$nlay" -gt 0 ] && grep -q "^no divergence in" "$tmp/t.txt" && ! grep -q "static findings" "$tmp/t.txt"'
  done
  "$bin" trace --force "$m/$v" --reference-checkpoint "$m/bf16" --tokens "$toks" --backend "$be" --out "$tmp/r.h5" -q >"$tmp/r.txt" 2>&1
  rc=$?
  notok=$(grep -E "^([0-9]+(-[0-9]+)?|in|head) " "$tmp/r.txt" | awk '$7 != "ok"' | wc -l)
  ok "$fam/$v trace --reference-checkpoint bf16: exit 0, every layer ok (exit $rc, $notok not ok)" '[ $rc -eq 0 ] && [ "$notok" -eq 0 ]'
  # the quality of the NVFP4 path against the original (issue 31 item 7): the line, the JSON, the report
  ok "$fam/$v: the quality line against the BF16 original" \
    'tr "\n" " " <"$tmp/r.txt" | grep -qE "quality against the BF16 original: final logits KL [0-9.e-]+ nats, top-1 [0-9.]+% of [0-9]+ positions"'
  "$bin" show "$tmp/r.h5" --json >"$tmp/r.json" 2>/dev/null
  ok "$fam/$v: the trace records the original it was compared with" 'grep -q "\"reference_checkpoint\"" "$tmp/r.json" || h5dump -a reference_checkpoint "$tmp/r.h5" | grep -q "$m/bf16"'
  "$bin" report "$tmp/r.h5" --html "$tmp/r.html" -q >/dev/null 2>&1
  ok "$fam/$v: the report's summary holds the quality against the original" 'grep -q "quality<dd id=\"verdict-quality\">final logits against the BF16 original" "$tmp/r.html"'
done
# the prompt's perplexity (issue 35 item 3): the reference path with the BF16 original and no BF16
# rounding against transformers' FP32 forward of that original (its logits in reference_fp32.safetensors)
tf_ppl=$("$py" -c "
import json, numpy as np
from safetensors.numpy import load_file
lg = load_file('$m/reference_fp32.safetensors')['logits'].astype(np.float64)
lg = lg.reshape(-1, lg.shape[-1]); t = json.load(open('$m/manifest.json'))['tokens']
mx = lg.max(1); lse = mx + np.log(np.exp(lg - mx[:, None]).sum(1))
print(np.exp(np.mean([lse[i] - lg[i, t[i + 1]] for i in range(len(t) - 1)])))")
v1=$(variants | head -1)
"$bin" trace --force "$m/$v1" --tokens "$toks" --backend "$be" --reference-checkpoint "$m/bf16" --ref-numerics fp32-exact --json \
  --out "$tmp/ppl.h5" -q >"$tmp/ppl.json" 2>/dev/null
ours=$(tr -d ' \n' <"$tmp/ppl.json" | sed -n 's/.*"perplexity_ref":\([-0-9.eE+]*\).*/\1/p')
prod=$(tr -d ' \n' <"$tmp/ppl.json" | sed -n 's/.*"perplexity_prod":\([-0-9.eE+]*\).*/\1/p')
ok "$fam/$v1: the reference perplexity $ours is transformers' FP32 $tf_ppl within 1e-5 (production: $prod)" \
  'awk -v a="$ours" -v b="$tf_ppl" -v p="$prod" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && b > 0 && p > 0 && d <= 1e-5 * b) }"'
# the scheme inspect resolved for each real writer's checkpoint (issue 33 item 4): llmcompressor's
# NVFP4 and ModelOpt's quantize activations too, NVFP4A16 only the weights
for v in $(variants); do
  want="W4A4 g16 (nvfp4)"; [ "$v" = nvfp4a16 ] && want="W4A16 g16 (nvfp4)"; [ "$v" = modelopt_w4a8 ] && want="W4A8 g32 (nvfp4)"
  sch=$("$bin" inspect "$m/$v" 2>/dev/null | sed -n 's/^schemes     //p')
  ok "$fam/$v: inspect's schemes say $want ($sch)" '[[ "$sch" == *"$want "[0-9]* ]]'
done
echo "real clean $fam: $pass passed, $fail failed"
[ $fail -eq 0 ]
