#!/usr/bin/env python3
"""transformers' FP32 forward of every conformance fixture, for `trace --ref-numerics fp32-exact`.

For each fixture under golden/conformance/<kind>/ (made by make_fixtures.py or make_family_fixtures.py)
this adds, without touching the files already there:
  reference_fp32.safetensors        transformers' eager FP32 forward of bf16/ (the BF16 weights widened:
                                    from_pretrained(dtype=float32), i.e. model.float())
  reference_nvfp4_fp32.safetensors  the same forward of nvfp4/ dequantized to FP32 by compressed-tensors'
                                    own functions (unpack_fp4_from_uint8 and dequantize with dtype float32;
                                    no BF16 rounding of the weights), for the kinds that have nvfp4/
and the key "fp32_reference" in manifest.json (versions, what was made, and checks: the BF16 forward
of the same checkpoint made here reproduces the fixture's BF16 reference file bit for bit, so the
FP32 forward is of the very model the fixture describes; transformers' own FP32-vs-BF16 rel L2).
Tensors (all FP32): input_ids, hidden_states.0 (embedding), layer_out.L (every decoder layer's
output), hidden_states.N (after the final norm), logits.
Only for making fixtures; nothing in the build or the tests runs it.
Usage: python tools/conformance/make_fp32_references.py [--root golden/conformance] [--kinds llama,...]
"""
import json
import os
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("USE_HUB_KERNELS", "0")

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_family_fixtures as mff  # noqa: E402
import make_fixtures as mf  # noqa: E402
import make_gpt_oss_fixture as mgo  # noqa: E402

OWN = ("llama", "deepseek_v3", "deepseek_v4")   # made by make_fixtures.py (reference.safetensors = nvfp4/)
KINDS = OWN + ("minimax_m2", "gemma3_text", "glm4", "olmo2", "olmo3", "phi3", "smollm3", "qwen2", "llama31", "mistral3", "qwen3", "qwen3_moe", "mixtral", "glm4_moe", "qwen3_next", "qwen3_5_moe",
               "gpt_oss")


def model_class(kind):
    if kind == "gpt_oss":
        return mgo.cls()
    return mf.model_class(kind) if kind in OWN else mff.model_class(kind)


def to_stock(kind, deq_dir):
    """A decompressed checkpoint's expert names as stock transformers reads them: Mixtral's
    llmcompressor names -> w1/w3/w2, gpt-oss's per-expert Linears -> GptOssExperts' fused tensors
    (as make_family_fixtures.quantize and make_gpt_oss_fixture.quantize do)."""
    if kind in ("mixtral", "minimax_m2"):
        mff.stock_expert_names_file(deq_dir)
    elif kind == "gpt_oss":
        mgo.refuse(deq_dir)


@torch.no_grad()
def forward(cls, path, dtype):
    m = cls.from_pretrained(path, dtype=dtype, attn_implementation="eager").eval()
    if dtype == torch.float32:
        m = m.float()   # model.float(): a module transformers keeps in BF16 on load is widened too
    return mff.forward_record(m)


def kept(rec):
    """The tensors the test compares (hidden_states.1..N-1 repeat layer_out.0..N-2)."""
    n = sum(1 for k in rec if k.startswith("layer_out."))
    keep = {"input_ids", "logits", "hidden_states.0", f"hidden_states.{n}"} | {f"layer_out.{i}" for i in range(n)}
    return {k: (v if k == "input_ids" else v.float()).contiguous() for k, v in rec.items() if k in keep}


def rel_l2(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float((a - b).norm() / b.norm())


def compare_bf16(rec, ref_file):
    """Our BF16 forward against the fixture's reference file: bit-equal everywhere, or the largest rel
    L2 (a fixture made by another transformers version may round differently in BF16)."""
    ref = load_file(ref_file)
    keys = [k for k in ref if k in rec and k != "input_ids"]
    return {"bit_equal": all(torch.equal(rec[k], ref[k]) for k in keys),
            "max_rel_l2": max(rel_l2(rec[k], ref[k]) for k in keys)}


@torch.no_grad()
def decompress_fp32(kind, nvfp4_dir, deq_dir):
    """nvfp4/ -> a plain FP32 checkpoint: every NVFP4 module dequantized with compressed-tensors'
    functions in FP32, every other tensor widened. Returns the module names."""
    from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8
    from compressed_tensors.quantization.lifecycle.forward import dequantize
    cfg, scheme, tensors, prefixes, rest = mf.read_compressed(nvfp4_dir)
    out = {k: v.float() if v.is_floating_point() else v for k, v in rest.items()}
    for p in prefixes:
        packed = tensors[f"{p}.weight_packed"]
        m, n = packed.shape
        codes = unpack_fp4_from_uint8(packed, m, n * 2, dtype=torch.float32)
        w = dequantize(x_q=codes, scale=tensors[f"{p}.weight_scale"].to(torch.float32), args=scheme.weights,
                       global_scale=tensors[f"{p}.weight_global_scale"], dtype=torch.float32)
        out[f"{p}.weight"] = w.contiguous()
    os.makedirs(deq_dir)
    save_file(out, os.path.join(deq_dir, "model.safetensors"), metadata={"format": "pt"})
    to_stock(kind, deq_dir)
    cfg["dtype"] = "float32"
    with open(os.path.join(deq_dir, "config.json"), "w") as f:
        json.dump(cfg, f)
    return prefixes


@torch.no_grad()
def decompress_bf16(kind, nvfp4_dir, deq_dir):
    """The fixture's own BF16 decompression (compressed-tensors' decompress), for the bit check."""
    mf.decompress_checkpoint(nvfp4_dir, deq_dir)
    to_stock(kind, deq_dir)


def forward_bf16(cls, path, checks, key):
    """The BF16 forward for the checks, or None (recorded) where this transformers version cannot run
    it (5.17's DeepSeek-V4 feeds its FP32 hyper-connection output to a BF16 projection)."""
    try:
        return forward(cls, path, torch.bfloat16)
    except RuntimeError as ex:
        checks[key] = f"BF16 forward failed with transformers {mff.versions()['transformers']}: {ex}"
        return None


def top1(a, b):
    return float((a["logits"].argmax(-1) == b["logits"].argmax(-1)).double().mean())


def make(kind, root):
    fx = os.path.join(root, kind)
    cls = model_class(kind)
    notes = {"made_by": "tools/conformance/make_fp32_references.py", "versions": mff.versions(),
             "attn_implementation": "eager", "files": {}, "checks": {}}
    # bf16/: transformers' FP32 forward of the BF16 weights widened
    bf16_dir = os.path.join(fx, "bf16")
    f32 = kept(forward(cls, bf16_dir, torch.float32))
    save_file(f32, os.path.join(fx, "reference_fp32.safetensors"))
    notes["files"]["reference_fp32.safetensors"] = "eager FP32 forward of bf16/ (from_pretrained(dtype=float32))"
    b16 = forward_bf16(cls, bf16_dir, notes["checks"], "bf16_forward")
    if b16 is not None and kind not in OWN:   # the family fixtures' reference.safetensors: BF16 forward of bf16/
        eq = compare_bf16(b16, os.path.join(fx, "reference.safetensors"))
        notes["checks"]["bf16_forward_vs_reference.safetensors"] = eq
    if b16 is not None:
        notes["checks"]["bf16_fp32_vs_bf16_rel_l2"] = {k: rel_l2(f32[k], b16[k]) for k in f32 if k != "input_ids"}
        notes["checks"]["bf16_fp32_vs_bf16_top1"] = top1(f32, b16)
    nvfp4_dir = os.path.join(fx, "nvfp4")
    if os.path.isdir(nvfp4_dir):
        with tempfile.TemporaryDirectory() as tmp:
            deq32, deq16 = os.path.join(tmp, "deq32"), os.path.join(tmp, "deq16")
            mods = decompress_fp32(kind, nvfp4_dir, deq32)
            q32 = kept(forward(cls, deq32, torch.float32))
            decompress_bf16(kind, nvfp4_dir, deq16)
            q16 = forward_bf16(cls, deq16, notes["checks"], "nvfp4_bf16_forward")
            # the BF16 weights of the fixture's decompression are these FP32 weights rounded
            w32, w16 = load_file(os.path.join(deq32, "model.safetensors")), load_file(os.path.join(deq16, "model.safetensors"))
            notes["checks"]["nvfp4_fp32_weights_round_to_decompressed_bf16"] = all(
                torch.equal(w32[k].to(w16[k].dtype), w16[k]) for k in w16 if k in w32)
        save_file(q32, os.path.join(fx, "reference_nvfp4_fp32.safetensors"))
        notes["files"]["reference_nvfp4_fp32.safetensors"] = (
            f"eager FP32 forward of nvfp4/ dequantized in FP32 ({len(mods)} NVFP4 modules: compressed-tensors "
            "unpack_fp4_from_uint8 + dequantize, dtype float32; other tensors widened)")
        ref16 = "reference.safetensors" if kind in OWN else "reference_nvfp4.safetensors"
        if q16 is not None:
            notes["checks"][f"nvfp4_bf16_forward_vs_{ref16}"] = compare_bf16(q16, os.path.join(fx, ref16))
            notes["checks"]["nvfp4_fp32_vs_bf16_rel_l2"] = {k: rel_l2(q32[k], q16[k]) for k in q32 if k != "input_ids"}
            notes["checks"]["nvfp4_fp32_vs_bf16_top1"] = top1(q32, q16)
    path = os.path.join(fx, "manifest.json")
    man = json.load(open(path))
    man["fp32_reference"] = notes
    with open(path, "w") as f:
        json.dump(man, f, indent=1)
    print(kind, json.dumps(notes["checks"], indent=None)[:600])


def main():
    return mf.run_kinds(__doc__, make, ",".join(KINDS), root_opt="--root")


if __name__ == "__main__":
    sys.exit(main())
