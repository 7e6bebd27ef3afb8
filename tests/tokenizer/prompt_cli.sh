#!/usr/bin/env bash
# --prompt / --prompt-file / --chat end to end (issue 22): a synthetic checkpoint (vocabulary 256)
# with golden/tokenizers/tiny's tokenizer beside its config.json; the ids a trace records equal the
# ones the tokenizers package gave for the same text (golden/tokenizers/tiny/cases.json), the trace
# keeps the text; bad input (invalid UTF-8, malformed or unsupported tokenizer.json, an unknown chat
# template, --tokens with --prompt) exits 2 naming the file and the problem. Also report's progress.
#   usage: prompt_cli.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
tk="$root/golden/tokenizers/tiny"
ck="$tmp/ck"
"$bin" synth "$ck" --recipe llama --layers 2 -q >/dev/null || { echo "synth failed"; exit 1; }
cp "$tk/tokenizer.json" "$tk/tokenizer_config.json" "$ck/"

# the ids of KEY=VALUE's entry in cases.json (indent 0: one id per line), comma separated
expected() { awk -v k="\"$1\": \"$2\"," 'index($0, k) == 1 { f = 1; next } f && /^\]/ { exit } f && /^[0-9]/ { sub(/,$/, ""); printf "%s%s", s, $0; s = "," }' "$tk/cases.json"; }
# the /tokens of a trace, comma separated
got() { "$bin" show "$1" --json | awk '/"tokens": \[/ { f = 1; next } f && /\]/ { exit } f { gsub(/[ ,]/, ""); printf "%s%s", s, $0; s = "," }'; }

"$bin" trace --force "$ck" --backend cpu --prompt "The quick brown fox jumps over the lazy dog." --out "$tmp/p.h5" -q >"$tmp/out" 2>"$tmp/err"
ok "--prompt: the trace runs (exit 0)" '[ $? -eq 0 ]'
want="$(expected text "The quick brown fox jumps over the lazy dog.")"
ok "--prompt: the ids are the tokenizers package's ($want)" '[ -n "$want" ] && [ "$(got "$tmp/p.h5")" = "$want" ]'
ok "--prompt: show prints the text" '"$bin" show "$tmp/p.h5" | grep -q "^prompt: The quick brown fox jumps over the lazy dog.$"'
ok "--prompt: show --json holds it" '"$bin" show "$tmp/p.h5" --json | grep -q "\"prompt\": \"The quick brown fox jumps over the lazy dog.\""'

printf 'emoji \360\237\230\200\360\237\232\200\360\237\224\245 and \360\237\221\215\360\237\217\275' >"$tmp/prompt.txt"
"$bin" trace --force "$ck" --backend cpu --prompt-file "$tmp/prompt.txt" --out "$tmp/f.h5" -q >/dev/null 2>"$tmp/err"
ok "--prompt-file: exit 0" '[ $? -eq 0 ]'
want="$(expected text "$(cat "$tmp/prompt.txt")")"
ok "--prompt-file: unknown characters fused to <unk> as tokenizers does ($want)" '[ -n "$want" ] && [ "$(got "$tmp/f.h5")" = "$want" ]'

"$bin" trace --force "$ck" --backend cpu --prompt "What is 2+2?" --chat --out "$tmp/c.h5" -q >/dev/null 2>"$tmp/err"
ok "--chat: exit 0" '[ $? -eq 0 ]'
want="$(expected chat "What is 2+2?")"
ok "--chat: apply_chat_template's ids ($want)" '[ -n "$want" ] && [ "$(got "$tmp/c.h5")" = "$want" ]'
ok "--chat: show names the format" '"$bin" show "$tmp/c.h5" | grep -q "^prompt (chat mistral-v1): What is 2+2?$"'

"$bin" bisect "$ck" --backend cpu --prompt "Hello world" -q >"$tmp/out" 2>"$tmp/err"
ok "bisect --prompt: runs (exit 0, nothing to bisect)" '[ $? -eq 0 ] && grep -q "nothing to bisect" "$tmp/out"'

bad() { # NAME EXPECTED_MESSAGE_RE ARGS...
  local name="$1" re="$2"; shift 2
  "$bin" trace --force "$ck" --backend cpu --out "$tmp/bad.h5" -q "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  ok "$name: exit 2 ($(head -c 160 "$tmp/err"))" '[ $rc -eq 2 ] && grep -qE -e "$re" "$tmp/err"'
}
printf 'abc\377def' >"$tmp/bad.txt"
bad "--prompt-file with invalid UTF-8" "bad.txt: not valid UTF-8 at byte offset 3" --prompt-file "$tmp/bad.txt"
bad "--prompt with invalid UTF-8" "--prompt: not valid UTF-8 at byte offset 1" --prompt "$(printf 'a\300\200')"
bad "--tokens and --prompt" "give the prompt one way" --tokens 1,2 --prompt "hi"
bad "--chat alone" "--chat needs --prompt" --chat
bad "a missing --prompt-file" "nope.txt: cannot open the prompt file" --prompt-file "$tmp/nope.txt"

save="$tmp/tokenizer.json.orig"
cp "$ck/tokenizer.json" "$save"
tj="$ck/tokenizer.json"
head -c 3000 "$save" >"$tj"
bad "truncated tokenizer.json" "tokenizer.json: not valid JSON" --prompt "hi"
sed 's/"vocab": {/"vocab": [], "x": {/' "$save" >"$tj"
bad "model.vocab of the wrong type" "tokenizer.json: model.vocab is missing or not an object" --prompt "hi"
sed 's/"type": "BPE"/"type": "Unigram"/' "$save" >"$tj"
bad "an unsupported model" "tokenizer.json: model type Unigram is not supported" --prompt "hi"
sed '0,/"merges": \[/s//"merges": [\n"zzq qqz",/' "$save" >"$tj"
bad "a merge of unknown tokens" "tokenizer.json: model.merges\[0\] names zzq, which is not in the vocabulary" --prompt "hi"
sed 's/"type": "Prepend"/"type": "Lowercase"/' "$save" >"$tj"
bad "an unsupported normalizer" "tokenizer.json: normalizer type Lowercase is not supported" --prompt "hi"
sed 's/"pre_tokenizer": null/"pre_tokenizer": {"type": "Whitespace"}/' "$save" >"$tj"
bad "an unsupported pre-tokenizer" "tokenizer.json: pre_tokenizer type Whitespace is not supported" --prompt "hi"
sed 's/"pre_tokenizer": null/"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false}/' "$save" >"$tj"
bad "a regex that does not compile" "tokenizer.json: pre_tokenizer Split: pattern \(unclosed does not compile" --prompt "hi"
sed 's/"single_word": false/"single_word": 3/' "$save" >"$tj"
bad "a flag of the wrong type" "tokenizer.json: added_tokens\[0\] \(<unk>\): a flag is not a boolean" --prompt "hi"
# an added token's "id" is not what tokenizers loads (it keeps the vocabulary's id of content it
# has, and numbers new content from the vocabulary's size): refused, not traced with the file's id
# (round 24: two strings traced as one id, exit 0)
sed '0,/"id": 1,/s//"id": 7,/' "$save" >"$tj"
bad "an added token whose id is not its vocabulary id" "tokenizer.json: added_tokens\[1\] \(<s>\) has id 7 where the tokenizers package \(and transformers\) gives it 1 \(its id in model.vocab\)" --prompt "hi"
sed '0,/"content": "<\/s>",/s//"content": "<NEW>",/' "$save" >"$tj"
bad "new added content declared with a vocabulary id" "tokenizer.json: added_tokens\[2\] \(<NEW>\) has id 2 where the tokenizers package \(and transformers\) gives it 200 \(the next id after the vocabulary" --prompt "hi"
# real files (issue 31): llmcompressor saves the tokenizer it called with truncation=True, so
# released checkpoints carry a truncation block; it changes nothing shorter than max_length
sed 's/"truncation": null/"truncation": {"direction": "Right", "max_length": 2048, "strategy": "LongestFirst", "stride": 0}/' "$save" >"$tj"
"$bin" trace --force "$ck" --backend cpu --prompt "The quick brown fox jumps over the lazy dog." --out "$tmp/tr.h5" -q >/dev/null 2>"$tmp/err"
ok "a truncation block (max_length 2048): accepted, the same ids ($(head -c 160 "$tmp/err"))" \
  '[ "$(got "$tmp/tr.h5")" = "$(expected text "The quick brown fox jumps over the lazy dog.")" ]'
sed 's/"truncation": null/"truncation": {"direction": "Right", "max_length": 3, "strategy": "LongestFirst", "stride": 0}/' "$save" >"$tj"
bad "a prompt longer than the truncation max_length" "tokens, more than the truncation max_length 3 that .*tokenizer.json carries" \
  --prompt "The quick brown fox jumps over the lazy dog."
sed 's/"padding": null/"padding": {"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "<unk>"}/' "$save" >"$tj"
"$bin" trace --force "$ck" --backend cpu --prompt "The quick brown fox jumps over the lazy dog." --out "$tmp/pd.h5" -q >/dev/null 2>"$tmp/err"
ok "a BatchLongest padding block: accepted, the same ids" \
  '[ "$(got "$tmp/pd.h5")" = "$(expected text "The quick brown fox jumps over the lazy dog.")" ]'
sed 's/"padding": null/"padding": {"strategy": {"Fixed": 64}, "direction": "Right", "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "<unk>"}/' "$save" >"$tj"
bad "a Fixed padding block that would pad the prompt" "which the padding block of .*tokenizer.json \(Fixed 64\) would pad" --prompt "hi"
sed 's/"truncation": null/"truncation": {"max_length": "long"}/' "$save" >"$tj"
bad "a truncation block without an integer max_length" "tokenizer.json: truncation is not an object with a positive integer max_length" --prompt "hi"
cp "$save" "$tj"
# transformers writes model_max_length = VERY_LARGE_INTEGER (1e30) into tokenizer_config.json
cfg_save="$tmp/tokenizer_config.json.orig"
cp "$ck/tokenizer_config.json" "$cfg_save"
sed 's/^{/{"model_max_length": 1000000000000000019884624838656, "x_big": [-99999999999999999999999, 1.5],/' "$cfg_save" >"$ck/tokenizer_config.json"
"$bin" trace --force "$ck" --backend cpu --prompt "What is 2+2?" --chat --out "$tmp/big.h5" -q >/dev/null 2>"$tmp/err"
ok "--chat with integers past 2^63 in tokenizer_config.json: apply_chat_template's ids ($(head -c 160 "$tmp/err"))" \
  '[ "$(got "$tmp/big.h5")" = "$(expected chat "What is 2+2?")" ]'
# transformers 4.50+/5.x save the template beside the config as chat_template.jinja
# (the fixture's config is pretty-printed, one key a line; the template has no escaped quotes)
printf '%b' "$(sed -n 's/^ "chat_template": "\(.*\)",$/\1/p' "$cfg_save")" >"$ck/chat_template.jinja"
sed '/^ "chat_template": /d' "$cfg_save" >"$ck/tokenizer_config.json"
"$bin" trace --force "$ck" --backend cpu --prompt "What is 2+2?" --chat --out "$tmp/jj.h5" -q >/dev/null 2>"$tmp/err"
ok "--chat with the template in chat_template.jinja: the same ids ($(head -c 160 "$tmp/err"))" \
  '! grep -q chat_template "$ck/tokenizer_config.json" && [ "$(got "$tmp/jj.h5")" = "$(expected chat "What is 2+2?")" ]'
# both: chat_template.jinja takes priority over the config's entry, as in transformers
# (tokenization_utils_base.py); a ChatML file beside the config's Mistral template renders ChatML
cp "$cfg_save" "$ck/tokenizer_config.json"
printf '%s' "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}" >"$ck/chat_template.jinja"
"$bin" trace --force "$ck" --backend cpu --prompt "What is 2+2?" --chat --out "$tmp/jp.h5" -q >/dev/null 2>"$tmp/err"
ok "--chat with chat_template.jinja and a config template: the file wins ($(head -c 160 "$tmp/err"))" \
  '"$bin" show "$tmp/jp.h5" | grep -q "^prompt (chat chatml): What is 2+2?$"'
# a ChatML template that adds to the user turn or filters it is not rendered as plain ChatML
# (transformers would render "Answer in French. hi" or "HI"): refused, naming the file
for edit in "'\\n' + 'Answer in French. ' + message['content']" "'\\n' + message['content']|upper"; do
  printf '%s' "{% for message in messages %}{{'<|im_start|>' + message['role'] + $edit + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}" >"$ck/chat_template.jinja"
  bad "a ChatML template changing the user turn ($edit)" "chat_template.jinja: the chat template looks like chatml but writes the user turn otherwise" --prompt "hi" --chat
done
rm "$ck/chat_template.jinja"
sed '/^ "chat_template": /d' "$cfg_save" >"$ck/tokenizer_config.json"
bad "--chat with neither a chat_template nor chat_template.jinja" "no chat_template, and no chat_template.jinja beside it" --prompt "hi" --chat
cp "$cfg_save" "$ck/tokenizer_config.json"
rm "$tj"
bad "no tokenizer.json" "tokenizer.json: no tokenizer next to config.json.*--tokenizer DIR" --prompt "hi"
# --tokenizer (issue 36 item 3): a folder or the file itself; the ids are the tokenizers package's
"$bin" trace --force "$ck" --backend cpu --prompt "Hello world" --tokenizer "$tk" --out "$tmp/tk1.h5" -q >/dev/null 2>"$tmp/err"
ok "--tokenizer DIR on a checkpoint without one: the ids of tokenizers ($(head -c 160 "$tmp/err"))" \
  '[ "$(got "$tmp/tk1.h5")" = "$(expected text "Hello world")" ]'
"$bin" trace --force "$ck" --backend cpu --prompt "Hello world" --tokenizer "$tk/tokenizer.json" --out "$tmp/tk2.h5" -q >/dev/null 2>"$tmp/err"
ok "--tokenizer FILE: the same ids" '[ "$(got "$tmp/tk2.h5")" = "$(expected text "Hello world")" ]'
bad "--tokenizer naming a folder without one" "nosuch/tokenizer.json: no tokenizer.json \(--tokenizer" --prompt "hi" --tokenizer "$tmp/nosuch"
# another model's tokenizer gives ids past the vocabulary: the message names that tokenizer
bad "a prompt tokenized with another model's tokenizer" "token id [0-9]* is outside the vocabulary \(256\): the prompt was tokenized with .*llama3/tokenizer.json, a tokenizer of another model" \
  --prompt "Hello world, and the quick brown fox" --tokenizer "$root/golden/tokenizers/llama3"
cp "$save" "$tj"
printf '{"chat_template": "{{ messages[0].content }}", "bos_token": "<s>"}' >"$ck/tokenizer_config.json"
bad "an unknown chat template" "tokenizer_config.json: chat_template not recognised.*--prompt without --chat" --prompt "hi" --chat
# the same unknown template in chat_template.jinja: the message names that file
printf '{"bos_token": "<s>"}' >"$ck/tokenizer_config.json"; printf '{{ messages[0].content }}' >"$ck/chat_template.jinja"
bad "an unknown chat_template.jinja" "chat_template.jinja: chat_template not recognised" --prompt "hi" --chat
rm "$ck/chat_template.jinja"
# a template with the markers of two families (Mistral [INST] and a ChatML generation prompt):
# transformers would render neither format, so it is refused, not rendered as one of them
perl -pe 's/("chat_template": ".*)"(,?)$/$1\{\{\x27<|im_start|>assistant\\\\n\x27\}\}"$2/' "$cfg_save" >"$ck/tokenizer_config.json"
bad "a template matching two formats" "tokenizer_config.json: the chat template matches two formats \\(chatml and mistral-v1\\)" --prompt "hi" --chat

# the checkpoint's tokenizer.json as a link out of the folder: refused before it is read (a parse
# error used to print the start of the file it pointed at)
mkdir -p "$tmp/lk"; cp "$ck/config.json" "$ck/model.safetensors" "$ck/tokenizer_config.json" "$tmp/lk/"
echo '{"secret": "do not print me"' >"$tmp/secret.json"; ln -s "$tmp/secret.json" "$tmp/lk/tokenizer.json"
"$bin" trace --force "$tmp/lk" --backend cpu --prompt "hi" --out "$tmp/lk.h5" -q >/dev/null 2>"$tmp/err"; rc=$?
ok "a checkpoint's tokenizer.json linked out of it: exit $rc, refused unread ($(head -c 140 "$tmp/err"))" \
  '[ $rc -eq 2 ] && grep -q "lk/tokenizer.json: a symbolic link out of the checkpoint folder" "$tmp/err" && ! grep -q "do not print" "$tmp/err"'
# a tokenizer whose normalizers blow the text up (40 chained Replace "a" -> "aa": 2^40 bytes; 5000
# Prepends of 10 kB: quadratic work) is refused within the limits, not run out of memory
mkdir -p "$tmp/blow"
# norm ITEM COUNT: the tiny tokenizer with COUNT copies of the normalizer ITEM in a Sequence
norm() { perl -e 'my ($item, $k) = @ARGV; local $/; my $j = <STDIN>; my $n = join(", ", ($item) x $k);
  $j =~ s/"normalizer": \{.*?\n  \},\n/"normalizer": {"type": "Sequence", "normalizers": [$n]},\n/s or die; print $j' "$1" "$2" \
  <"$tk/tokenizer.json" >"$tmp/blow/tokenizer.json"; }
norm '{"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}' 40
bad "40 chained Replace a -> aa" "blow/tokenizer.json: its normalizers \\(step [0-9]* of 40\\) grow --prompt past 64 MB: refused" --prompt "a" --tokenizer "$tmp/blow"
norm "{\"type\": \"Prepend\", \"prepend\": \"$(printf 'x%.0s' $(seq 10000))\"}" 5000
bad "5000 Prepends of 10 kB" "blow/tokenizer.json: its 5000 normalizers rewrite --prompt past 1024 MB in all: refused" --prompt "a" --tokenizer "$tmp/blow"
# the shipped checkpoints carry a tokenizer (golden/tokenizers/tiny's), so --prompt works from the README
for g in seed-bug-v4 clean-v4; do
  "$bin" trace --force "$root/golden/$g" --backend cpu --prompt "Hello world" --out "$tmp/g.h5" -q >/dev/null 2>"$tmp/err"; rc=$?
  ok "golden/$g --prompt: exit $rc, the ids of tokenizers ($(head -c 120 "$tmp/err"))" \
    '[ $rc -le 1 ] && [ "$(got "$tmp/g.h5")" = "$(expected text "Hello world")" ]'
done
# the eighth review: a --tokenizer file is an input (--out --force never replaces it); the next
# command repeats --tokenizer and, run as printed, tokenizes the same way; added tokens with one
# id twice, one content twice or a content past 256 bytes are refused
cp -r "$tk" "$tmp/tkc"
sum0=$(sha256sum "$tmp/tkc/tokenizer.json" | cut -c1-64)
"$bin" trace "$ck" --backend cpu --prompt "hi" --tokenizer "$tmp/tkc/tokenizer.json" --out "$tmp/tkc/tokenizer.json" --force -q >/dev/null 2>"$tmp/err"
rc=$?
ok "--out naming the --tokenizer file, with --force: exit $rc, kept ($(head -c 160 "$tmp/err"))" \
  '[ $rc -eq 2 ] && grep -q "is also an input of this run" "$tmp/err" && [ "$(sha256sum "$tmp/tkc/tokenizer.json" | cut -c1-64)" = "$sum0" ]'
"$bin" trace "$ck" --backend cpu --prompt "hi" --chat --tokenizer "$tmp/tkc/tokenizer.json" --out "$tmp/tkc/tokenizer_config.json" --force -q >/dev/null 2>"$tmp/err"
ok "--out naming the chat template's tokenizer_config.json beside it: exit 2" '[ $? -eq 2 ] && grep -q "is also an input of this run" "$tmp/err"'
"$bin" synth "$tmp/inv" --recipe llama --layers 2 --inject input-scale-inverted@layers.0.self_attn.q_proj -q >/dev/null 2>&1
abin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
(cd "$tmp" && "$abin" trace inv --backend cpu --prompt "Hello world" --tokenizer "$tk" --out inv.h5 -q >inv.txt 2>&1)
next=$(sed -n 's/^  next: //p' "$tmp/inv.txt")
ok "the next command repeats --tokenizer ($next)" '[[ "$next" == *" --prompt '"'"'Hello world'"'"' --tokenizer $tk "* ]]'
mkdir -p "$tmp/nbin" && ln -sf "$abin" "$tmp/nbin/nvfp4dbg"
(cd "$tmp" && PATH="$tmp/nbin:$PATH" sh -c "$next --backend cpu -q" >next.txt 2>&1); rc=$?
ok "run as printed: exit $rc, the same ids" '[ $rc -le 1 ] && [ "$(got "$tmp/inv-repaired.h5")" = "$(got "$tmp/inv.h5")" ]'
# a new entry first in added_tokens (the fixture's own three follow it: <unk> 0, <s> 1, </s> 2)
added() { sed "s|\"added_tokens\": \[|\"added_tokens\": [$1,|" "$save" >"$tj"; }
added '{"id": 1, "content": "zz1", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}'
bad "an added token id twice (new content on <s>'s id)" "tokenizer.json: added_tokens\[0\] \(zz1\) has id 1 where the tokenizers package \(and transformers\) gives it 200" --prompt "hi"
added '{"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}'
bad "an added token content twice" "tokenizer.json: added_tokens\[2\] \(<s>\): id 1 is also added_tokens\[0\]'s" --prompt "hi"
added "{\"id\": 200, \"content\": \"$(printf 'q%.0s' $(seq 300))\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}"
bad "an added token of 300 bytes" "tokenizer.json: added_tokens\[0\]: 300 bytes long" --prompt "hi"
cp "$save" "$tj"
# report's progress (issue 22 item 6): plain lines off a terminal, nothing with --quiet
NVFP4DBG_PROGRESS_INTERVAL=0 "$bin" report "$tmp/p.h5" --html "$tmp/p.html" >/dev/null 2>"$tmp/err"
ok "report: its steps as plain lines" 'grep -q "^nvfp4dbg: report: 0/3 steps (0%), reading the trace" "$tmp/err" && grep -q "^nvfp4dbg: report: 2/3 steps (67%), writing the page" "$tmp/err" && grep -q "^nvfp4dbg: report: done, 3/3 steps" "$tmp/err"'
ok "report: the page's sections within the last step" 'grep -q "writing the page, 8/8 sections" "$tmp/err"'
NVFP4DBG_PROGRESS_INTERVAL=0 "$bin" report "$tmp/p.h5" --html "$tmp/p.html" --quiet >/dev/null 2>"$tmp/err"
ok "report --quiet: nothing on stderr" '[ ! -s "$tmp/err" ]'
NVFP4DBG_PROGRESS_INTERVAL=0 "$bin" report "$tmp/p.h5" --html "$tmp/p.html" --against "$tmp/p.h5" >/dev/null 2>"$tmp/err"
ok "report --against: four steps" 'grep -q "^nvfp4dbg: report: 1/4 steps (25%), reading the other trace" "$tmp/err"'
echo "prompt_cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
