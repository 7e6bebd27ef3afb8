#!/usr/bin/env python3
"""Small tokenizers with the real pipelines of the families nvfp4dbg supports, and the token ids the
`tokenizers` package (and transformers' apply_chat_template for --chat) gives for ~40 test strings,
for tests/tokenizer/test_tokenizer_conformance.c (no Python at test time).

For each family this writes golden/tokenizers/<family>/:
  tokenizer.json         trained here with tokenizers' BpeTrainer on a small mixed corpus (English,
                         code, digits, CJK, emoji, whitespace runs) to a few thousand tokens; its
                         normalizer / pre_tokenizer / post_processor / decoder are the family's own
                         (copied from the models' published tokenizer.json)
  tokenizer_config.json  the family's special tokens and its real chat_template string;
                         tokenizer_class PreTrainedTokenizerFast so transformers uses tokenizer.json as is
  cases.json             [{"text", "ids"} ...] from Tokenizer.encode(text) (special tokens added by the
                         post-processor), [{"chat", "ids", "rendered"}] from
                         apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True),
                         and the texts the tool must refuse ("error")
  manifest.json          versions, vocabulary size, what each file is

Families:
  llama3        Llama 3 / 3.1: Split(its regex, Isolated) + ByteLevel(use_regex false), ignore_merges,
                TemplateProcessing with <|begin_of_text|>; Llama 3.1 chat template (system block)
  llama3-0      the same tokenizer with the Llama 3.0 chat template (no system block)
  qwen2         Qwen2/2.5/3: NFC normalizer, Split(its regex) + ByteLevel, ChatML (Qwen2.5 template)
  qwen3         the same pipeline with Qwen3's template (no default system message)
  deepseek_v3   DeepSeek-V3: Sequence of three Splits (digits 1-3, CJK/kana runs, the main regex) +
                ByteLevel, empty normalizer Sequence, <｜User｜>/<｜Assistant｜> template
  mistral_nemo  Tekken-style byte-level (its Split regex), [INST]...[/INST] without spaces
  llama2        SentencePiece-style BPE: normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], no
                pre-tokenizer, byte_fallback <0xXX> tokens, fuse_unk, Mistral 7B v0.1 [INST] template
  mistral7b_v3  SentencePiece-style BPE with the newer export: Metaspace(prepend_scheme first, split
                false) pre-tokenizer, no normalizer, Mistral v0.3 template
  tiny          llama2's pipeline with 200 ids and no byte fallback (ids fit the synthetic checkpoints'
                vocabulary of 256: the CLI test's tokenizer)

Run: /path/to/venv/bin/python tools/conformance/make_tokenizers.py [OUTDIR]   (default golden/tokenizers)
"""
import json
import os
import random
import sys

import tokenizers
import transformers
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, decoders, trainers, Regex

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "golden", "tokenizers")
VOCAB = 3000

# ---- the corpus: deterministic, mixed ----
ENGLISH = """The quick brown fox jumps over the lazy dog. It's a sunny day, isn't it? We'll see what they've done.
Quantization maps each block of sixteen values to a shared scale and four-bit codes; the scale is stored in FP8.
When the model diverges, the debugger replays every stage on two paths and names the first one that differs.
She said: "I'd rather not", and he'd agreed. You're right, they're here, we're late, I'm sorry, you'll see.
Large language models are trained on trillions of tokens; inference servers batch requests for throughput.
Numbers such as 3.14159, 2,718, 1e-5 and 65536 appear often, as do dates like 2024-07-26 and times like 12:30.
THE HEADLINE WAS IN CAPITALS. CamelCaseNames and snake_case_names and kebab-case-names mix in code.
Hello, world! Hello world. hello WORLD? HELLO, World!!! ... --- *** ### @@@ $$$ %%% ^^^ &&& (((( )))) [[ ]] {{ }}
"""
CODE = """def forward(self, x):
    h = self.norm(x)
    for layer in self.layers:
        h = layer(h, mask=None)  # residual inside
    return self.head(h)

int main(int argc, char **argv) {
\tfor (int i = 0; i < argc; i++) printf("%s\\n", argv[i]);
\treturn 0;
}

#include <stdio.h>
const x = {"key": [1, 2, 3], 'other': null};   // JSON-ish
if (a != b && c >= d || e <= f) { x += 1; y -= 2; z *= 3; }
    indented    with    runs   of   spaces
\t\ttabs\tand\ttabs
"""
CJK = """量化模型的每一层都需要检查。我们在两条路径上重放每个阶段，并指出第一个出现差异的阶段。
日本語のテキストも含まれています。ひらがなとカタカナ、そして漢字。東京は大きな都市です。
한국어 문장도 조금 있습니다. 모델을 디버깅합니다.
"""
EMOJI = "Emoji 😀 😃 🚀 🔥 👍🏽 🇫🇷 ❤️ ✨ and symbols ™ © ® € £ ¥ → ← ≤ ≥ ± × ÷ ∞ café naïve résumé Ünïcödé Ελληνικά русский текст\n"


def corpus():
    rnd = random.Random(1234)
    words = (ENGLISH + CODE).split()
    lines = [ENGLISH, CODE, CJK, EMOJI] * 8
    syl = ["ka", "to", "ri", "en", "ma", "sh", "qu", "an", "ti", "on", "er", "st", "pr", "el", "in", "ou", "ch", "th", "or", "al"]
    for _ in range(3000):   # pseudo-words and CJK runs, so that the vocabulary reaches a few thousand
        w = ["".join(rnd.choice(syl) for _ in range(rnd.randint(1, 4))) for _ in range(rnd.randint(2, 10))]
        if rnd.random() < 0.3:
            w[0] = w[0].capitalize()
        if rnd.random() < 0.2:
            w.append("".join(chr(0x4E00 + rnd.randint(0, 400)) for _ in range(rnd.randint(2, 8))))
        lines.append(" ".join(w) + rnd.choice([".", ",", "!", "?", ":", ";", "", "\n"]))
    for _ in range(1500):
        n = rnd.randint(3, 14)
        s = " ".join(rnd.choice(words) for _ in range(n))
        if rnd.random() < 0.3:
            s += " " + str(rnd.randint(0, 10 ** rnd.randint(1, 9)))
        if rnd.random() < 0.2:
            s = "  " * rnd.randint(1, 4) + s
        if rnd.random() < 0.1:
            s += "\n\n"
        lines.append(s)
    return lines


# ---- the families' pipelines (from their published tokenizer.json) ----
LLAMA3_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
DSV3_RES = [r"\p{N}{1,3}", "[一-龥\u3040-ゟ゠-ヿ]+",
            r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"]
TEKKEN_RE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
             r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# chat templates: the models' own (tokenizer_config.json on the Hub), whitespace as published
LLAMA31_TEMPLATE = "{{- bos_token }}\n{%- if custom_tools is defined %}\n    {%- set tools = custom_tools %}\n{%- endif %}\n{%- if not tools_in_user_message is defined %}\n    {%- set tools_in_user_message = true %}\n{%- endif %}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n\n{#- This block extracts the system message, so we can slot it into the right place. #}\n{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n\n{#- System message + builtin tools #}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{%- if builtin_tools is defined or tools is not none %}\n    {{- \"Environment: ipython\\n\" }}\n{%- endif %}\n{%- if builtin_tools is defined %}\n    {{- \"Tools: \" + builtin_tools | reject(\"equalto\", \"code_interpreter\") | join(\", \") + \"\\n\\n\"}}\n{%- endif %}\n{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{%- if tools is not none and not tools_in_user_message %}\n    {{- \"You have access to the following functions. To call a function, please respond with JSON for a function call.\" }}\n    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n    {{- \"Do not use variables.\\n\\n\" }}\n    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n{%- endif %}\n{{- system_message }}\n{{- \"<|eot_id|>\" }}\n\n{%- for message in messages %}\n    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n"
LLAMA30_TEMPLATE = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
QWEN25_TEMPLATE = "{%- if messages[0]['role'] == 'system' %}\n    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n{%- else %}\n    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n{%- endif %}\n{%- for message in messages %}\n    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\" and not message.tool_calls) %}\n        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    {%- elif message.role == \"assistant\" %}\n        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n"
QWEN3_TEMPLATE = "{%- for message in messages %}\n    {%- if message.role == \"user\" or message.role == \"system\" %}\n        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    {%- elif message.role == \"assistant\" %}\n        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking is defined and enable_thinking is false %}\n        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}"
DSV3_TEMPLATE = "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', is_first_sp=true) %}{%- for message in messages %}{%- if message['role'] == 'system' %}{%- if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}{% set ns.is_first_sp = false %}{%- else %}{% set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}{%- endif %}{%- endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is not none %}{%- set ns.is_tool = false -%}{{'<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor -%}{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜>'}}{% endif %}"
MISTRAL_V1_TEMPLATE = "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
MISTRAL_V3_TEMPLATE = "{{- bos_token }}\n{%- for message in messages %}\n    {%- if message[\"role\"] == \"user\" %}\n        {{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}\n    {%- elif message[\"role\"] == \"assistant\" %}\n        {{- \" \" + message[\"content\"] + eos_token}}\n    {%- endif %}\n{%- endfor %}\n"
NEMO_TEMPLATE = "{{- bos_token }}\n{%- for message in messages %}\n    {%- if message[\"role\"] == \"user\" %}\n        {{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}\n    {%- elif message[\"role\"] == \"assistant\" %}\n        {{- message[\"content\"] + eos_token}}\n    {%- endif %}\n{%- endfor %}\n"


def bytelevel_pre(regexes):
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in regexes] +
                                   [pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])


def template(bos_tok, bos_id):
    return processors.TemplateProcessing(single=f"{bos_tok} $A", pair=f"{bos_tok} $A {bos_tok} $B",
                                         special_tokens=[(bos_tok, bos_id)])


def train_bytelevel(regexes, specials, normalizer=None, ignore_merges=False):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = bytelevel_pre(regexes)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=2, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             show_progress=False)
    tok.train_from_iterator(corpus(), trainer=tr)
    tok.add_special_tokens(specials)     # after the vocabulary, as the families number them
    return tok


def train_sentencepiece(metaspace, vocab_size=VOCAB, byte_tokens=True, limit_alphabet=150):
    """SentencePiece-style BPE: trained on Metaspace-split words (pieces never cross a space), then
    the vocabulary laid out as Llama 2's: <unk> <s> </s>, <0x00>..<0xFF>, the trained pieces."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=byte_tokens, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, limit_alphabet=limit_alphabet, show_progress=False,
                             special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(corpus(), trainer=tr)
    j = json.loads(tok.to_str())
    old = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256 if byte_tokens else 0):
        vocab["<0x%02X>" % b] = len(vocab)
    for t, _ in old:
        if t not in vocab:
            vocab[t] = len(vocab)
    j["model"]["vocab"] = vocab
    for a in j["added_tokens"]:
        a["id"] = vocab[a["content"]]
    if metaspace:
        j["normalizer"] = None
        j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
    else:
        j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                                {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
        j["pre_tokenizer"] = None
    j["decoder"] = {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                                     {"type": "ByteFallback"}, {"type": "Fuse"},
                                                     {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    tok = Tokenizer.from_str(json.dumps(j))
    tok.post_processor = template("<s>", 1)
    return tok


def special(content):
    return tokenizers.AddedToken(content, special=True, normalized=False)


def families():
    llama3 = train_bytelevel([LLAMA3_RE], [special(s) for s in ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                                                 "<|end_header_id|>", "<|eot_id|>"]], ignore_merges=True)
    # a whole word in the vocabulary that the merges do not reach: only ignore_merges gives its id
    j = json.loads(llama3.to_str())
    j["model"]["vocab"]["Ġquantizerzz"] = max(max(j["model"]["vocab"].values()), max(a["id"] for a in j["added_tokens"])) + 1
    llama3 = Tokenizer.from_str(json.dumps(j))
    bos = llama3.token_to_id("<|begin_of_text|>")
    llama3.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False), template("<|begin_of_text|>", bos)])
    qwen = train_bytelevel([QWEN2_RE], [special(s) for s in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]],
                           normalizer=normalizers.NFC())
    qwen.post_processor = processors.ByteLevel(trim_offsets=False)
    ds = train_bytelevel(DSV3_RES, [special(s) for s in ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"]],
                         normalizer=normalizers.Sequence([]))
    ds.post_processor = processors.ByteLevel(trim_offsets=False)
    nemo = train_bytelevel([TEKKEN_RE], [special(s) for s in ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]])
    nemo.post_processor = template("<s>", nemo.token_to_id("<s>"))
    llama2 = train_sentencepiece(metaspace=False)
    m7 = train_sentencepiece(metaspace=True)
    # ids below 256: a prompt the synthetic checkpoints (vocabulary 256) take, for the CLI test
    tiny = train_sentencepiece(metaspace=False, vocab_size=200, byte_tokens=False, limit_alphabet=60)
    return [
        ("llama3", llama3, LLAMA31_TEMPLATE, "<|begin_of_text|>", "<|eot_id|>", "Llama 3.1 (Split regex, ByteLevel, ignore_merges)"),
        ("llama3-0", llama3, LLAMA30_TEMPLATE, "<|begin_of_text|>", "<|eot_id|>", "Llama 3.0 template on the Llama 3 tokenizer"),
        ("qwen2", qwen, QWEN25_TEMPLATE, None, "<|im_end|>", "Qwen2/2.5 (NFC, Split regex, ByteLevel, ChatML)"),
        ("qwen3", qwen, QWEN3_TEMPLATE, None, "<|im_end|>", "Qwen3 template on the Qwen2 tokenizer"),
        ("deepseek_v3", ds, DSV3_TEMPLATE, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "DeepSeek-V3 (Sequence of Splits, ByteLevel)"),
        ("mistral_nemo", nemo, NEMO_TEMPLATE, "<s>", "</s>", "Mistral-Nemo Tekken-style byte-level"),
        ("llama2", llama2, MISTRAL_V1_TEMPLATE, "<s>", "</s>", "SentencePiece-style BPE (Prepend/Replace, byte_fallback), Mistral v0.1 template"),
        ("tiny", tiny, MISTRAL_V1_TEMPLATE, "<s>", "</s>", "SentencePiece-style BPE of 200 ids without byte fallback (unknown characters fuse to <unk>), for tests/tokenizer/prompt_cli.sh"),
        ("mistral7b_v3", m7, MISTRAL_V3_TEMPLATE, "<s>", "</s>", "SentencePiece-style BPE (Metaspace first), Mistral v0.3 template"),
    ]


STRING_MERGES = ("llama3", "llama2")

TEXTS = [
    "", "Hello", "Hello world", " Hello world", "Hello world ", "  leading two", "trailing two  ", "a  b   c    d",
    "line one\nline two", "\n\nblank lines\n\n\n", "tab\tseparated\tvalues", "\t\tindented\n\t\tcode", "mixed \t \n whitespace",
    "It's what we'll do; they've said I'd, you're, I'm.", "IT'S LOUD AND WE'LL SHOUT", "don't won't can't",
    "1234567890", "3.14159 and 2,718", "year 2024-07-26 at 12:30", "x = 100000000000000", "１２３ full-width digits",
    "def f(x):\n    return x ** 2  # square", "if (a != b && c >= d) { x += 1; }", "#include <stdio.h>", "snake_case kebab-case CamelCase",
    "量化模型的每一层", "日本語のテキスト、カタカナとひらがな", "한국어 문장", "mixed English 和中文 text",
    "emoji 😀🚀🔥 and 👍🏽", "flags 🇫🇷 hearts ❤️", "café naïve résumé", "Ελληνικά и русский", "symbols ™ © € → ≤ ∞",
    "unseen ǅ ꙮ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "!!!???...", "   ", "\n", "a", "The quick brown fox jumps over the lazy dog.",
]


def special_texts(name):
    if name.startswith("llama3"):
        return ["the quantizerzz works (ignore_merges)", "<|begin_of_text|>Hello", "text <|eot_id|> more", "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"]
    if name.startswith("qwen"):
        return ["<|im_start|>user\nhi<|im_end|>", "a<|endoftext|>b", "<|im_end|><|im_end|>"]
    if name == "deepseek_v3":
        return ["<｜User｜>hi<｜Assistant｜>", "x <｜end▁of▁sentence｜> y"]
    return ["<s>[INST] hi [/INST]", "a</s>b", "<s> leading space after bos", "text<s>"]


CHATS = ["Hello", "What is 2+2?", "  spaced out  ", "line\nbreak", "量化是什么？", "emoji 🚀 ok"]


def main():
    os.makedirs(OUT, exist_ok=True)
    saved = {}
    for name, tok, tmpl, bos, eos, what in families():
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        tj = os.path.join(d, "tokenizer.json")
        if os.path.lexists(tj):
            os.remove(tj)
        if id(tok) in saved:   # the same tokenizer under another template: a link, not a copy
            os.symlink(os.path.join("..", saved[id(tok)], "tokenizer.json"), tj)
        else:
            tok.save(tj)
            saved[id(tok)] = name
            if name in STRING_MERGES:   # the older "a b" spelling of merges, as Llama 3's published file has it
                with open(tj, encoding="utf-8") as f:
                    j = json.load(f)
                j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
                with open(tj, "w", encoding="utf-8") as f:
                    json.dump(j, f, ensure_ascii=False, indent=2)
        cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": tmpl, "bos_token": bos, "eos_token": eos,
               "clean_up_tokenization_spaces": False, "model_max_length": 131072}
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False, indent=1)
        fast = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        hf = transformers.AutoTokenizer.from_pretrained(d)
        cases = []
        for t in TEXTS + special_texts(name):
            ids = fast.encode(t).ids
            assert hf(t)["input_ids"] == ids, (name, t)
            cases.append({"text": t, "ids": ids})
        chats = []
        for t in CHATS:
            msgs = [{"role": "user", "content": t}]
            rendered = hf.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
            ids = hf.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            ids = list(ids)
            assert ids == fast.encode(rendered, add_special_tokens=False).ids, (name, t)
            chats.append({"chat": t, "rendered": rendered, "ids": ids})
        errors = []
        if name.startswith("qwen"):
            errors.append({"text": "cafe\u0301", "error": "NFC"})
        doc = {"family": name, "cases": cases, "chats": chats, "errors": errors}
        with open(os.path.join(d, "cases.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=0)
        manifest = {"family": name, "what": what, "vocab_size": fast.get_vocab_size(with_added_tokens=True),
                    "corpus": "tools/conformance/make_tokenizers.py corpus() (seed 1234)",
                    "expected_ids": "tokenizers.Tokenizer.encode(text).ids (also checked equal to transformers' tokenizer(text))",
                    "expected_chat": "transformers apply_chat_template([{role: user, content}], add_generation_prompt=True, tokenize=True)",
                    "versions": {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__,
                                 "python": sys.version.split()[0]}}
        with open(os.path.join(d, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)
        print(name, fast.get_vocab_size(), os.path.getsize(os.path.join(d, "tokenizer.json")), "bytes")


if __name__ == "__main__":
    main()
