#!/usr/bin/env python3
"""MXFP4 fixture (issue 19 item 3): MXFP4 weights made by other code, and their dequantization by
transformers and compressed-tensors, for the suite to check the loader against bit for bit.

Writes golden/conformance/mxfp4/:
  ct/                 golden/conformance/llama/bf16 quantized by llmcompressor.oneshot
                      QuantizationModifier(targets='Linear', scheme='MXFP4A16', ignore=['lm_head']),
                      save_compressed=True: compressed-tensors' mxfp4-pack-quantized format
                      (weight_packed U8 [N, K/2], weight_scale U8 E8M0 exponents [N, K/32])
  gptoss/             the same codes and exponents in gpt-oss's fused-expert layout under
                      quant_method "mxfp4": the gate_proj of layers 0 and 1 as the two "experts" of
                      model.layers.0.mlp.experts.gate_up_proj_{blocks [2, N, K/32, 16], scales [2, N, K/32]},
                      the up_proj of layers 0 and 1 likewise as down_proj, with a BF16 bias [2, N]
  dequant.safetensors transformers' own dequantization (integrations/mxfp4.py convert_moe_packed_tensors,
                      BF16 as it runs it) of every MXFP4 tensor, stored as F32 [N, K]: "<module>.weight"
                      for ct/, "<prefix>.<e>.<proj>.weight" for gptoss/
  manifest.json       versions, modules, and the checks made here: transformers' dequantization equals
                      compressed-tensors' MXFP4PackedCompressor.decompress bit for bit, and the scale bytes
                      equal the compressed-tensors rule 127 + floor(log2(round_to_power_2(amax))) - 2
Only for making fixtures (python with torch, transformers, compressed-tensors, llmcompressor); the suite
reads the files. Usage: python tools/conformance/make_mxfp4_fixture.py [--out golden/conformance]
"""
import argparse
import json
import os
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

import make_fixtures as mf  # noqa: E402


def read_all(path):
    with safe_open(path, "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def tf_dequant(blocks, scales):
    """transformers' gpt-oss dequantization of blocks [E, N, G, 16] / scales [E, N, G] -> [E, N, K]."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    out = convert_moe_packed_tensors(blocks, scales)  # [E, K, N] (GptOssExperts' in x out), BF16
    return out.transpose(1, 2).contiguous()


def ct_rule_bytes(w_bf16):
    """compressed-tensors' MX scale rule on the BF16 weight, per 32-block: byte = 127 +
    floor(log2(round_to_power_2(amax))) - 2 (quantization/utils/mxfp_utils.generate_mx_scales)."""
    from compressed_tensors.quantization.utils.mxfp_utils import generate_mx_scales
    n, k = w_bf16.shape
    amax = w_bf16.reshape(n, k // 32, 32).abs().amax(dim=-1)
    return generate_mx_scales(amax, 4).clamp(0, 255).to(torch.uint8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "golden", "conformance"))
    args = ap.parse_args()
    root = os.path.abspath(os.path.join(args.out, "mxfp4"))
    bf16_dir = os.path.abspath(os.path.join(args.out, "llama", "bf16"))
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)
    torch.manual_seed(mf.SEED)

    from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor
    from compressed_tensors.quantization import QuantizationScheme
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier

    model = mf.load_for_quant("llama", bf16_dir)
    bf16 = {n: p.detach().clone() for n, p in model.named_parameters()}
    recipe = QuantizationModifier(targets="Linear", scheme="MXFP4A16", ignore=["lm_head"])
    oneshot(model=model, recipe=recipe)
    ct_dir = os.path.join(root, "ct")
    model.save_pretrained(ct_dir, save_compressed=True)
    for fn in os.listdir(ct_dir):
        if fn not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(ct_dir, fn))
    cfg = json.load(open(os.path.join(ct_dir, "config.json")))
    qcfg = cfg["quantization_config"]
    scheme = QuantizationScheme(**list(qcfg["config_groups"].values())[0])
    t = read_all(os.path.join(ct_dir, "model.safetensors"))
    mods = sorted(k[: -len(".weight_packed")] for k in t if k.endswith(".weight_packed"))
    deq = {}
    checks = {"modules": len(mods), "tf_equals_ct_decompress": 0, "scale_bytes_equal_ct_rule": 0}
    for m in mods:
        packed, sc = t[m + ".weight_packed"], t[m + ".weight_scale"]
        n, k2 = packed.shape
        k = 2 * k2
        tfw = tf_dequant(packed.reshape(1, n, k // 32, 16), sc.reshape(1, n, k // 32))[0]
        ctw = MXFP4PackedCompressor.decompress({"weight_packed": packed, "weight_scale": sc}, scheme)["weight"]
        if not torch.equal(tfw.float(), ctw.float()):
            raise SystemExit(f"{m}: transformers' and compressed-tensors' dequantizations differ")
        checks["tf_equals_ct_decompress"] += 1
        if torch.equal(ct_rule_bytes(bf16[m + ".weight"].to(torch.bfloat16)), sc):
            checks["scale_bytes_equal_ct_rule"] += 1
        deq[m + ".weight"] = tfw.float().contiguous()

    # gpt-oss's layout: two layers' gate_proj / up_proj as the two experts of one fused tensor each
    gdir = os.path.join(root, "gptoss")
    os.makedirs(gdir)
    g = {}
    gen = torch.Generator().manual_seed(mf.SEED + 7)
    for proj, src in (("gate_up_proj", "mlp.gate_proj"), ("down_proj", "mlp.up_proj")):
        packed = torch.stack([t[f"model.layers.{i}.{src}.weight_packed"] for i in (0, 1)])
        sc = torch.stack([t[f"model.layers.{i}.{src}.weight_scale"] for i in (0, 1)])
        E, n, k2 = packed.shape
        blocks = packed.reshape(E, n, k2 // 16, 16).contiguous()
        scales = sc.reshape(E, n, k2 // 16).contiguous()
        pre = "model.layers.0.mlp.experts"
        g[f"{pre}.{proj}_blocks"] = blocks
        g[f"{pre}.{proj}_scales"] = scales
        g[f"{pre}.{proj}_bias"] = (0.5 * torch.randn(E, n, generator=gen)).to(torch.bfloat16)
        w = tf_dequant(blocks, scales)
        for e in range(E):
            deq[f"{pre}.{e}.{proj}.weight"] = w[e].float().contiguous()
    save_file(g, os.path.join(gdir, "model.safetensors"))
    gcfg = json.load(open(os.path.join(bf16_dir, "config.json")))
    gcfg["quantization_config"] = {"quant_method": "mxfp4",
                                   "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                              "model.embed_tokens", "lm_head"]}
    with open(os.path.join(gdir, "config.json"), "w") as f:
        json.dump(gcfg, f, indent=1)
    save_file(deq, os.path.join(root, "dequant.safetensors"))
    manifest = {
        "source": "golden/conformance/llama/bf16 (tools/conformance/make_fixtures.py)",
        "quantized_by": "llmcompressor.oneshot QuantizationModifier(targets='Linear', scheme='MXFP4A16', "
                        "ignore=['lm_head']), save_compressed=True (format mxfp4-pack-quantized)",
        "gptoss_layout": "ct/'s layers.{0,1}.mlp.gate_proj -> experts 0,1 of gate_up_proj, up_proj -> down_proj; "
                         "weight_packed [N, K/2] reshaped to blocks [N, K/32, 16], weight_scale [N, K/32] as scales",
        "dequantized_by": "transformers.integrations.mxfp4.convert_moe_packed_tensors (BF16), stored as F32 [N, K]",
        "modules": mods,
        "checks": checks,
        "versions": mf.versions(),
    }
    with open(os.path.join(root, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(json.dumps(checks))


if __name__ == "__main__":
    main()
