#!/usr/bin/env python3
"""Conformance fixtures for the engine gaps of issue 19, made with transformers' own classes.

For each tiny model this writes golden/conformance/<kind>/:
  bf16/                   the random model as save_pretrained writes it (transformers 5: rope under
                          `rope_parameters`)
  bf16-rope-scaling/      (llama31 only) the same weights with the config spelled the old way
                          (`rope_scaling` + top-level rope_theta), as many Hub checkpoints still are
  reference.safetensors   transformers' eager BF16 forward of that model on the fixed prompt:
                          hidden_states.i, layer_out.i, logits (same names as make_fixtures.py)
  manifest.json           tokens, seed, versions, config
Kinds:
  qwen2    Qwen2ForCausalLM: q/k/v projections with a bias (random, not the zero init)
  llama31  LlamaForCausalLM with rope_type llama3 (factor 8, low/high_freq_factor 1/4,
           original_max_position_embeddings 64): with head_dim 16 the three frequency bands
           (kept, blended, divided by the factor) are all present
  mistral3 Mistral3ForConditionalGeneration (a tiny Pixtral vision tower beside a Mistral decoder):
           config under text_config; transformers 5.17 saves the decoder as language_model.model.*,
           bf16-other-prefix/ holds the same tensors as model.language_model.* / lm_head.
           The reference is the text-only forward (no image tokens in the prompt).
  glm4_moe Glm4MoeForCausalLM (GLM-4.5/4.6): partial rotary on the FIRST half of each head
           (partial_rotary_factor 0.5 under rope_parameters), q/k/v bias, a dense first layer, then
           DeepSeek-V3-style MoE (sigmoid, grouped top-k with correction bias, shared expert)
  glm4     Glm4ForCausalLM (GLM-4-0414 dense): partial rotary on the FIRST half of each head with
           ADJACENT pairs (repeat_interleave of cos/sin), q/k/v bias, sandwich norms (post_self_attn_layernorm
           on the attention output, post_mlp_layernorm on the MLP output, before each residual add),
           a fused gate_up_proj (gate = first half, up = second half)
  olmo2    Olmo2ForCausalLM (OLMo 2): post-norm (post_attention_layernorm on the attention output,
           post_feedforward_layernorm on the MLP output, no pre-norms), RMSNorm of the whole q and k
           projections (q_norm / k_norm over all heads), its norms `(weight * h).to(bf16)`
  minimax_m2 MiniMaxM2ForCausalLM: q_norm / k_norm over the whole projections, partial rotary (first
           half), sigmoid router on BF16 logits with a correction bias outside the gate, top-k by the
           biased score, the unbiased scores renormalised; no shared expert
  olmo3    Olmo3ForCausalLM (OLMo 3): OLMo 2 with sliding-window layers (3 of every 4) and a rope per
           layer type; bf16-old-config/ is the same model as transformers 4.57 wrote it (rope_theta,
           no layer_types, no rope_parameters)
  phi3     Phi3ForCausalLM (Phi-3 / Phi-4-mini): fused qkv_proj and gate_up_proj, partial rotary on
           the first 3/4 of each head (NeoX halves; Phi-4-mini's partial_rotary_factor 0.75)
  smollm3  SmolLM3ForCausalLM: Llama with no RoPE on every 4th layer (no_rope_layers)
  gemma3_text Gemma3ForCausalLM (Gemma 3 text): embedding times sqrt(hidden_size), zero-centred RMSNorms
           (1 + w) before and after attention and MLP, per-head q/k norms, score scale
           query_pre_attn_scalar^-0.5, sliding-window and full layers with a rope each (local theta 1e4;
           global 1e6 with linear scaling x8, as the 4B-27B releases), GELU-tanh MLP, tied lm_head;
           bf16-old-config/ is the same model under the Hub originals' spelling (rope_theta,
           rope_local_base_freq, rope_scaling, sliding_window_pattern; no layer_types / rope_parameters)
  qwen3    Qwen3ForCausalLM: RMSNorm of each q and k head (q_norm / k_norm) before RoPE
  qwen3_moe Qwen3MoeForCausalLM: softmax top-k router with norm_topk_prob, no shared expert
  mixtral  MixtralForCausalLM: softmax over the experts, top-k renormalised
  qwen3_next Qwen3NextForCausalLM (Qwen3-Next / Qwen3.5 text): 4 layers alternating Gated DeltaNet
           linear attention and gated full attention (partial rotary on the first quarter), zero-centred
           RMSNorm, a dense first layer (mlp_only_layers) then MoE with a sigmoid-gated shared expert;
           2 key heads, 4 value heads (the in_proj_qkvz/ba grouping), random dt_bias. Quantized with the
           ignore list of llmcompressor's Qwen3-Next example (linear_attn, mlp.gate, shared_expert_gate)
  qwen3_5_moe Qwen3_5MoeForCausalLM (Qwen3.5 MoE, text): Qwen3-Next's layers with the linear attention's
           projections apart (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a), every MLP an MoE
For the kinds in QUANTIZE also (qwen2, llama31, mistral3 were made bf16-only first; `--add-nvfp4` adds
this part to such a fixture and keeps its other files; mistral3's vision tower and projector stay BF16):
  nvfp4/                      llmcompressor.oneshot NVFP4 (W4A4) of bf16/, save_compressed=True
  reference_nvfp4.safetensors transformers' eager BF16 forward of that checkpoint decompressed by
                              compressed-tensors (what `trace` of nvfp4/ compares its reference with)
manifest.json also holds transformers' own FP32-vs-BF16 difference per layer (rel L2 of the FP32
forward of the same weights against the BF16 one), the noise floor the agreement is judged beside.
Only for making fixtures (run where torch and transformers are installed); nothing in the build or
the tests runs it. Usage: python tools/conformance/make_family_fixtures.py [--out golden/conformance]
"""
import argparse
import json
import os
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("USE_HUB_KERNELS", "0")

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

SEQ = 32
TOKENS = [(i * 37 + 11) % 256 for i in range(SEQ)]
SEED = 1234


def config(kind):
    import transformers as tf
    common = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  initializer_range=0.1, tie_word_embeddings=False)
    if kind == "qwen2":
        return tf.Qwen2Config(**common, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    if kind == "mistral3":
        text = tf.MistralConfig(**common, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                                sliding_window=None)
        vision = tf.PixtralVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                        num_attention_heads=2, image_size=32, patch_size=16)
        return tf.Mistral3Config(text_config=text, vision_config=vision, image_token_index=255)
    moe = dict(moe_intermediate_size=32, num_experts_per_tok=2)
    if kind == "glm4_moe":
        return tf.Glm4MoeConfig(**common, **moe, n_routed_experts=8, n_shared_experts=1, n_group=2, topk_group=1,
                                first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True,
                                attention_bias=True, use_qk_norm=False,
                                rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                 "partial_rotary_factor": 0.5})
    if kind == "glm4":
        return tf.Glm4Config(**common, head_dim=16, attention_bias=True, pad_token_id=0,
                             rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                              "partial_rotary_factor": 0.5})
    if kind == "olmo2":
        return tf.Olmo2Config(**common, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                              rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    if kind == "minimax_m2":
        return tf.MiniMaxM2Config(**common, head_dim=16, num_local_experts=8, num_experts_per_tok=2, pad_token_id=0,
                                  bos_token_id=1, eos_token_id=2,
                                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                   "partial_rotary_factor": 0.5})
    if kind == "olmo3":
        return tf.Olmo3Config(**dict(common, num_hidden_layers=4), pad_token_id=0, bos_token_id=1, eos_token_id=2,
                              sliding_window=8,
                              rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 500000.0},
                                               "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}})
    if kind == "phi3":
        return tf.Phi3Config(**common, pad_token_id=0, bos_token_id=1, eos_token_id=2, sliding_window=None,
                             rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                              "partial_rotary_factor": 0.75})
    if kind == "smollm3":
        return tf.SmolLM3Config(**dict(common, num_hidden_layers=4), pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                no_rope_layer_interval=4, use_sliding_window=False,
                                rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    if kind == "gemma3_text":
        return tf.Gemma3TextConfig(**dict(common, tie_word_embeddings=True), head_dim=16, pad_token_id=0, bos_token_id=2,
                                   eos_token_id=1, query_pre_attn_scalar=24, sliding_window=8,
                                   layer_types=["sliding_attention", "full_attention"],
                                   rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                                    "full_attention": {"rope_type": "linear", "rope_theta": 1000000.0,
                                                                       "factor": 8.0}})
    if kind == "qwen3":
        return tf.Qwen3Config(**common, head_dim=16, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    if kind == "qwen3_moe":
        return tf.Qwen3MoeConfig(**common, **moe, head_dim=16, num_experts=8, norm_topk_prob=True,
                                 decoder_sparse_step=1, mlp_only_layers=[0],
                                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    if kind == "mixtral":
        c = dict(common, intermediate_size=32)
        return tf.MixtralConfig(**c, num_local_experts=8, num_experts_per_tok=2, sliding_window=None,
                                rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    if kind == "qwen3_next":
        return tf.Qwen3NextConfig(**dict(common, num_hidden_layers=4), **moe, head_dim=16, num_experts=8,
                                  norm_topk_prob=True, shared_expert_intermediate_size=32, decoder_sparse_step=1,
                                  mlp_only_layers=[0], linear_conv_kernel_dim=4, linear_key_head_dim=16,
                                  linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                                  layer_types=["linear_attention", "full_attention"] * 2,
                                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                   "partial_rotary_factor": 0.25})
    if kind == "qwen3_5_moe":
        return tf.Qwen3_5MoeTextConfig(**dict(common, num_hidden_layers=4), **moe, head_dim=16, num_experts=8,
                                       shared_expert_intermediate_size=32, linear_conv_kernel_dim=4,
                                       linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
                                       linear_num_value_heads=4, layer_types=["linear_attention", "full_attention"] * 2,
                                       rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                        "partial_rotary_factor": 0.25})
    if kind == "llama31":
        return tf.LlamaConfig(**common, rope_parameters={
            "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
    raise ValueError(kind)


def model_class(kind):
    import transformers as tf
    return {"qwen2": tf.Qwen2ForCausalLM, "llama31": tf.LlamaForCausalLM,
            "mistral3": tf.Mistral3ForConditionalGeneration, "glm4_moe": tf.Glm4MoeForCausalLM,
            "glm4": tf.Glm4ForCausalLM, "olmo2": tf.Olmo2ForCausalLM, "olmo3": tf.Olmo3ForCausalLM, "minimax_m2": tf.MiniMaxM2ForCausalLM, "phi3": tf.Phi3ForCausalLM,
            "smollm3": tf.SmolLM3ForCausalLM, "gemma3_text": tf.Gemma3ForCausalLM,
            "qwen3": tf.Qwen3ForCausalLM, "qwen3_moe": tf.Qwen3MoeForCausalLM,
            "mixtral": tf.MixtralForCausalLM, "qwen3_next": tf.Qwen3NextForCausalLM,
            "qwen3_5_moe": tf.Qwen3_5MoeForCausalLM}[kind]


QUANTIZE = ("minimax_m2", "gemma3_text", "glm4", "olmo2", "olmo3", "phi3", "smollm3", "glm4_moe", "qwen3", "qwen3_moe", "mixtral", "qwen3_next", "qwen3_5_moe", "qwen2", "llama31", "mistral3")
MOE = ("minimax_m2", "glm4_moe", "qwen3_moe", "mixtral", "qwen3_next", "qwen3_5_moe")
# modules a family's published llmcompressor example leaves unquantized, beside lm_head and mlp.gate
IGNORE = {"qwen3_next": ["re:.*mlp.shared_expert_gate$", "re:.*linear_attn.*"],
          "qwen3_5_moe": ["re:.*mlp.shared_expert_gate$", "re:.*linear_attn.*"],
          # llmcompressor's multimodal examples keep the vision tower and the projector in BF16
          "mistral3": ["re:.*vision_tower.*", "re:.*multi_modal_projector.*"]}


def decoder_layers(model):
    inner = model.model
    return inner.language_model.layers if hasattr(inner, "language_model") else inner.layers


@torch.no_grad()
def randomize(model, gen):
    """Norm weights, biases and the router's correction bias are initialised to constants; random
    values make them count."""
    for name, p in list(model.named_parameters()) + list(model.named_buffers()):
        if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
            p.copy_((1 + 0.1 * torch.randn(p.shape, generator=gen)).to(p.dtype))
        elif name.endswith("e_score_correction_bias"):
            # small next to the score spread, so that the routing still depends on the token
            p.copy_((0.05 * torch.randn(p.shape, generator=gen)).to(p.dtype))
        elif name.endswith("dt_bias"):
            # Gated DeltaNet's time-step bias (ones at init): per-head decays that differ
            p.copy_((0.5 * torch.randn(p.shape, generator=gen)).to(p.dtype))
        elif name.endswith(".bias"):
            p.copy_((0.5 * torch.randn(p.shape, generator=gen)).to(p.dtype))


def forward_record(model):
    """make_fixtures' record of the fixed prompt (the same TOKENS) over this family's decoder layers"""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_fixtures as mf
    return mf.forward_record(model, decoder_layers(model))


def stock_expert_names(tensors):
    """llmcompressor 0.14 saves Mixtral's experts as block_sparse_moe.experts.E.{gate,up,down}_proj
    (its linearized names under the checkpoint prefix); stock transformers reads w1/w3/w2"""
    ren = {".gate_proj.": ".w1.", ".up_proj.": ".w3.", ".down_proj.": ".w2."}
    fixed = {}
    for k, v in tensors.items():
        if ".block_sparse_moe.experts." in k:
            for a, b in ren.items():
                k = k.replace(a, b)
        fixed[k] = v
    return fixed


def old_style_config(bf16_dir, out_dir):
    """The same model with rope under rope_scaling and rope_theta at the top (pre-5 spelling)."""
    shutil.copytree(bf16_dir, out_dir)
    path = os.path.join(out_dir, "config.json")
    cfg = json.load(open(path))
    rp = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rp.pop("rope_theta")
    cfg["rope_scaling"] = rp
    json.dump(cfg, open(path, "w"), indent=2)


def gemma3_old_config(bf16_dir, out_dir):
    """Gemma 3 as the Hub's original config.json spells it (transformers 4.5x): one rope_theta for the
    global layers, rope_local_base_freq for the local ones, rope_scaling for the global, the layer
    pattern as sliding_window_pattern, no layer_types, no rope_parameters, tie_word_embeddings left out."""
    shutil.copytree(bf16_dir, out_dir)
    path = os.path.join(out_dir, "config.json")
    cfg = json.load(open(path))
    rp = cfg.pop("rope_parameters")
    lt = cfg.pop("layer_types")
    assert lt == ["sliding_attention", "full_attention"]
    cfg["sliding_window_pattern"] = 2
    cfg["rope_theta"] = rp["full_attention"]["rope_theta"]
    cfg["rope_local_base_freq"] = rp["sliding_attention"]["rope_theta"]
    cfg["rope_scaling"] = {"rope_type": rp["full_attention"]["rope_type"], "factor": rp["full_attention"]["factor"]}
    cfg.pop("tie_word_embeddings", None)
    json.dump(cfg, open(path, "w"), indent=2)


def olmo3_old_config(bf16_dir, out_dir):
    """OLMo 3 as transformers 4.57 saved it: rope_theta at the top (the full layers'), no
    rope_parameters, no layer_types (every 4th layer full). transformers 5 converts it back with the
    sliding layers at the class default theta 5e5, which the fixture's sliding layers use."""
    shutil.copytree(bf16_dir, out_dir)
    path = os.path.join(out_dir, "config.json")
    cfg = json.load(open(path))
    rp = cfg.pop("rope_parameters")
    assert cfg.pop("layer_types") == ["sliding_attention"] * 3 + ["full_attention"]
    assert rp["sliding_attention"]["rope_theta"] == 500000.0
    cfg["rope_theta"] = rp["full_attention"]["rope_theta"]
    json.dump(cfg, open(path, "w"), indent=2)


def other_prefix(bf16_dir, out_dir):
    """The same model with the decoder under the other prefix: transformers 5.17 saves Mistral3 as
    language_model.model.* / language_model.lm_head.weight; transformers 5's in-memory (and some
    exporters') names are model.language_model.* / lm_head.weight. Whichever was saved, the other."""
    from safetensors.torch import load_file
    shutil.copytree(bf16_dir, out_dir)
    path = os.path.join(out_dir, "model.safetensors")
    pairs = [("language_model.model.", "model.language_model."), ("language_model.lm_head.", "lm_head."),
             ("vision_tower.", "model.vision_tower."), ("multi_modal_projector.", "model.multi_modal_projector.")]
    t = load_file(path)
    old_style = any(k.startswith("language_model.model.") for k in t)
    ren = {}
    for k, v in t.items():
        for a, b in pairs:
            src, dst = (a, b) if old_style else (b, a)
            if k.startswith(src):
                k = dst + k[len(src):]
                break
        ren[k] = v.contiguous()
    save_file(ren, path, metadata={"format": "pt"})


def rel_l2(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float((a - b).norm() / b.norm())


@torch.no_grad()
def fp32_vs_bf16(bf16_dir, kind, ref):
    """transformers' own FP32 forward of the same (BF16) weights against its BF16 forward: rel L2
    per recorded tensor and top-1 agreement of the logits; the BF16 noise floor of the fixture."""
    m = model_class(kind).from_pretrained(bf16_dir, dtype=torch.float32, attn_implementation="eager").eval()
    f = forward_record(m)
    out = {k: rel_l2(ref[k], f[k]) for k in ref if k != "input_ids"}
    out["top1_agreement"] = float((ref["logits"].argmax(-1) == f["logits"].argmax(-1)).double().mean())
    return out


def oneshot_nvfp4(cls, bf16_dir, out_dir, ignore, moe, keep_mapping_of=None, fix_decompressed=None):
    """llmcompressor.oneshot NVFP4 W4A4 of bf16_dir (MoE experts as per-expert Linears when moe), saved
    compressed into out_dir, under mf.keep_conversion_mapping(keep_mapping_of) when given; the checkpoint
    decompressed by compressed-tensors, passed through fix_decompressed(folder) when given, loaded by cls as
    stock. Returns (transformers' forward record of it, the decompressed weights' names)."""
    import contextlib
    import tempfile
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_fixtures as mf
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        shutil.copytree(bf16_dir, src)
        mf.tokenizer().save_pretrained(src)
        with mf.keep_conversion_mapping(keep_mapping_of) if keep_mapping_of else contextlib.nullcontext():
            if moe:
                from llmcompressor.modeling.moe.linearize import load_quantizable_moe
                with load_quantizable_moe(cls):
                    model = cls.from_pretrained(src, dtype=torch.bfloat16, attn_implementation="eager")
            else:
                model = cls.from_pretrained(src, dtype=torch.bfloat16, attn_implementation="eager")
            recipe = QuantizationModifier(targets="Linear", scheme="NVFP4", ignore=ignore)
            oneshot(model=model, dataset=mf.calib_dataset(), processor=mf.tokenizer(), recipe=recipe,
                    num_calibration_samples=mf.CALIB_SAMPLES, max_seq_length=mf.CALIB_LEN)
            model.save_pretrained(out_dir, save_compressed=True)
        deq = os.path.join(tmp, "deq")
        tensors, dec_w = mf.decompress_checkpoint(out_dir, deq)
        if fix_decompressed:
            fix_decompressed(deq)
        stock, info = cls.from_pretrained(deq, dtype=torch.bfloat16, attn_implementation="eager",
                                          output_loading_info=True)
        if info["missing_keys"] or info["unexpected_keys"]:
            raise RuntimeError(f"{out_dir}: decompressed checkpoint does not load: {info}")
        return forward_record(stock.eval()), dec_w


def stock_expert_names_file(deq_dir):
    """stock_expert_names over deq_dir's model.safetensors, in place."""
    from safetensors.torch import load_file
    path = os.path.join(deq_dir, "model.safetensors")
    save_file(stock_expert_names(load_file(path)), path, metadata={"format": "pt"})


def quantize(kind, bf16_dir, out_dir, notes):
    """llmcompressor.oneshot NVFP4 W4A4 (MoE experts as per-expert Linears), saved compressed;
    returns transformers' forward of the checkpoint decompressed by compressed-tensors."""
    import make_fixtures as mf
    ignore = ["lm_head", "re:.*mlp.gate$"] + IGNORE.get(kind, [])
    ref, dec_w = oneshot_nvfp4(model_class(kind), bf16_dir, out_dir, ignore, kind in MOE, keep_mapping_of=kind,
                               fix_decompressed=stock_expert_names_file if kind in ("mixtral", "minimax_m2") else None)
    notes["quantized_by"] = ("llmcompressor.oneshot QuantizationModifier(targets='Linear', scheme='NVFP4', "
                             f"ignore={ignore!r}), save_compressed=True; calibration "
                             f"{mf.CALIB_SAMPLES} x {mf.CALIB_LEN} random ids (seed {mf.SEED + 1})")
    notes["nvfp4_modules"] = sorted(dec_w)
    if kind == "mixtral":
        notes["nvfp4_expert_names"] = "block_sparse_moe.experts.E.{gate,up,down}_proj (as llmcompressor 0.14 saves them)"
    return ref


def make(kind, root):
    import transformers
    out = os.path.join(root, kind)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    torch.manual_seed(SEED)
    model = model_class(kind)._from_config(config(kind), dtype=torch.bfloat16, attn_implementation="eager").eval()
    randomize(model, torch.Generator().manual_seed(SEED))
    bf16 = os.path.join(out, "bf16")
    model.save_pretrained(bf16)
    # the reference is the forward of the model as saved and loaded again (what the tool reads)
    stock = model_class(kind).from_pretrained(bf16, dtype=torch.bfloat16, attn_implementation="eager").eval()
    ref = forward_record(stock)
    save_file(ref, os.path.join(out, "reference.safetensors"))
    if kind == "llama31":
        old_style_config(bf16, os.path.join(out, "bf16-rope-scaling"))
    if kind == "mistral3":
        other_prefix(bf16, os.path.join(out, "bf16-other-prefix"))
    if kind == "gemma3_text":
        gemma3_old_config(bf16, os.path.join(out, "bf16-old-config"))
    if kind == "olmo3":
        olmo3_old_config(bf16, os.path.join(out, "bf16-old-config"))
    notes = {"model": kind, "tokens": TOKENS, "seed": SEED, "class": type(stock).__name__,
             "versions": versions(),
             "attn_implementation": "eager", "config": json.load(open(os.path.join(bf16, "config.json")))}
    if kind in QUANTIZE:
        add_quantized(kind, out, ref, notes)
    json.dump(notes, open(os.path.join(out, "manifest.json"), "w"), indent=1)
    print(kind, "logits", tuple(ref["logits"].shape), "written to", out)


def add_quantized(kind, out, ref, notes):
    """nvfp4/ and reference_nvfp4.safetensors of the fixture in `out` (bf16/ and its BF16 forward `ref`
    there already), and transformers' FP32-vs-BF16 difference into notes."""
    bf16 = os.path.join(out, "bf16")
    notes["transformers_fp32_vs_bf16"] = fp32_vs_bf16(bf16, kind, ref)
    qref = quantize(kind, bf16, os.path.join(out, "nvfp4"), notes)
    save_file(qref, os.path.join(out, "reference_nvfp4.safetensors"))
    notes["top1_bf16_vs_nvfp4_dequantized"] = float((qref["logits"].argmax(-1) == ref["logits"].argmax(-1)).double().mean())


def add_nvfp4(kind, root):
    """The NVFP4 part of a fixture made earlier without it (bf16/ and reference.safetensors are kept
    as they are): first check that transformers' BF16 forward of bf16/ made here reproduces the
    fixture's reference.safetensors bit for bit, then quantize and record into manifest.json."""
    from safetensors.torch import load_file
    out = os.path.join(root, kind)
    if os.path.exists(os.path.join(out, "nvfp4")):
        raise RuntimeError(f"{out}/nvfp4 exists already")
    ref = load_file(os.path.join(out, "reference.safetensors"))
    stock = model_class(kind).from_pretrained(os.path.join(out, "bf16"), dtype=torch.bfloat16,
                                              attn_implementation="eager").eval()
    again = forward_record(stock)
    if not all(torch.equal(again[k], ref[k]) for k in ref):
        raise RuntimeError(f"{kind}: the BF16 forward made here differs from {out}/reference.safetensors")
    path = os.path.join(out, "manifest.json")
    notes = json.load(open(path))
    add_quantized(kind, out, ref, notes)
    notes["nvfp4_added"] = {"by": "tools/conformance/make_family_fixtures.py --add-nvfp4", "versions": versions(),
                            "bf16_forward_reproduces_reference.safetensors": True}
    json.dump(notes, open(path, "w"), indent=1)
    print(kind, "nvfp4/ added to", out)


def versions():
    """make_fixtures' record of the versions, for the packages these fixtures use"""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_fixtures as mf
    return mf.versions(("torch", "transformers", "compressed-tensors", "llmcompressor", "safetensors"))


def add_fused_experts(kind, root):
    """bf16-fused-experts/: the fixture's bf16/ as transformers 5 saves it with
    save_pretrained(save_original_format=False): each layer's experts fused out-major
    (mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj [E, H, I]; Mixtral's
    block_sparse_moe renamed mlp). The same model: reloaded, its forward equals bf16/'s under the
    same transformers (the fixtures' reference.safetensors may come from another version)."""
    out = os.path.join(root, kind)
    dst = os.path.join(out, "bf16-fused-experts")
    shutil.rmtree(dst, ignore_errors=True)
    m = model_class(kind).from_pretrained(os.path.join(out, "bf16"), dtype=torch.bfloat16,
                                          attn_implementation="eager").eval()
    m.save_pretrained(dst, save_original_format=False)
    again = model_class(kind).from_pretrained(dst, dtype=torch.bfloat16, attn_implementation="eager").eval()
    ref, got = forward_record(m), forward_record(again)
    assert all(torch.equal(got[k], ref[k]) for k in ref), "the fused-experts save does not reload to the same model"
    print(kind, "bf16-fused-experts written; its forward equals bf16/'s")


def add_modelopt(kind, root):
    """modelopt/: bf16/ quantized by NVIDIA ModelOpt (NVFP4_DEFAULT_CFG, max calibration on the
    calibration ids) and written by export_hf_checkpoint: the ModelOpt naming (weight + weight_scale
    + weight_scale_2 + input_scale) of the same model, beside llmcompressor's nvfp4/."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_fixtures as mf
    out = os.path.join(root, kind)
    dst = os.path.join(out, "modelopt")
    shutil.rmtree(dst, ignore_errors=True)
    saved_cls = mf.model_class
    mf.model_class = model_class   # modelopt_export loads the family's class
    try:
        notes = {}
        mf.modelopt_export(kind, os.path.join(out, "bf16"), dst, notes)
    finally:
        mf.model_class = saved_cls
    man = os.path.join(out, "manifest.json")
    m = json.load(open(man))
    m["modelopt"] = notes.get("modelopt")
    json.dump(m, open(man, "w"), indent=1)
    print(kind, "modelopt/ written:", len((notes.get("modelopt") or {}).get("nvfp4_modules", [])), "NVFP4 modules")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="golden/conformance")
    ap.add_argument("--kinds", default="qwen2,llama31,mistral3")
    ap.add_argument("--add-nvfp4", action="store_true",
                    help="add nvfp4/ to fixtures made without it, keeping their files (add_nvfp4)")
    ap.add_argument("--add-modelopt", action="store_true",
                    help="add modelopt/ (NVIDIA ModelOpt NVFP4 export of bf16/) beside nvfp4/")
    ap.add_argument("--add-fused-experts", action="store_true",
                    help="add bf16-fused-experts/ (transformers 5's own expert layout) beside bf16/")
    a = ap.parse_args()
    for k in a.kinds.split(","):
        if a.add_modelopt:
            add_modelopt(k, a.out)
        elif a.add_fused_experts:
            add_fused_experts(k, a.out)
        else:
            add_nvfp4(k, a.out) if a.add_nvfp4 else make(k, a.out)


if __name__ == "__main__":
    main()
