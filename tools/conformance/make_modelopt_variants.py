#!/usr/bin/env python3
"""ModelOpt checkpoint variants of the llama conformance model, made by NVIDIA ModelOpt itself where it
runs on a CPU (issue 33), with the serving engine's forward of each as the production reference.

For each variant V this writes golden/conformance/llama/modelopt_<v>/ (mtq.quantize with ModelOpt's own
preset config, max calibration over make_fixtures' calibration ids, export_hf_checkpoint) and
golden/conformance/llama/production_<v>.safetensors: the fixed prompt's forward (make_fixtures.
forward_record) of the BF16 model whose quantized linears compute what the engine computes:
  w4a8  (W4A8_NVFP4_FP8_CFG): TensorRT-LLM's W4A8NVFP4FP8LinearMethod: x quantized to FP8 E4M3 per tensor
        with the static input_scale (sat(x / input_scale)), times the NVFP4 weight decoded from its
        32-element E4M3 block scales and weight_scale_2, accumulated in FP32, output BF16.
  w4a16 (W4A16_NVFP4_CFG): the NVFP4 weight decoded the same way (16-blocks) times the BF16 input.
  fos   (NVFP4_FOUR_OVER_SIX_CFG, ModelOpt 0.46+): weights by Four Over Six (MSE choice per block
        between mapping its amax to 6 or to 4, weight_scale_2 = amax/(6*256), block scales up to
        384), activations standard NVFP4 (input_scale = amax/2688); ModelOpt's MSE calibration calls a
        Triton kernel, given here in torch (cpu_static_blockwise_fp4_fake_quant). The checkpoint carries no
        marker: it is ordinary NVFP4 with other numbers. Written: reference_fos.safetensors, the
        BF16 model with the exported weights decoded into it (the reference path's semantics, as
        reference_awq's).
The decoding here is written from ModelOpt's export (not from nvfp4dbg): codes e2m1, element 2j in the
low nibble; weight = e2m1 * e4m3(weight_scale[block]) * weight_scale_2.

  awq   (NVFP4_AWQ, in ModelOpt's export layout): ModelOpt 0.47's AWQ calibration needs CUDA, so the
        AWQ step is done here as ModelOpt's awq_lite does it (per group of linears that read one
        input, q/k/v and gate/up, as ModelOpt's export averages them; scales s = amax(x)^a /
        amax(W)^(1-a) normalised by sqrt(max*min), a searched over 0, 0.25, 0.5, 0.75, 1 for the
        smallest output error of the fake-quantized linear on the calibration inputs), the weight
        replaced by W * s and the input multiplied by pre_quant_scale = 1/s (a forward pre-hook);
        then ModelOpt's own NVFP4_DEFAULT_CFG quantizes and exports (its calibrated input_scale is
        amax(x * pre_quant_scale) / 2688), and each linear gets `pre_quant_scale` [K] BF16 beside
        its tensors with hf_quant_config's quant_algo NVFP4_AWQ and pre_quant_scale: true, as
        ModelOpt's export writes a module whose scale is not folded into the layer before (o_proj
        under GQA, experts). Reference: reference_awq.safetensors, the BF16 model with the exported
        weights decoded and the input times pre_quant_scale (rounded to BF16).

Only for making fixtures: nothing in the build or the tests runs this.
Usage: python tools/conformance/make_modelopt_variants.py [--out golden/conformance]
       (the venv of requirements.txt plus nvidia-modelopt==0.47.0)
"""
import argparse
import copy
import json
import os
import sys

os.environ.setdefault("USE_HUB_KERNELS", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
import make_fixtures as mf  # noqa: E402

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
# variant: (ModelOpt preset, weight block, FP8 activations, the forward written and its file)
VARIANTS = {"w4a8": ("W4A8_NVFP4_FP8_CFG", 32, True, "production_w4a8"),
            "w4a16": ("W4A16_NVFP4_CFG", 16, False, "production_w4a16"),
            "fos": ("NVFP4_FOUR_OVER_SIX_CFG", 16, False, "reference_fos")}


def decode(t, prefix, block):
    codes = t[prefix + ".weight"]
    lo, hi = (codes & 0xF).long(), (codes >> 4).long()
    vals = torch.stack([E2M1[lo], E2M1[hi]], dim=-1).reshape(codes.shape[0], -1)
    sf = t[prefix + ".weight_scale"].float().repeat_interleave(block, dim=1)
    return vals * sf * t[prefix + ".weight_scale_2"].float()


@torch.no_grad()
def production_forward(bf16_dir, out_dir, block, fp8_act):
    import transformers
    t = load_file(os.path.join(out_dir, "model.safetensors"))
    model = transformers.AutoModelForCausalLM.from_pretrained(bf16_dir, dtype=torch.bfloat16,
                                                              attn_implementation="eager").eval()
    for name, mod in model.named_modules():
        if not isinstance(mod, torch.nn.Linear) or name + ".weight_scale_2" not in t:
            continue
        w = decode(t, name, block)
        s = t[name + ".input_scale"].float() if fp8_act else None

        def fwd(x, w=w, s=s):
            xf = x.float()
            if s is not None:
                xf = (xf / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).float() * s
            return (xf @ w.t()).to(torch.bfloat16)
        mod.forward = fwd
    return mf.forward_record(model)


def cpu_static_blockwise_fp4_fake_quant(x, amax, global_amax=None, quantize_block_scales=True,
                                        fp8_max_for_normalization=448.0, out_dtype=None):
    """ModelOpt's Triton static_blockwise_fp4_fake_quant (kernels/quantization/gemm/fp4_kernel.py) in torch
    for the CPU: its own compute_fp4_scales, then nvfp4_scalar_quant's decision boundaries (common/
    nvfp4_quant.py: <= 0.25, < 0.75, <= 1.25, < 1.75, <= 2.5, < 3.5, <= 5.0) and its zero/NaN/Inf scale rule.
    ModelOpt 0.47's MSE calibration (Four Over Six's 4-or-6 choice per block) calls only this kernel."""
    from modelopt.torch.kernels.quantization.gemm.fp4_kernel import compute_fp4_scales
    shape, nb = x.shape, amax.numel()
    scale = compute_fp4_scales(amax, global_amax, quantize_block_scales, fp8_max_for_normalization).reshape(nb, 1)
    xf = x.contiguous().float().reshape(nb, -1)
    bad = (scale == 0) | scale.isnan() | scale.isinf()
    safe = torch.where(bad, torch.ones_like(scale), scale)
    a = xf.abs() / safe
    q = torch.where(a <= 0.25, 0.0, torch.where(a < 0.75, 0.5, torch.where(a <= 1.25, 1.0, torch.where(
        a < 1.75, 1.5, torch.where(a <= 2.5, 2.0, torch.where(a < 3.5, 3.0, torch.where(a <= 5.0, 4.0, 6.0)))))))
    y = torch.where(xf >= 0, q * safe, -(q * safe))
    y = torch.where(scale == 0, torch.zeros_like(y), y)
    return y.reshape(shape).to(out_dtype or x.dtype)


def use_cpu_fp4_kernel():
    """Hand ModelOpt the CPU stand-in where it would call Triton (tensor_quant.py checks IS_AVAILABLE)."""
    import modelopt.torch.kernels.quantization.gemm as gemm
    gemm.IS_AVAILABLE = True
    gemm.static_blockwise_fp4_fake_quant = cpu_static_blockwise_fp4_fake_quant


def decode_div(t, prefix, block):
    """The weight as vLLM's NVFP4 emulation reads a ModelOpt checkpoint (and nvfp4dbg, which keeps the
    divisor convention): e2m1 * (e4m3(weight_scale) / (1 / weight_scale_2)). decode()'s e2m1 * e4m3 *
    weight_scale_2 is the same number up to FP32 rounding; on modelopt_fos that rounding flips the BF16
    rounding of 599 of 73728 weights, which moves transformers' layer 0 by rel L2 7e-3."""
    codes = t[prefix + ".weight"]
    lo, hi = (codes & 0xF).long(), (codes >> 4).long()
    vals = torch.stack([E2M1[lo], E2M1[hi]], dim=-1).reshape(codes.shape[0], -1)
    sf = t[prefix + ".weight_scale"].float().repeat_interleave(block, dim=1)
    return vals * (sf / (1.0 / t[prefix + ".weight_scale_2"].float()))


@torch.no_grad()
def reference_forward(bf16_dir, out_dir, block):
    """The reference path's semantics, as transformers runs a decompressed checkpoint: each quantized
    linear's weight decoded (decode_div) and stored in BF16, the model's own BF16 forward."""
    import transformers
    t = load_file(os.path.join(out_dir, "model.safetensors"))
    model = transformers.AutoModelForCausalLM.from_pretrained(bf16_dir, dtype=torch.bfloat16,
                                                              attn_implementation="eager").eval()
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and name + ".weight_scale_2" in t:
            mod.weight.copy_(decode_div(t, name, block).to(torch.bfloat16))
    return mf.forward_record(model)


def e2m1_fake(x):
    """NVFP4 fake-quant of a weight, per 16 along K (global amax/2688, E4M3 block scales, RNE codes)."""
    g = x.abs().max().clamp(min=1e-12) / 2688.0
    xb = x.float().reshape(x.shape[0], -1, 16)
    bs = (xb.abs().amax(-1, keepdim=True) / 6.0 / g).clamp(max=448.0).to(torch.float8_e4m3fn).float() * g
    q = xb / bs.clamp(min=1e-30)
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    idx = (q.abs().unsqueeze(-1) - grid).abs().argmin(-1)
    return (grid[idx] * q.sign() * bs).reshape(x.shape)


# the linears that read one input share one AWQ scale (ModelOpt averages pre_quant_scale over a fused
# group at export, so that a fused GEMM quantizes one input): q/k/v after input_layernorm, gate/up
# after post_attention_layernorm; o_proj and down_proj have their own
GROUPS = {"input_layernorm": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
          "post_attention_layernorm": ("mlp.gate_proj", "mlp.up_proj")}


@torch.no_grad()
def awq_scales(model, rows):
    """ModelOpt awq_lite's search, per group of linears that share an input: the scale of each input channel."""
    inputs = {}
    hooks = []
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and "lm_head" not in name:
            hooks.append(mod.register_forward_pre_hook(
                lambda m, a, name=name: inputs.setdefault(name, []).append(a[0].reshape(-1, a[0].shape[-1]).float())))
    for r in rows:
        model(torch.tensor([r]), use_cache=False)
    for h in hooks:
        h.remove()
    mods = dict(model.named_modules())
    groups = []
    for i in range(len(model.model.layers)):
        pre = f"model.layers.{i}."
        grouped = set()
        for members in GROUPS.values():
            groups.append([pre + m for m in members])
            grouped.update(pre + m for m in members)
        groups += [[n] for n in inputs if n.startswith(pre) and n not in grouped]
    scales = {}
    for g in groups:
        x = torch.cat(inputs[g[0]])
        ws = [mods[n].weight.float() for n in g]
        ys = [x @ w.t() for w in ws]
        a_x = x.abs().amax(0).clamp(min=1e-4)
        a_w = torch.stack([w.abs().amax(0) for w in ws]).amax(0).clamp(min=1e-4)
        best, best_err = torch.ones_like(a_x), None
        for alpha in (0.0, 0.25, 0.5, 0.75, 1.0):
            sc = a_x.pow(alpha) / a_w.pow(1 - alpha)
            sc = (sc / (sc.max() * sc.min()).sqrt()).clamp(min=1e-4)
            err = sum(((x / sc) @ e2m1_fake(w * sc).t() - y).pow(2).mean().item() for w, y in zip(ws, ys))
            if best_err is None or err < best_err:
                best, best_err = sc, err
        for n in g:
            scales[n] = best.to(torch.bfloat16).float()  # ModelOpt keeps pre_quant_scale in the weight's dtype
    return scales


def add_awq_hooks(model, pqs):
    """The input times pre_quant_scale (BF16): after the norm a group shares (one input tensor for the
    group, as ModelOpt's fusion needs), before each other linear."""
    for i, layer in enumerate(model.model.layers):
        for norm, members in GROUPS.items():
            p = pqs[f"model.layers.{i}.{members[0]}"]
            getattr(layer, norm).register_forward_hook(lambda m, a, o, p=p: (o * p).to(o.dtype))
    grouped = {f"model.layers.{i}.{m}" for i in range(len(model.model.layers)) for ms in GROUPS.values() for m in ms}
    for name, mod in model.named_modules():
        if name in pqs and name not in grouped:
            mod.register_forward_pre_hook(lambda m, a, p=pqs[name]: ((a[0] * p).to(a[0].dtype),) + tuple(a[1:]))


@torch.no_grad()
def make_awq(base, bf16_dir, rows):
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint
    import transformers
    torch.manual_seed(mf.SEED)
    model = transformers.AutoModelForCausalLM.from_pretrained(bf16_dir, dtype=torch.bfloat16,
                                                              attn_implementation="eager").eval()
    scales = awq_scales(model, rows)
    pqs = {}
    for name, mod in model.named_modules():
        if name in scales:
            s = scales[name]
            mod.weight.copy_((mod.weight.float() * s).to(torch.bfloat16))
            pqs[name] = (1.0 / s).to(torch.bfloat16)
    add_awq_hooks(model, pqs)

    def loop(m):
        for r in rows:
            m(torch.tensor([r]), use_cache=False)
    model = mtq.quantize(model, copy.deepcopy(mtq.NVFP4_DEFAULT_CFG), loop)
    out_dir = os.path.join(base, "modelopt_awq")
    export_hf_checkpoint(model, export_dir=out_dir)
    st = os.path.join(out_dir, "model.safetensors")
    t = load_file(st)
    for name, p in pqs.items():
        t[name + ".pre_quant_scale"] = p.contiguous()
    save_file(t, st, metadata={"format": "pt"})
    hq = json.load(open(os.path.join(out_dir, "hf_quant_config.json")))
    hq["quantization"].update({"quant_algo": "NVFP4_AWQ", "has_zero_point": False, "pre_quant_scale": True})
    json.dump(hq, open(os.path.join(out_dir, "hf_quant_config.json"), "w"), indent=4)
    cfg = json.load(open(os.path.join(out_dir, "config.json")))
    cfg["quantization_config"]["quant_algo"] = "NVFP4_AWQ"
    json.dump(cfg, open(os.path.join(out_dir, "config.json"), "w"), indent=2)
    # the reference: exported weights decoded, the input times pre_quant_scale (BF16)
    ref = transformers.AutoModelForCausalLM.from_pretrained(bf16_dir, dtype=torch.bfloat16,
                                                            attn_implementation="eager").eval()
    for name, mod in ref.named_modules():
        if name in pqs:
            mod.weight.copy_(decode(t, name, 16).to(torch.bfloat16))
    add_awq_hooks(ref, pqs)
    save_file(mf.forward_record(ref), os.path.join(base, "reference_awq.safetensors"))
    return {"made_by": "AWQ-lite scale search here per group of linears sharing an input (ModelOpt's needs CUDA), "
                       "then modelopt.torch.quantization.quantize(NVFP4_DEFAULT_CFG) with the input times "
                       "pre_quant_scale, export_hf_checkpoint, pre_quant_scale added per linear and quant_algo NVFP4_AWQ",
            "pre_quant_scale_range": [min(float(p.min()) for p in pqs.values()), max(float(p.max()) for p in pqs.values())]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "golden", "conformance"))
    ap.add_argument("--only", choices=["awq"] + list(VARIANTS), help="remake only this variant")
    args = ap.parse_args()
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint
    import transformers
    base = os.path.join(args.out, "llama")
    bf16_dir = os.path.join(base, "bf16")
    rows = mf.calib_dataset()["input_ids"]
    notes = {}
    path = os.path.join(base, "modelopt_variants.json")
    if args.only and os.path.exists(path):
        notes = json.load(open(path))
    for v, (cfg_name, block, fp8_act, rec_name) in VARIANTS.items():
        if args.only and args.only != v:
            continue
        torch.manual_seed(mf.SEED)
        if v == "fos":
            use_cpu_fp4_kernel()
        model = transformers.AutoModelForCausalLM.from_pretrained(bf16_dir, dtype=torch.bfloat16,
                                                                  attn_implementation="eager").eval()

        def loop(m):
            for r in rows:
                m(torch.tensor([r]), use_cache=False)
        model = mtq.quantize(model, copy.deepcopy(getattr(mtq, cfg_name)), loop)
        out_dir = os.path.join(base, "modelopt_" + v)
        export_hf_checkpoint(model, export_dir=out_dir)
        rec = (production_forward(bf16_dir, out_dir, block, fp8_act) if rec_name.startswith("production")
               else reference_forward(bf16_dir, out_dir, block))
        save_file(rec, os.path.join(base, rec_name + ".safetensors"))
        notes[v] = {"made_by": f"modelopt.torch.quantization.quantize(model, {cfg_name}, forward_loop over the "
                               "calibration ids); modelopt.torch.export.export_hf_checkpoint",
                    "production" if rec_name.startswith("production") else "reference": "the docstring's forward of the exported tensors: " + rec_name,
                    "hf_quant_config": json.load(open(os.path.join(out_dir, "hf_quant_config.json")))["quantization"]}
        if v == "fos":
            notes[v]["made_by"] += (" (on the CPU: ModelOpt's Triton static_blockwise_fp4_fake_quant, the only kernel its MSE "
                                    "calibration calls, given in torch as cpu_static_blockwise_fp4_fake_quant)")
    if not args.only or args.only == "awq":
        notes["awq"] = make_awq(base, bf16_dir, rows)
    notes["versions"] = mf.versions(packages=("torch", "transformers", "nvidia-modelopt", "safetensors"))
    with open(path, "w") as f:
        json.dump(notes, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
