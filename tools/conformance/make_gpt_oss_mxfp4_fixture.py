#!/usr/bin/env python3
"""gpt-oss with its experts natively in MXFP4, as the release stores them (issue 19).

Writes golden/conformance/gpt_oss_mxfp4/:
  mxfp4/                  a tiny random GptOssForCausalLM (make_gpt_oss_fixture.py's config, sinks, biases,
                          YaRN, alternating sliding window, gate_up x5 so that the SwiGLU clamp is hit) with
                          intermediate_size 96 (the release's blocks need I % 32 == 0; the gpt_oss fixture's
                          48 is not; 2I = 192 != H = 64 != I keeps every transposition visible). Its experts
                          in the release's layout: model.layers.L.mlp.experts.{gate_up,down}_proj_blocks U8
                          [E, N, K/32, 16] (low nibble first), _scales U8 [E, N, K/32] (E8M0), _bias BF16 [E, N],
                          config quantization_config {quant_method: mxfp4, modules_to_not_convert: the
                          release's list}; everything else BF16.
                          The codes and exponents are made here with the TRITON rule of docs/formats.md
                          (triton_kernels' downcast_to_mxfp_torch with ROUND_UP, the quantizer of the release
                          and of transformers' quantize_to_mxfp4), transcribed in torch below: nvfp4dbg has
                          no MXFP4 checkpoint writer, and transformers' own quantizer needs triton_kernels.
  dequantized/            transformers' own dequantization of mxfp4/: GptOssForCausalLM.from_pretrained(mxfp4/,
                          quantization_config=Mxfp4Config(dequantize=True)) (integrations/mxfp4.py,
                          convert_moe_packed_tensors, BF16), its state_dict saved as a plain BF16 checkpoint
                          (fused gate_up_proj [E, H, 2I] / down_proj [E, I, H]); the suite checks our loader's
                          MXFP4 dequantization against it bit for bit and uses it as the original
                          (--reference-checkpoint) of planted faults
  reference.safetensors   transformers' BF16 forward of mxfp4/ so loaded (hidden_states.i, layer_out.i, logits)
  reference_fp32.safetensors  the same model's eager FP32 forward (from_pretrained(dtype=float32), model.float()),
                          for --ref-numerics fp32-exact (make_fp32_references.py's tensors)
  manifest.json           tokens, seed, versions, config, the rule, and the checks made here
Only for making fixtures (python with torch, transformers); the suite reads the files.
Usage: python tools/conformance/make_gpt_oss_mxfp4_fixture.py [--out golden/conformance]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_family_fixtures as mff  # noqa: E402  (first: it sets the offline environment transformers reads)

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import make_fp32_references as mfr  # noqa: E402
import make_gpt_oss_fixture as mgo  # noqa: E402

KIND = "gpt_oss_mxfp4"
INTERMEDIATE = 96
NOT_CONVERTED = ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]


def config():
    c = mgo.config()
    c.intermediate_size = INTERMEDIATE
    return c


def quant_triton(w):
    """TRITON rule along the last dim (32-blocks) of w [..., K] -> (codes U8 [..., K], exponents U8 [..., K/32]).
    Block scale: amax / 6 in FP32 rounded up to a power of two on its bits ((b + 0x7FFFFF) & 0x7F800000);
    element: x times the inverse scale, then E2M1 from the float's bits, nearest with ties away from zero
    (((exp << 2 | top two mantissa bits) + 1) >> 1, saturated at code 7), subnormals shifted in first."""
    x = w.float().reshape(*w.shape[:-1], w.shape[-1] // 32, 32)
    amax = x.abs().amax(dim=-1, keepdim=True)
    bits = (amax / 6.0).view(torch.int32)
    rbits = (bits + 0x7FFFFF) & 0x7F800000
    scale = rbits.view(torch.float32)
    inv = torch.where(scale == 0, torch.zeros_like(scale), 1.0 / scale)
    q = (x * inv).reshape(w.shape).contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    sign = (q >> 31) & 1
    ex = (q >> 23) & 0xFF
    man = q & 0x7FFFFF
    sub = ex < 127
    man = torch.where(sub, (0x400000 | (man >> 1)) >> (127 - ex - 1).clamp(min=0, max=63), man)
    ex = torch.clamp(ex, min=126) - 126
    code = torch.clamp((((ex << 2) | (man >> 21)) + 1) >> 1, max=7)
    codes = ((sign << 3) | code).to(torch.uint8)
    exps = (rbits >> 23).squeeze(-1).to(torch.uint8)
    return codes, exps


def pack(codes):
    """[..., K] nibbles -> blocks [..., K/32, 16], element 2j in the low nibble."""
    p = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return p.reshape(*codes.shape[:-1], codes.shape[-1] // 32, 16).contiguous()


def own_dequant(blocks, exps):
    """e2m1(code) * 2^(b - 127) in FP32, [E, N, K] (only a cross-check of the packing here)."""
    lut = torch.tensor([0.0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
    b = blocks.to(torch.int64)
    v = torch.stack([lut[b & 15], lut[b >> 4]], dim=-1).reshape(*blocks.shape[:-1], 32)
    v = v * torch.pow(2.0, exps.to(torch.float32) - 127).unsqueeze(-1)
    return v.reshape(*blocks.shape[:-2], -1)


def write_mxfp4(bf16_dir, out_dir, notes):
    """bf16_dir's checkpoint with every layer's fused experts in the release's MXFP4 layout."""
    t = load_file(os.path.join(bf16_dir, "model.safetensors"))
    out, stats = {}, {"tensors": 0, "blocks": 0, "codes_saturated": 0, "max_rel_err": 0.0}
    for k, v in t.items():
        if k.endswith("mlp.experts.gate_up_proj") or k.endswith("mlp.experts.down_proj"):
            wt = v.transpose(1, 2).contiguous()          # [E, in, out] -> [E, N, K]: blocks along the input
            codes, exps = quant_triton(wt)
            blocks = pack(codes)
            back = own_dequant(blocks, exps)
            stats["tensors"] += 1
            stats["blocks"] += exps.numel()
            stats["codes_saturated"] += int(((codes & 7) == 7).sum())
            stats["max_rel_err"] = max(stats["max_rel_err"], float((back - wt.float()).norm() / wt.float().norm()))
            out[k + "_blocks"] = blocks
            out[k + "_scales"] = exps.contiguous()
        else:
            out[k] = v
    save_file(out, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(bf16_dir, "config.json")))
    cfg["quantization_config"] = {"modules_to_not_convert": NOT_CONVERTED, "quant_method": "mxfp4"}
    json.dump(cfg, open(os.path.join(out_dir, "config.json"), "w"), indent=2)
    shutil.copy(os.path.join(bf16_dir, "generation_config.json"), out_dir)
    notes["mxfp4_quantization"] = stats


@torch.no_grad()
def load_mxfp4(path, dtype):
    import transformers as tf
    m, info = mgo.cls().from_pretrained(path, dtype=dtype, attn_implementation="eager",
                                        quantization_config=tf.Mxfp4Config(dequantize=True),
                                        output_loading_info=True)
    if any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")):
        raise SystemExit(f"{path}: transformers does not load it cleanly: {info}")
    if dtype == torch.float32:
        m = m.float()
    return m.eval()


@torch.no_grad()
def make(root):
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    out = os.path.join(root, KIND)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    torch.manual_seed(mff.SEED)
    model = mgo.cls()._from_config(config(), dtype=torch.bfloat16, attn_implementation="eager").eval()
    mgo.randomize(model, torch.Generator().manual_seed(mff.SEED))
    notes = {"model": KIND, "tokens": mff.TOKENS, "seed": mff.SEED, "class": type(model).__name__,
             "versions": mff.versions(), "attn_implementation": "eager", "gate_up_proj_scale": mgo.GATE_UP_SCALE,
             "quantized_by": "tools/conformance/make_gpt_oss_mxfp4_fixture.py quant_triton: the TRITON rule of "
                             "docs/formats.md (triton_kernels downcast_to_mxfp_torch, ROUND_UP), transcribed in torch; "
                             "blocks along each expert's input dimension as the release stores them"}
    with tempfile.TemporaryDirectory() as tmp:
        bf16 = os.path.join(tmp, "bf16")
        model.save_pretrained(bf16)
        mx = os.path.join(out, "mxfp4")
        os.makedirs(mx)
        write_mxfp4(bf16, mx, notes)
    stock = load_mxfp4(mx, torch.bfloat16)
    notes["experts_implementation"] = stock.config._experts_implementation
    # transformers' experts are its dequantization of the stored blocks, and equal our own decoding
    st = load_file(os.path.join(mx, "model.safetensors"))
    checks = {"experts_equal_convert_moe_packed_tensors": 0, "experts_equal_e2m1_times_2^(b-127)": 0}
    for name, p in stock.named_parameters():
        if name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
            blocks, scales = st[name + "_blocks"], st[name + "_scales"]
            if torch.equal(p, convert_moe_packed_tensors(blocks, scales)):
                checks["experts_equal_convert_moe_packed_tensors"] += 1
            if torch.equal(p.float(), own_dequant(blocks, scales).transpose(1, 2)):
                checks["experts_equal_e2m1_times_2^(b-127)"] += 1
    sd = {k: v.contiguous() for k, v in stock.state_dict().items()}
    deq = os.path.join(out, "dequantized")
    os.makedirs(deq)
    save_file(sd, os.path.join(deq, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(mx, "config.json")))
    cfg.pop("quantization_config")
    json.dump(cfg, open(os.path.join(deq, "config.json"), "w"), indent=2)
    ref = mff.forward_record(stock)
    save_file(ref, os.path.join(out, "reference.safetensors"))
    again = mff.forward_record(mgo.cls().from_pretrained(deq, dtype=torch.bfloat16, attn_implementation="eager").eval())
    checks["dequantized_forward_bit_equal"] = all(torch.equal(ref[k], again[k]) for k in ref)
    f32 = mff.forward_record(load_mxfp4(mx, torch.float32))
    save_file(mfr.kept(f32), os.path.join(out, "reference_fp32.safetensors"))
    fvb = {k: mff.rel_l2(ref[k], f32[k]) for k in ref if k != "input_ids"}
    fvb["top1_agreement"] = float((ref["logits"].argmax(-1) == f32["logits"].argmax(-1)).double().mean())
    notes["transformers_fp32_vs_bf16"] = fvb
    notes["swiglu_clamp_hits"] = mgo.clamp_hits(stock)
    notes["checks"] = checks
    notes["config"] = json.load(open(os.path.join(mx, "config.json")))
    json.dump(notes, open(os.path.join(out, "manifest.json"), "w"), indent=1)
    print(json.dumps({"checks": checks, "quant": notes["mxfp4_quantization"], "fp32_vs_bf16": fvb}, indent=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="golden/conformance")
    make(ap.parse_args().out)


if __name__ == "__main__":
    main()
