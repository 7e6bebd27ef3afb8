#!/usr/bin/env python3
"""DeepSeek-V4's native release layout (issue 33) made from the deepseek_v4 conformance model.

DeepSeek-V4-Flash-0731 ships its own checkpoint format, not compressed-tensors or ModelOpt
(shared/research/model-arch.md section 4; field-bug-reports.md N15, verl #7895, vllm #53709):
  * names without the `model.` prefix (layers.L.attn.wq_a, layers.L.attn.kv_norm,
    layers.L.ffn.experts.E.w1, embed, head, norm, hc_head_fn);
  * attention projections (wq_a, wkv, wq_b, wo_a, wo_b, indexer.wq_b) and shared experts (w1, w2, w3):
    F8_E4M3 weight + `.scale` F8_E8M0 [ceil(out/128), ceil(in/128)], one power of two per 128x128
    block (scale_fmt ue8m0: 2^ceil(log2(amax/448)));
  * routed experts: MXFP4 in an I8 container, [out, in/2] (element 2j in the low nibble) + `.scale`
    F8_E8M0 [out, in/32] (2^ceil(log2(amax/6)) per 32, no clipping);
  * compressor, indexer weights_proj / compressor, router, norms, hyper-connections: as saved (BF16/F32);
  * config.json: quantization_config {quant_method fp8, fmt e4m3, scale_fmt ue8m0, weight_block_size
    [128, 128], activation_scheme dynamic} and `expert_dtype: fp4`, the only marker of the FP4 experts.

Writes golden/conformance/deepseek_v4/native/{config.json, model.safetensors} and
golden/conformance/deepseek_v4/reference_native.safetensors: transformers' BF16 eager forward of the fixed
prompt (make_fixtures.forward_record) on the BF16 model with every quantized weight replaced by its
decoded value (exact in BF16: E4M3 and E2M1 times a power of two), the reference path's semantics.
The decoding here is written from the layout above, not from nvfp4dbg.

Only for making fixtures: nothing in the build or the tests runs this.
Usage: python tools/conformance/make_deepseek_v4_native.py [--out golden/conformance]
"""
import argparse
import json
import math
import os
import re
import shutil
import struct
import sys
import tempfile

import numpy as np
import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures  # noqa: E402  (forward_record, TOKENS)

FP8 = re.compile(r"^model\.layers\.\d+\.(attn\.(wq_a|wkv|wq_b|wo_a|wo_b|indexer\.wq_b)|ffn\.shared_experts\.w[123])\.weight$")
MXFP4 = re.compile(r"^model\.layers\.\d+\.ffn\.experts\.\d+\.w[123]\.weight$")
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def native_name(n):
    special = {"model.embed_tokens.weight": "embed.weight", "model.norm.weight": "norm.weight",
               "model.hc_head.hc_fn": "hc_head_fn", "model.hc_head.hc_base": "hc_head_base",
               "model.hc_head.hc_scale": "hc_head_scale", "head.weight": "head.weight"}
    if n in special:
        return special[n]
    assert n.startswith("model.layers."), n
    # transformers saves the attention's KV norm as attn.norm (the reverse of its `.norm.` -> `.kv_norm.`
    # load rule); DeepSeek's reference module names it kv_norm (model-arch.md section 4)
    return re.sub(r"\.attn\.norm\.weight$", ".attn.kv_norm.weight", n[len("model."):])


def pow2_ceil(x):
    return 2.0 ** math.ceil(math.log2(x)) if x > 0 else 1.0


def quant_fp8_block(w):
    """F8_E4M3 codes and E8M0 exponent bytes per 128x128 block; the decoded BF16 weight."""
    w = w.float()
    out, inn = w.shape
    bo, bi = math.ceil(out / 128), math.ceil(inn / 128)
    scale = torch.empty(bo, bi)
    for i in range(bo):
        for j in range(bi):
            blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
            scale[i, j] = pow2_ceil(float(blk.abs().max()) / 448.0)
    full = scale.repeat_interleave(128, 0)[:out].repeat_interleave(128, 1)[:, :inn]
    codes = (w / full).to(torch.float8_e4m3fn)
    deq = (codes.float() * full).to(torch.bfloat16)
    exps = (torch.log2(scale).round().to(torch.int32) + 127).to(torch.uint8)
    return codes.view(torch.uint8).numpy().tobytes(), exps.numpy().tobytes(), deq


def e2m1_codes(v):
    """Round to the E2M1 grid, ties to the even code; returns sign|magnitude codes (0..15)."""
    a = v.abs().unsqueeze(-1)
    idx = torch.arange(8)
    dist = (a - E2M1).abs() + (idx % 2).float() * 1e-7  # a tie goes to the even code
    mag = dist.argmin(-1)
    return torch.where(v < 0, mag + 8, mag).to(torch.uint8)


def quant_mxfp4(w):
    """I8 bytes [out, in/2] (element 2j low nibble) and E8M0 bytes [out, in/32]; the decoded weight."""
    w = w.float()
    out, inn = w.shape
    assert inn % 32 == 0
    blocks = w.view(out, inn // 32, 32)
    amax = blocks.abs().amax(-1)
    scale = torch.tensor([[pow2_ceil(float(a) / 6.0) for a in row] for row in amax])
    codes = e2m1_codes(blocks / scale.unsqueeze(-1)).view(out, inn)
    mag = E2M1[(codes & 7).long()]
    deq = (torch.where(codes >= 8, -mag, mag).view(out, inn // 32, 32) * scale.unsqueeze(-1)).view(out, inn)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8)
    exps = (torch.log2(scale).round().to(torch.int32) + 127).to(torch.uint8)
    return packed.numpy().tobytes(), exps.numpy().tobytes(), deq.to(torch.bfloat16)


def write_safetensors(path, entries):
    """entries: [(name, dtype string, shape, bytes)] written as safetensors (header, then data)."""
    header, off, blobs = {}, 0, []
    for name, dt, shape, data in entries:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


DT = {torch.bfloat16: "BF16", torch.float32: "F32", torch.int64: "I64", torch.int32: "I32"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="golden/conformance")
    args = ap.parse_args()
    base = os.path.join(args.out, "deepseek_v4")
    bf16_dir = os.path.join(base, "bf16")
    tensors = load_file(os.path.join(bf16_dir, "model.safetensors"))
    entries, deq = [], {}
    counts = {"fp8": 0, "mxfp4": 0, "kept": 0}
    for n in sorted(tensors):
        t = tensors[n]
        nn = native_name(n)
        if FP8.match(n):
            codes, exps, d = quant_fp8_block(t)
            out, inn = t.shape
            entries.append((nn, "F8_E4M3", t.shape, codes))
            entries.append((nn[:-len(".weight")] + ".scale", "F8_E8M0", (math.ceil(out / 128), math.ceil(inn / 128)), exps))
            deq[n] = d
            counts["fp8"] += 1
        elif MXFP4.match(n):
            packed, exps, d = quant_mxfp4(t)
            out, inn = t.shape
            entries.append((nn, "I8", (out, inn // 2), packed))
            entries.append((nn[:-len(".weight")] + ".scale", "F8_E8M0", (out, inn // 32), exps))
            deq[n] = d
            counts["mxfp4"] += 1
        else:
            if t.dtype == torch.int64:  # tid2eid: I32 in the release
                t = t.to(torch.int32)
            entries.append((nn, DT[t.dtype], t.shape, t.contiguous().view(torch.uint8).numpy().tobytes()))
            counts["kept"] += 1
    out_dir = os.path.join(base, "native")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), entries)
    cfg = json.load(open(os.path.join(bf16_dir, "config.json")))
    cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                                  "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}
    cfg["expert_dtype"] = "fp4"
    cfg.pop("dtype", None)
    cfg["torch_dtype"] = "bfloat16"
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    # the reference: the BF16 model with the decoded weights, transformers' eager forward
    with tempfile.TemporaryDirectory() as tmp:
        for f in os.listdir(bf16_dir):
            shutil.copy(os.path.join(bf16_dir, f), tmp)
        merged = dict(tensors)
        merged.update(deq)
        save_file(merged, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        import transformers as tf
        model = tf.DeepseekV4ForCausalLM.from_pretrained(tmp, dtype=torch.bfloat16, attn_implementation="eager").eval()
        ref = make_fixtures.forward_record(model)
    save_file(ref, os.path.join(base, "reference_native.safetensors"))
    notes = {"made_by": "tools/conformance/make_deepseek_v4_native.py", "from": "golden/conformance/deepseek_v4/bf16",
             "tensors": counts, "transformers": __import__("transformers").__version__, "torch": torch.__version__,
             "reference": "transformers eager BF16 forward with the decoded weights (reference_native.safetensors)"}
    with open(os.path.join(out_dir, "NOTES.json"), "w") as f:
        json.dump(notes, f, indent=1)
    print(f"native: {counts}, logits {tuple(ref['logits'].shape)}")


if __name__ == "__main__":
    main()
