#!/usr/bin/env python3
"""The real models' statistics that ground nvfp4dbg's rules (docs/real-models.md), printed as markdown.

For each built family (scripts/real-models.sh) and quantized variant: the input scales read as input
amax (compressed-tensors 2688/value, ModelOpt value*2688) against the median of the other modules
(what inspect's scale_convention rule compares with its 1e4 bar), the weight block-scale maxima per
fused group (global_misfit), and from `nvfp4dbg trace --reference-checkpoint bf16/` of the manifest's prompt: per layer, the
largest input amax of a linear, the lowest NVFP4 floor SQNR, the smallest margin SQNR - floor of an
isolated linear (the verdict's bar is 6 dB), the largest saturated share; and the final logits' KL and
top-1 of the chained production path against the reference path, and against the BF16 original
(the manifest's nvfp4_vs_bf16, transformers' own forward). Only for the docs; nothing in the build or the
tests runs it. Usage: python tools/real_models/figures.py BUILD/nvfp4dbg [FAMILY ...]
"""
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

from safetensors import safe_open

ROOT = os.environ.get("ND_REAL_CACHE", os.path.expanduser("~/.cache/nvfp4dbg-real"))


def input_scales(ckpt):
    out = {}
    for fn in sorted(os.listdir(ckpt)):
        if not fn.endswith(".safetensors"):
            continue
        with safe_open(os.path.join(ckpt, fn), "pt") as f:
            for k in f.keys():
                if k.endswith(".input_global_scale"):
                    out[k] = 2688.0 / f.get_tensor(k).float().item()
                elif k.endswith(".input_scale") and "weight" not in k:
                    out[k] = f.get_tensor(k).float().item() * 2688.0
    return out


def trace_rows(bin_, ckpt, tokens, original):
    # against the BF16 original: the floor is the original quantized the healthy way, so the margin
    # measures the checkpoint's own quantization, and the logits' figures are against the original
    with tempfile.TemporaryDirectory() as d:
        h5 = os.path.join(d, "t.h5")
        rc = subprocess.run([bin_, "trace", "--force", ckpt, "--tokens", tokens, "--reference-checkpoint", original, "--out", h5, "-q"],
                            capture_output=True).returncode
        js = subprocess.run([bin_, "show", h5, "--json"], capture_output=True, text=True).stdout
    return rc, json.loads(js)


def fmt(x, p=3):
    return "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{p}g}"


def family(bin_, fam):
    m = os.path.join(ROOT, "models", fam)
    man = json.load(open(os.path.join(m, "manifest.json")))
    tokens = ",".join(map(str, man["tokens"]))
    print(f"### {fam}: {man.get('class', '')}, {man['source'].get('general.name', '')} ({man['source'].get('file_type', '')})\n")
    for v in ("nvfp4", "nvfp4a16", "modelopt"):
        ck = os.path.join(m, v)
        if not os.path.isdir(ck):
            continue
        a = input_scales(ck)
        if a:
            vals = sorted(a.values())
            worst = max(a, key=lambda k: a[k] / statistics.median([x for j, x in a.items() if j != k]))
            med = statistics.median([x for j, x in a.items() if j != worst])
            print(f"- `{v}/`: {len(a)} input scales; input amax they mean: median {fmt(statistics.median(vals))}, "
                  f"largest {fmt(a[worst])} at `{worst.rsplit('.', 1)[0]}` = **{fmt(a[worst] / med)}x** the median of the others "
                  f"(scale_convention needs > 1e4x); values below 1 (CT) / above 1 (ModelOpt): "
                  f"{sum(1 for x in vals if x > 2688)}")
        rc, t = trace_rows(bin_, ck, tokens, os.path.join(m, "bf16"))
        rows = t["stages"]
        lin = [r for r in rows if r["op"] == "linear" and r["mode"] == "isolated" and r["quantized"]]
        margins = [(r["sqnr_db"] - r["floor_sqnr_db"], r["name"]) for r in lin
                   if r["floor_sqnr_db"] is not None and r["sqnr_db"] is not None]
        head = [r for r in rows if r["name"] == "lm_head" and r["mode"] == "chained"]
        kl = head[-1]["kl_div"] if head else None
        t1 = head[-1]["top1_agree"] if head else None
        mn = min(margins) if margins else (None, "")
        print(f"- `{v}/` trace: exit {rc}, {len(rows)} rows; smallest margin SQNR − floor of an isolated linear "
              f"{fmt(mn[0])} dB (`{mn[1]}`; the verdict's bar is −6 dB); final logits of the NVFP4 path against the BF16 "
              f"original: KL {fmt(kl)}, top-1 {fmt(t1)}")
        if v != "nvfp4":
            continue
        print("\n| layer | largest input amax (module) | lowest floor SQNR dB | smallest SQNR − floor dB | largest saturated share |")
        print("|---|---|---|---|---|")
        layers = sorted({r["layer"] for r in lin if r["layer"] >= 0})
        for L in layers:
            lr = [r for r in lin if r["layer"] == L]
            am = [(r["scale_mult"] and r["scale_ratio"] and 2688.0 * r["scale_ratio"] / r["scale_mult"], r["name"]) for r in lr
                  if r["scale_mult"] and r["scale_ratio"]]
            big = max(am) if am else (None, "")
            fl = min((r["floor_sqnr_db"] for r in lr if r["floor_sqnr_db"] is not None), default=None)
            mg = min((r["sqnr_db"] - r["floor_sqnr_db"] for r in lr if r["floor_sqnr_db"] is not None), default=None)
            sat = max((r["sat_frac"] for r in lr if r["sat_frac"] is not None), default=None)
            print(f"| {L} | {fmt(big[0])} ({big[1].split('.', 2)[-1]}) | {fmt(fl)} | {fmt(mg)} | {fmt(sat)} |")
        print()
    q = man.get("nvfp4_vs_bf16", {})
    print(f"- transformers' own forwards: NVFP4 (llmcompressor, decompressed) vs the BF16 original: top-1 {fmt(q.get('top1'))}, "
          f"logits rel L2 {fmt(q.get('rel_l2', {}).get('logits'))}; FP32 vs BF16 of the original: top-1 "
          f"{fmt(man.get('fp32_vs_bf16_top1'))}, logits rel L2 {fmt(man.get('fp32_vs_bf16_rel_l2', {}).get('logits'))}\n")


if __name__ == "__main__":
    b = os.path.abspath(sys.argv[1])
    fams = sys.argv[2:] or sorted(d for d in os.listdir(os.path.join(ROOT, "models")) if not d.endswith(".partial"))
    for fam in fams:
        family(b, fam)
