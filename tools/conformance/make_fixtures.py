#!/usr/bin/env python3
"""Make conformance fixtures with the public tools (transformers, llmcompressor, compressed-tensors).

For each tiny model (deepseek_v4, deepseek_v3, llama) this writes golden/conformance/<model>/:
  bf16/        the random model as transformers.save_pretrained writes it (the unquantized original)
  nvfp4/       the same model quantized to NVFP4 W4A4 by llmcompressor.oneshot, save_compressed=True
  reference.safetensors   transformers' forward on the dequantized weights (no activation quantization)
  fakequant.safetensors   transformers' forward with compressed-tensors' NVFP4 activation fake-quant on
  dequant.safetensors     compressed-tensors' own decompression of a few modules
  actquant.safetensors    compressed-tensors' NVFP4 quantization of recorded module inputs
  modelopt/               the same model exported by NVIDIA ModelOpt as NVFP4 (if modelopt is installed)
  modelopt_fakequant.safetensors  ModelOpt's fake-quant forward of it
  manifest.json           what each tensor is (also described in golden/conformance/README.md)

Only for making fixtures: nothing in the build or the tests runs this.
Usage: python tools/conformance/make_fixtures.py [--out golden/conformance] [--models deepseek_v4,...]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

# Offline and deterministic: no hub kernels, no hub look-ups.
os.environ.setdefault("USE_HUB_KERNELS", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

SEQ = 32                       # tokens of the fixed prompt
TOKENS = [(i * 37 + 11) % 256 for i in range(SEQ)]
CALIB_SAMPLES, CALIB_LEN = 8, 32   # 256 random calibration token ids
SEED = 1234


def tiny_config(kind):
    import transformers as tf
    if kind == "deepseek_v4":
        return tf.DeepseekV4Config(
            vocab_size=256, hidden_size=64, moe_intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=1, head_dim=32, qk_rope_head_dim=8,
            q_lora_rank=48, o_groups=2, o_lora_rank=16, hc_mult=4,
            n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
            index_n_heads=2, index_head_dim=16, index_topk=2, sliding_window=8,
            layer_types=["sliding_attention", "compressed_sparse_attention",
                         "heavily_compressed_attention"],
            compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
            mlp_layer_types=["hash_moe", "moe", "moe"],
            max_position_embeddings=256,
            rope_parameters={"rope_type": "yarn", "factor": 4.0,
                             "original_max_position_embeddings": 64,
                             "beta_fast": 32, "beta_slow": 1},
            initializer_range=0.1, tie_word_embeddings=False)
    if kind == "deepseek_v3":
        return tf.DeepseekV3Config(
            vocab_size=256, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
            num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=4,
            num_key_value_heads=4, q_lora_rank=48, kv_lora_rank=32, qk_rope_head_dim=8,
            qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=8, n_shared_experts=1,
            num_experts_per_tok=2, n_group=2, topk_group=1, routed_scaling_factor=2.5,
            max_position_embeddings=256, initializer_range=0.1, tie_word_embeddings=False)
    if kind == "llama":
        return tf.LlamaConfig(
            vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
            initializer_range=0.1, tie_word_embeddings=False)
    raise ValueError(kind)


def model_class(kind):
    import transformers as tf
    return {"deepseek_v4": tf.DeepseekV4ForCausalLM, "deepseek_v3": tf.DeepseekV3ForCausalLM,
            "llama": tf.LlamaForCausalLM}[kind]


@torch.no_grad()
def randomize_special(model, gen):
    """The default init leaves some tensors constant (zeros/ones); give them random values so
    that a wrong index or a dropped term shows up in the fixtures."""
    def rnd(shape, scale):
        return torch.randn(shape, generator=gen) * scale
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        base = name.rsplit(".", 1)[-1]
        if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
            t.copy_((1.0 + rnd(t.shape, 0.1)).to(t.dtype))
        elif base in ("sinks", "position_bias"):
            t.copy_(rnd(t.shape, 0.5).to(t.dtype))
        elif base == "e_score_correction_bias":
            # small next to the score spread, so that the routing still depends on the token
            t.copy_(rnd(t.shape, 0.05).to(t.dtype))
        elif base in ("base", "hc_base"):
            t.copy_(rnd(t.shape, 0.3).to(t.dtype))
        elif base in ("scale", "hc_scale"):
            t.copy_((0.5 + torch.rand(t.shape, generator=gen)).to(t.dtype))
        elif base == "tid2eid":
            n_exp = model.config.n_routed_experts
            rows = [torch.randperm(n_exp, generator=gen)[: t.shape[1]] for _ in range(t.shape[0])]
            t.copy_(torch.stack(rows).to(t.dtype))


def tokenizer():
    """A word-level tokenizer over 256 ids: llmcompressor insists on a processor."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast
    tk = Tokenizer(models.WordLevel({f"t{i}": i for i in range(256)}, unk_token="t0"))
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="t0", pad_token="t0")


def calib_dataset():
    from datasets import Dataset
    g = torch.Generator().manual_seed(SEED + 1)
    ids = [torch.randint(0, 256, (CALIB_LEN,), generator=g).tolist() for _ in range(CALIB_SAMPLES)]
    return Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * CALIB_LEN] * CALIB_SAMPLES})


def ignore_list(kind):
    if kind == "deepseek_v4":
        # Real V4 releases keep the compressor / indexer projections in BF16 (transformers lists them
        # in _keep_in_fp32_modules); the router gate is not a Linear and stays BF16 anyway.
        return ["lm_head", "re:.*compressor.*"]
    return ["lm_head"]


def load_for_quant(kind, path):
    """Load through llmcompressor's MoE context so fused 3D experts become per-expert Linears."""
    cls = model_class(kind)
    if kind == "llama":
        return cls.from_pretrained(path, dtype=torch.bfloat16, attn_implementation="eager")
    from llmcompressor.modeling.moe.linearize import load_quantizable_moe
    with load_quantizable_moe(cls):
        return cls.from_pretrained(path, dtype=torch.bfloat16, attn_implementation="eager")


def quantize(kind, bf16_dir, out_dir, notes):
    """oneshot NVFP4; returns the in-memory quantized model (compressed-tensors fake-quant forward)."""
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    model = load_for_quant(kind, bf16_dir)
    recipe = QuantizationModifier(targets="Linear", scheme="NVFP4", ignore=ignore_list(kind))
    oneshot(model=model, dataset=calib_dataset(), processor=tokenizer(), recipe=recipe,
            num_calibration_samples=CALIB_SAMPLES, max_seq_length=CALIB_LEN)
    notes["quantized_by"] = "llmcompressor.oneshot QuantizationModifier(targets='Linear', scheme='NVFP4', " \
                            f"ignore={ignore_list(kind)!r}), save_compressed=True"
    return model


def set_quant_enabled(model, on):
    for mod in model.modules():
        if getattr(mod, "quantization_scheme", None) is not None:
            mod.quantization_enabled = on


@torch.no_grad()
def forward_record(model, layers=None):
    """Run the fixed prompt; return {name: tensor} with per-layer outputs (of `layers`, by default
    model.model.layers) and hidden states."""
    ids = torch.tensor([TOKENS])
    layer_outs = []
    handles = [l.register_forward_hook(lambda m, i, o: layer_outs.append(o[0] if isinstance(o, tuple) else o))
               for l in (model.model.layers if layers is None else layers)]
    out = model(ids, output_hidden_states=True, use_cache=False)
    for h in handles:
        h.remove()
    rec = {"input_ids": ids.to(torch.int64), "logits": out.logits.contiguous()}
    for i, h in enumerate(out.hidden_states):
        rec[f"hidden_states.{i}"] = h.clone().contiguous()
    for i, h in enumerate(layer_outs):
        rec[f"layer_out.{i}"] = h.clone().contiguous()
    return rec


# A few modules to dump (in-memory names of the quantized, linearized model).
PICK = {"deepseek_v4": ["model.layers.0.self_attn.q_a_proj", "model.layers.1.self_attn.o_b_proj",
                        "model.layers.1.mlp.experts.{e}.gate_proj", "model.layers.2.mlp.shared_experts.down_proj"],
        "deepseek_v3": ["model.layers.0.self_attn.q_a_proj", "model.layers.0.self_attn.kv_a_proj_with_mqa",
                        "model.layers.1.mlp.experts.{e}.up_proj", "model.layers.1.mlp.shared_experts.down_proj"],
        "llama": ["model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj"]}
PICKED = {}  # PICK with "{e}" resolved by fakequant_and_actquant


@torch.no_grad()
def fakequant_and_actquant(kind, qmodel):
    """Forward with compressed-tensors' fake quantization on (weights and NVFP4 activations), and
    each picked module's BF16 input quantized by compressed-tensors' own functions."""
    from compressed_tensors.compressors.nvfp4.helpers import pack_fp4_to_uint8
    from compressed_tensors.quantization.lifecycle.forward import fake_quantize, quantize
    from compressed_tensors.quantization.utils.helpers import compute_dynamic_scales_and_zp
    mods = dict(qmodel.named_modules())
    seen = {}

    def grab(n, x):
        # routed experts are also called with zero rows; keep the first call that has tokens
        if x.numel() and n not in seen:
            seen[n] = x.detach().clone()

    def matches(n, p):
        if "{e}" not in p:
            return n == p
        head, tail = p.split("{e}")
        return n.startswith(head) and n.endswith(tail) and n[len(head):len(n) - len(tail)].isdigit()

    cands = [n for n in mods if any(matches(n, p) for p in PICK[kind])]
    hs = [mods[n].register_forward_pre_hook(lambda m, a, n=n: grab(n, a[0])) for n in cands]
    set_quant_enabled(qmodel, True)
    fq = forward_record(qmodel)
    for h in hs:
        h.remove()
    picked = []
    for p in PICK[kind]:
        # "{e}": the routed expert that received the most tokens of the prompt (lowest id on ties)
        rows = {n: seen[n].reshape(-1, seen[n].shape[-1]).shape[0] for n in cands if matches(n, p) and n in seen}
        if not rows:
            raise RuntimeError(f"{kind}: no token of the prompt reached {p}")
        best = max(rows.values())
        picked.append(sorted((n for n in rows if rows[n] == best), key=lambda n: (len(n), n))[0])
    PICKED[kind] = picked
    out = {}
    for n in picked:
        m, x = mods[n], seen[n]
        x2 = x.reshape(-1, x.shape[-1])
        args = m.quantization_scheme.input_activations
        gs = m.input_global_scale
        scale, zp = compute_dynamic_scales_and_zp(value=x2, args=args, module=m, global_scale=gs)
        codes = quantize(x=x2, scale=scale, zero_point=zp, args=args, global_scale=gs)
        xq = fake_quantize(x=x2, scale=scale, zero_point=zp, args=args, global_scale=gs)
        out[f"{n}.input"] = x2.to(torch.bfloat16).contiguous()
        out[f"{n}.input_global_scale"] = gs.detach().float().reshape(1).contiguous()
        out[f"{n}.block_scale"] = scale.to(torch.float8_e4m3fn).contiguous()
        out[f"{n}.codes_packed"] = pack_fp4_to_uint8(codes.float()).contiguous()
        out[f"{n}.fake_quant"] = xq.to(torch.bfloat16).contiguous()
    return fq, out


@torch.no_grad()
def weight_fakequant(kind, qmodel):
    """compressed-tensors' weight fake-quant of the picked modules (before save compresses them)."""
    from compressed_tensors.quantization.lifecycle.forward import forward_quantize
    mods = dict(qmodel.named_modules())
    return {mem: forward_quantize(mods[mem], mods[mem].weight.detach(), "weight",
                                  mods[mem].quantization_scheme.weights).to(torch.bfloat16)
            for mem in PICKED[kind]}


def read_all(path):
    with safe_open(path, "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def read_compressed(nvfp4_dir):
    """A saved compressed-tensors NVFP4 checkpoint: (its config without quantization_config, the
    scheme of its one config group, every tensor, the NVFP4 module prefixes, the tensors that are
    not their quantization parameters (a bias stays))."""
    from compressed_tensors.quantization import QuantizationScheme
    cfg = json.load(open(os.path.join(nvfp4_dir, "config.json")))
    qcfg = cfg.pop("quantization_config")
    groups = list(qcfg["config_groups"].values())
    if len(groups) != 1:
        raise RuntimeError("expected one config group")
    scheme = QuantizationScheme(**groups[0])
    tensors = {}
    for fn in sorted(os.listdir(nvfp4_dir)):
        if fn.endswith(".safetensors"):
            tensors.update(read_all(os.path.join(nvfp4_dir, fn)))
    prefixes = sorted(k[: -len(".weight_packed")] for k in tensors if k.endswith(".weight_packed"))
    qparams = ("weight_packed", "weight_scale", "weight_global_scale", "input_global_scale")
    rest = {k: v for k, v in tensors.items()
            if not any(k.startswith(p + ".") and k[len(p) + 1:] in qparams for p in prefixes)}
    return cfg, scheme, tensors, prefixes, rest


@torch.no_grad()
def decompress_checkpoint(nvfp4_dir, deq_dir):
    """Decompress every NVFP4 module of the saved checkpoint with compressed-tensors'
    NVFP4PackedCompressor.decompress; write a plain BF16 checkpoint (same key names as the file)
    that stock transformers loads. Returns {module prefix: decompressed weight as returned}."""
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
    cfg, scheme, tensors, prefixes, rest = read_compressed(nvfp4_dir)
    out, dec_w = dict(rest), {}
    for p in prefixes:
        sd = {s: tensors[f"{p}.{s}"] for s in ("weight_packed", "weight_scale", "weight_global_scale")}
        dec = NVFP4PackedCompressor.decompress(sd, scheme)["weight"]
        dec_w[p] = dec
        out[f"{p}.weight"] = dec.to(torch.bfloat16).contiguous()
    os.makedirs(deq_dir)
    save_file(out, os.path.join(deq_dir, "model.safetensors"))
    with open(os.path.join(deq_dir, "config.json"), "w") as f:
        json.dump(cfg, f)
    return tensors, dec_w


def disk_name(kind, mem):
    """In-memory module name -> the name save_pretrained gave it in the checkpoint file."""
    if kind != "deepseek_v4":
        return mem
    r = mem.replace(".self_attn.", ".attn.").replace(".mlp.", ".ffn.")
    for a, b in ((".q_a_proj", ".wq_a"), (".q_b_proj", ".wq_b"), (".kv_proj", ".wkv"), (".o_a_proj", ".wo_a"),
                 (".o_b_proj", ".wo_b"), (".gate_proj", ".w1"), (".down_proj", ".w2"), (".up_proj", ".w3")):
        if r.endswith(a):
            r = r[: -len(a)] + b
    return r


def dequant_dump(kind, tensors, dec_w):
    out = {}
    for mem in PICKED[kind]:
        p = disk_name(kind, mem)
        if p not in dec_w:
            raise RuntimeError(f"{kind}: {p} not an NVFP4 module of the checkpoint")
        for s in ("weight_packed", "weight_scale", "weight_global_scale"):
            out[f"{p}.{s}"] = tensors[f"{p}.{s}"].contiguous()
        # exactly what NVFP4PackedCompressor.decompress returned (its dtype is recorded in the manifest)
        out[f"{p}.weight"] = dec_w[p].clone().contiguous()
    return out


@torch.no_grad()
def self_checks(kind, stock, wq, dec_w, tmp_dir):
    """The reference model must carry exactly the decompressed weights; and compressed-tensors'
    weight fake-quant (what the fake-quant forward used) must equal its decompression."""
    stock.save_pretrained(tmp_dir)
    saved = {}
    for fn in os.listdir(tmp_dir):
        if fn.endswith(".safetensors"):
            saved.update(read_all(os.path.join(tmp_dir, fn)))
    bad = [p for p, w in dec_w.items() if not torch.equal(saved[f"{p}.weight"], w.to(torch.bfloat16))]
    if bad:
        raise RuntimeError(f"{kind}: reference model weights differ from the decompressed ones: {bad[:4]}")
    fq_equal = {mem: bool(torch.equal(w, dec_w[disk_name(kind, mem)].to(torch.bfloat16)))
                for mem, w in wq.items()}
    return {"reference_weights_equal_decompressed": f"all {len(dec_w)} NVFP4 modules bit-equal (BF16)",
            "weight_fakequant_equals_decompressed": fq_equal}


@torch.no_grad()
def modelopt_export(kind, bf16_dir, out_dir, notes):
    """NVFP4 export with NVIDIA ModelOpt (mtq.NVFP4_DEFAULT_CFG, max calibration on the same token ids),
    where it installs and runs on the CPU. Returns ModelOpt's fake-quant forward record, or None."""
    import copy
    try:
        import modelopt.torch.quantization as mtq
        from modelopt.torch.export import export_hf_checkpoint
    except ImportError as e:
        notes["modelopt"] = f"not made: {e}"
        return None
    model = model_class(kind).from_pretrained(bf16_dir, dtype=torch.bfloat16, attn_implementation="eager").eval()
    cfg = copy.deepcopy(mtq.NVFP4_DEFAULT_CFG)
    if kind == "deepseek_v4":  # same choice as for llmcompressor: compressor / indexer stay BF16
        cfg["quant_cfg"].append({"quantizer_name": "*compressor*", "enable": False})
    rows = calib_dataset()["input_ids"]

    def loop(m):
        for r in rows:
            m(torch.tensor([r]), use_cache=False)
    model = mtq.quantize(model, cfg, loop)
    try:
        fq, fq_note = forward_record(model), "made"
    except AssertionError as e:  # ModelOpt 0.47 fake-quantizes NVFP4 only with CUDA kernels
        fq, fq_note = None, f"not made on the CPU: {e}"
    export_hf_checkpoint(model, export_dir=out_dir)
    saved = {}
    for fn in os.listdir(out_dir):
        if fn.endswith(".safetensors"):
            saved.update(read_all(os.path.join(out_dir, fn)))
    notes["modelopt"] = {
        "made_by": "modelopt.torch.quantization.quantize(model, NVFP4_DEFAULT_CFG"
                   + (" + {'*compressor*': disabled}" if kind == "deepseek_v4" else "")
                   + ", forward_loop over the calibration ids); modelopt.torch.export.export_hf_checkpoint",
        "nvfp4_modules": sorted(k[: -len(".weight_scale_2")] for k in saved if k.endswith(".weight_scale_2")),
        "bf16_matrices": sorted(k for k, v in saved.items() if v.dtype == torch.bfloat16 and v.dim() == 2),
        "fakequant_forward": fq_note,
    }
    return fq


def versions(packages=("torch", "transformers", "compressed-tensors", "llmcompressor", "nvidia-modelopt",
                        "safetensors", "datasets")):
    """The versions of the packages that made a fixture (None: not installed) and of Python."""
    import importlib.metadata as md
    v = {}
    for p in packages:
        try:
            v[p] = md.version(p)
        except md.PackageNotFoundError:
            v[p] = None
    v["python"] = sys.version.split()[0]
    return v


def describe(tensors):
    return {k: {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)} for k, t in tensors.items()}


class keep_conversion_mapping:
    """llmcompressor's MoE loader re-registers transformers' checkpoint conversion mapping for the
    model type (per-expert Linears) for the rest of the process; put the stock one back afterwards
    so the reference model is loaded exactly as transformers loads it."""

    def __init__(self, kind):
        from transformers import conversion_mapping as cm
        self.cm, self.keys = cm, {kind, cm._MODEL_TO_CONVERSION_PATTERN.get(kind, kind)}

    def __enter__(self):
        self.cm.get_checkpoint_conversion_mapping("llama")  # builds the cache
        cache = self.cm._checkpoint_conversion_mapping_cache
        self.saved = {k: cache[k] for k in self.keys if k in cache}
        return self

    def __exit__(self, *exc):
        cache = self.cm._checkpoint_conversion_mapping_cache
        for k in self.keys:
            if k in self.saved:
                cache[k] = self.saved[k]
            else:
                cache.pop(k, None)
        return False


def make(kind, out_root):
    out = os.path.join(out_root, kind)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    notes = {"model": kind, "tokens": TOKENS, "seed": SEED,
             "calibration": f"{CALIB_SAMPLES} samples x {CALIB_LEN} uniform random token ids, torch seed {SEED + 1}"}
    cfg = tiny_config(kind)
    torch.manual_seed(SEED)
    model = model_class(kind)._from_config(cfg, dtype=torch.bfloat16, attn_implementation="eager").eval()
    randomize_special(model, torch.Generator().manual_seed(SEED))
    bf16_dir = os.path.join(out, "bf16")
    nvfp4_dir = os.path.join(out, "nvfp4")
    model.save_pretrained(bf16_dir)
    orig = forward_record(model)
    with tempfile.TemporaryDirectory() as tmp:
        # llmcompressor wants a processor next to the model; keep it out of the committed folder
        src = os.path.join(tmp, "src")
        shutil.copytree(bf16_dir, src)
        tokenizer().save_pretrained(src)
        with keep_conversion_mapping(kind):
            qmodel = quantize(kind, src, nvfp4_dir, notes)
            fq, actq = fakequant_and_actquant(kind, qmodel)
            wq = weight_fakequant(kind, qmodel)
            notes["quantized_modules"] = [n for n, m in qmodel.named_modules()
                                          if getattr(m, "quantization_scheme", None) is not None]
            qmodel.save_pretrained(nvfp4_dir, save_compressed=True)
        tensors, dec_w = decompress_checkpoint(nvfp4_dir, os.path.join(tmp, "deq"))
        stock = model_class(kind).from_pretrained(os.path.join(tmp, "deq"), dtype=torch.bfloat16,
                                                 attn_implementation="eager").eval()
        notes["checks"] = self_checks(kind, stock, wq, dec_w, os.path.join(tmp, "check"))
    for f in ("recipe.yaml",):
        if os.path.exists(os.path.join(nvfp4_dir, f)):
            notes["recipe_yaml"] = open(os.path.join(nvfp4_dir, f)).read()
    ref = forward_record(stock)
    mo_fq = modelopt_export(kind, bf16_dir, os.path.join(out, "modelopt"), notes)
    dequant = dequant_dump(kind, tensors, dec_w)

    def cos(a, b):
        return float(torch.nn.functional.cosine_similarity(a.float().flatten(), b.float().flatten(), dim=0))
    notes["cosine_logits_bf16_vs_dequantized"] = cos(orig["logits"], ref["logits"])
    notes["cosine_logits_fakequant_vs_dequantized"] = cos(fq["logits"], ref["logits"])
    notes["experts_implementation"] = stock.config._experts_implementation
    notes["attn_implementation"] = stock.config._attn_implementation

    save_file(ref, os.path.join(out, "reference.safetensors"))
    save_file(fq, os.path.join(out, "fakequant.safetensors"))
    save_file(dequant, os.path.join(out, "dequant.safetensors"))
    save_file(actq, os.path.join(out, "actquant.safetensors"))
    if mo_fq is not None:
        save_file(mo_fq, os.path.join(out, "modelopt_fakequant.safetensors"))
        notes["cosine_logits_modelopt_fakequant_vs_dequantized"] = cos(mo_fq["logits"], ref["logits"])
    notes["files"] = {"reference.safetensors": describe(ref), "fakequant.safetensors": describe(fq),
                      "dequant.safetensors": describe(dequant), "actquant.safetensors": describe(actq)}
    if mo_fq is not None:
        notes["files"]["modelopt_fakequant.safetensors"] = describe(mo_fq)
    notes["versions"] = versions()
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(notes, f, indent=1)
    print(f"{kind}: cos(logits) bf16 vs dequantized {notes['cosine_logits_bf16_vs_dequantized']:.5f}, "
          f"fake-quant vs dequantized {notes['cosine_logits_fakequant_vs_dequantized']:.5f}, "
          f"{len(notes['quantized_modules'])} quantized modules")


def run_kinds(doc, make, kinds, root_opt="--out", kinds_opt="--kinds"):
    """A fixture maker's command line (its description the first line of doc): root_opt the fixtures' folder
    (golden/conformance), kinds_opt a comma list (default kinds); make(kind, root) for each, with torch's
    deterministic algorithms. Returns 0."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument(root_opt, dest="root", default=os.path.join("golden", "conformance"))
    ap.add_argument(kinds_opt, dest="kinds", default=kinds)
    a = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    for kind in a.kinds.split(","):
        make(kind, a.root)
    return 0


def main():
    return run_kinds(__doc__, make, "deepseek_v4,deepseek_v3,llama", kinds_opt="--models")


if __name__ == "__main__":
    sys.exit(main())
