#!/usr/bin/env bash
# Real tokenizer files as the tools save them (issue 31 item 4): for every case of the manifest,
# --prompt gives transformers' tokenizer(text) ids and --chat its apply_chat_template ids, from the
# files of bf16/ (transformers' save_pretrained) and nvfp4/ (llmcompressor's, with the truncation block
# its calibration left). A prompt longer than that block's max_length is refused from nvfp4/ (exit 2
# saying so) and tokenized whole from bf16/, as transformers does.
#   usage: real_tokenizer.sh NVFP4DBG FAMILY
set -u
. "$(dirname "$0")/real_lib.sh" "$@"
got() { "$bin" show "$1" --json | "$py" -c "import json,sys; print(','.join(map(str, json.load(sys.stdin)['tokens'])))"; }
trunc=$("$py" -c "import json,sys; t=json.load(open(sys.argv[1])).get('truncation'); print(t['max_length'] if t else 0)" "$m/nvfp4/tokenizer.json")
for kind in tokenizer chat; do
  n=$(manifest "len(m['${kind}_cases'])")
  for ((i = 0; i < n; i++)); do
    manifest "m['${kind}_cases'][$i]['text']" | head -c -1 >"$tmp/text"   # print() added one newline
    want=$(manifest "','.join(map(str, m['${kind}_cases'][$i]['ids']))")
    nwant=$(echo "$want" | tr ',' '\n' | grep -c .)
    extra=(); [ $kind = chat ] && extra=(--chat)
    for v in bf16 nvfp4; do
      "$bin" trace --force "$m/$v" --allow-unquantized --prompt-file "$tmp/text" "${extra[@]}" --layers 0 --backend "$be" --out "$tmp/p.h5" -q >/dev/null 2>"$tmp/err"
      rc=$?
      if [ "$nwant" -eq 0 ]; then   # no tokens: nothing to trace
        ok "$fam/$v $kind case $i (no tokens): exit 2 saying so" '[ $rc -eq 2 ] && grep -q "the prompt gives no tokens" "$tmp/err"'
        continue
      fi
      if [ $v = nvfp4 ] && [ "$trunc" -gt 0 ] && [ "$nwant" -gt "$trunc" ]; then
        ok "$fam/$v $kind case $i ($nwant tokens > truncation $trunc): exit 2 saying so ($(head -c 200 "$tmp/err"))" \
          '[ $rc -eq 2 ] && grep -q "more than the truncation max_length $trunc" "$tmp/err"'
        continue
      fi
      ok "$fam/$v $kind case $i: transformers' ids ($nwant) (exit $rc: $(head -c 200 "$tmp/err"))" '[ $rc -eq 0 ] && [ "$(got "$tmp/p.h5")" = "$want" ]'
    done
  done
done
echo "real tokenizer $fam: $pass passed, $fail failed"
[ $fail -eq 0 ]
