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
The decoding here is written from ModelOpt's export (not from nvfp4dbg): codes e2m1, element 2j in the
low nibble; weight = e2m1 * e4m3(weight_scale[block]) * weight_scale_2.

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
VARIANTS = {"w4a8": ("W4A8_NVFP4_FP8_CFG", 32, True), "w4a16": ("W4A16_NVFP4_CFG", 16, False)}


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "golden", "conformance"))
    args = ap.parse_args()
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint
    import transformers
    base = os.path.join(args.out, "llama")
    bf16_dir = os.path.join(base, "bf16")
    rows = mf.calib_dataset()["input_ids"]
    notes = {}
    for v, (cfg_name, block, fp8_act) in VARIANTS.items():
        torch.manual_seed(mf.SEED)
        model = transformers.AutoModelForCausalLM.from_pretrained(bf16_dir, dtype=torch.bfloat16,
                                                                  attn_implementation="eager").eval()

        def loop(m):
            for r in rows:
                m(torch.tensor([r]), use_cache=False)
        model = mtq.quantize(model, copy.deepcopy(getattr(mtq, cfg_name)), loop)
        out_dir = os.path.join(base, "modelopt_" + v)
        export_hf_checkpoint(model, export_dir=out_dir)
        rec = production_forward(bf16_dir, out_dir, block, fp8_act)
        save_file(rec, os.path.join(base, f"production_{v}.safetensors"))
        notes[v] = {"made_by": f"modelopt.torch.quantization.quantize(model, {cfg_name}, forward_loop over the "
                               "calibration ids); modelopt.torch.export.export_hf_checkpoint",
                    "production": "TensorRT-LLM's math re-implemented on the exported tensors (this file's docstring)",
                    "hf_quant_config": json.load(open(os.path.join(out_dir, "hf_quant_config.json")))["quantization"]}
    notes["versions"] = mf.versions(packages=("torch", "transformers", "nvidia-modelopt", "safetensors"))
    with open(os.path.join(base, "modelopt_variants.json"), "w") as f:
        json.dump(notes, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
