#!/usr/bin/env python3
"""Tokenizer variants derived from golden/tokenizers/tiny for tests/tokenizer (expected ids by the
tokenizers package, as make_tokenizers.py gives them):

  tiny-split    tiny with a pre_tokenizer of String-pattern Splits (tokenizers' Split with
                {"String": ...}, which PCRE2 compiles as a literal): "▁" merged with the next
                piece, then "l" isolated and "e" removed

Run with the tokenizers of make_tokenizers.py's manifest (0.23.3):
  python tools/conformance/make_tokenizer_variants.py
"""
import json
import os
import sys

import tokenizers
from tokenizers import Tokenizer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "golden", "tokenizers")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizers import TEXTS  # noqa: E402  the same test strings


def split(pattern, behavior):
    return {"type": "Split", "pattern": {"String": pattern}, "behavior": behavior, "invert": False}


def main():
    src = os.path.join(ROOT, "tiny")
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    tj["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        split("\u2581", "MergedWithNext"), split("l", "Isolated"), split("e", "Removed")]}
    d = os.path.join(ROOT, "tiny-split")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = f.read()
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        f.write(cfg)
    tok = Tokenizer.from_file(path)
    cases = [{"text": t, "ids": tok.encode(t).ids} for t in TEXTS + ["hello", "level needle", "elle"]]
    with open(os.path.join(d, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"family": "tiny-split", "cases": cases, "chats": [], "errors": []}, f, ensure_ascii=False, indent=0)
    manifest = {"family": "tiny-split",
                "what": "tiny with String-pattern Split pre-tokenizers (MergedWithNext, Isolated, Removed)",
                "made_by": "tools/conformance/make_tokenizer_variants.py from golden/tokenizers/tiny",
                "expected_ids": "tokenizers.Tokenizer.encode(text).ids",
                "versions": {"tokenizers": tokenizers.__version__, "python": sys.version.split()[0]}}
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("tiny-split", len(cases), "cases")


if __name__ == "__main__":
    main()
