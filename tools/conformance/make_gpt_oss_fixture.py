#!/usr/bin/env python3
"""gpt-oss conformance fixture (issue 19), made with transformers' own GptOssForCausalLM.

Writes golden/conformance/gpt_oss/:
  bf16/                   a tiny random GptOssForCausalLM as save_pretrained writes it: 3 layers
                          (sliding, full, sliding attention; window 8 < the 32-token prompt), learned
                          sinks, q/k/v/o biases, YaRN rope as gpt-oss ships it (theta 150000, factor 32,
                          beta 32/1, original 4096, truncate false), 8 experts top-4, router with bias,
                          the experts fused as transformers keeps them (gate_up_proj [E, H, 2I] with gate
                          and up interleaved by column, down_proj [E, I, H], biases), intermediate 48 so
                          that H != 2I. gate_up_proj is scaled x5 so that the SwiGLU clamp (limit 7) is hit.
  reference.safetensors   transformers' BF16 forward of bf16/ (as loaded again): hidden_states.i,
                          layer_out.i, logits (make_family_fixtures.py's names)
  nvfp4/                  llmcompressor.oneshot NVFP4 W4A4 of bf16/ (its GptOss linearization: per-expert
                          gate_proj/up_proj/down_proj Linears with bias), save_compressed=True
  reference_nvfp4.safetensors  transformers' forward of nvfp4/ decompressed by compressed-tensors, the
                          per-expert weights put back into GptOssExperts' fused layout
  manifest.json           tokens, seed, versions, config, experts_implementation, transformers' own
                          FP32-vs-BF16 difference (the noise floor), how many SwiGLU inputs the clamp hit
Only for making fixtures (python with torch, transformers, llmcompressor); the suite reads the files.
Usage: python tools/conformance/make_gpt_oss_fixture.py [--out golden/conformance]
"""
import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_family_fixtures as mff  # noqa: E402  (first: it sets the offline environment transformers reads)

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402


KIND = "gpt_oss"
GATE_UP_SCALE = 5.0


def config():
    import transformers as tf
    return tf.GptOssConfig(vocab_size=256, hidden_size=64, intermediate_size=48, num_hidden_layers=3,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=8,
                           num_experts_per_tok=4, sliding_window=8, max_position_embeddings=131072,
                           initializer_range=0.1, tie_word_embeddings=False,
                           rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0,
                                            "beta_fast": 32.0, "beta_slow": 1.0,
                                            "original_max_position_embeddings": 4096, "truncate": False})


def cls():
    import transformers as tf
    return tf.GptOssForCausalLM


@torch.no_grad()
def randomize(model, gen):
    mff.randomize(model, gen)  # norms and .bias (attention projections, router)
    for name, p in model.named_parameters():
        if name.endswith(".sinks"):
            p.copy_(torch.randn(p.shape, generator=gen).to(p.dtype))
        elif name.endswith("_proj_bias"):
            p.copy_((0.5 * torch.randn(p.shape, generator=gen)).to(p.dtype))
        elif name.endswith("experts.gate_up_proj"):
            p.mul_(GATE_UP_SCALE)


@torch.no_grad()
def clamp_hits(model):
    """Fraction of gate inputs above 7 and of up inputs outside [-7, 7] in the forward (all experts' tokens)."""
    stats = {"gate_above": 0, "up_outside": 0, "n": 0}
    hooks = []
    for layer in mff.decoder_layers(model):
        ex = layer.mlp.experts
        orig = ex._apply_gate

        def wrap(gu, orig=orig):
            g, u = gu[..., ::2].float(), gu[..., 1::2].float()
            stats["gate_above"] += int((g > 7).sum())
            stats["up_outside"] += int((u.abs() > 7).sum())
            stats["n"] += g.numel()
            return orig(gu)
        ex._apply_gate = wrap
        hooks.append((ex, orig))
    mff.forward_record(model)
    for ex, orig in hooks:
        ex._apply_gate = orig
    return stats


@torch.no_grad()
def fp32_vs_bf16(bf16_dir, ref):
    m = cls().from_pretrained(bf16_dir, dtype=torch.float32, attn_implementation="eager").eval()
    f = mff.forward_record(m)
    out = {k: mff.rel_l2(ref[k], f[k]) for k in ref if k != "input_ids"}
    out["top1_agreement"] = float((ref["logits"].argmax(-1) == f["logits"].argmax(-1)).double().mean())
    return out


def refuse(deq_dir):
    """llmcompressor's per-expert Linears (experts.E.{gate,up,down}_proj.{weight,bias}) back into
    GptOssExperts' fused tensors: gate_up_proj[e][:, 0::2] = gate.T, [:, 1::2] = up.T, down_proj[e] = down.T."""
    path = os.path.join(deq_dir, "model.safetensors")
    t = load_file(path)
    out, experts = {}, {}
    for k, v in t.items():
        if ".mlp.experts." in k and k.split(".mlp.experts.")[1].split(".")[0].isdigit():
            pre, rest = k.split(".mlp.experts.")
            e, proj, kind = rest.split(".")
            experts.setdefault(pre, {}).setdefault(int(e), {})[(proj, kind)] = v
        else:
            out[k] = v
    for pre, es in experts.items():
        n = len(es)
        gw = [es[e][("gate_proj", "weight")] for e in range(n)]
        inter, hid = gw[0].shape
        gu = torch.empty(n, hid, 2 * inter, dtype=gw[0].dtype)
        gub = torch.empty(n, 2 * inter, dtype=gw[0].dtype)
        dn = torch.empty(n, inter, hid, dtype=gw[0].dtype)
        dnb = torch.empty(n, hid, dtype=gw[0].dtype)
        for e in range(n):
            gu[e][:, 0::2] = es[e][("gate_proj", "weight")].T
            gu[e][:, 1::2] = es[e][("up_proj", "weight")].T
            gub[e][0::2] = es[e][("gate_proj", "bias")]
            gub[e][1::2] = es[e][("up_proj", "bias")]
            dn[e] = es[e][("down_proj", "weight")].T
            dnb[e] = es[e][("down_proj", "bias")]
        out[f"{pre}.mlp.experts.gate_up_proj"] = gu.contiguous()
        out[f"{pre}.mlp.experts.gate_up_proj_bias"] = gub.contiguous()
        out[f"{pre}.mlp.experts.down_proj"] = dn.contiguous()
        out[f"{pre}.mlp.experts.down_proj_bias"] = dnb.contiguous()
    save_file(out, path, metadata={"format": "pt"})


def quantize(bf16_dir, out_dir, notes):
    import make_fixtures as mf
    ignore = ["lm_head", "re:.*mlp.router$"]
    ref, dec_w = mff.oneshot_nvfp4(cls(), bf16_dir, out_dir, ignore, moe=True, fix_decompressed=refuse)
    notes["quantized_by"] = ("llmcompressor.oneshot QuantizationModifier(targets='Linear', scheme='NVFP4', "
                             f"ignore={ignore!r}) under load_quantizable_moe (per-expert Linears), "
                             f"save_compressed=True; calibration {mf.CALIB_SAMPLES} x {mf.CALIB_LEN} random ids")
    notes["nvfp4_modules"] = len(dec_w)
    return ref


def make(root, nvfp4=True):
    out = os.path.join(root, KIND)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    torch.manual_seed(mff.SEED)
    model = cls()._from_config(config(), dtype=torch.bfloat16, attn_implementation="eager").eval()
    randomize(model, torch.Generator().manual_seed(mff.SEED))
    bf16 = os.path.join(out, "bf16")
    model.save_pretrained(bf16)
    stock = cls().from_pretrained(bf16, dtype=torch.bfloat16, attn_implementation="eager").eval()
    ref = mff.forward_record(stock)
    save_file(ref, os.path.join(out, "reference.safetensors"))
    notes = {"model": KIND, "tokens": mff.TOKENS, "seed": mff.SEED, "class": type(stock).__name__,
             "versions": mff.versions(), "attn_implementation": "eager",
             "experts_implementation": stock.config._experts_implementation,
             "gate_up_proj_scale": GATE_UP_SCALE, "swiglu_clamp_hits": clamp_hits(stock),
             "config": json.load(open(os.path.join(bf16, "config.json")))}
    notes["transformers_fp32_vs_bf16"] = fp32_vs_bf16(bf16, ref)
    if nvfp4:
        qref = quantize(bf16, os.path.join(out, "nvfp4"), notes)
        save_file(qref, os.path.join(out, "reference_nvfp4.safetensors"))
        notes["top1_bf16_vs_nvfp4_dequantized"] = float((qref["logits"].argmax(-1) == ref["logits"].argmax(-1)).double().mean())
    json.dump(notes, open(os.path.join(out, "manifest.json"), "w"), indent=1)
    print(KIND, "logits", tuple(ref["logits"].shape), "written to", out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="golden/conformance")
    ap.add_argument("--no-nvfp4", action="store_true")
    a = ap.parse_args()
    make(a.out, nvfp4=not a.no_nvfp4)


if __name__ == "__main__":
    main()
