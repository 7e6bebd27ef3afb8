#!/usr/bin/env python3
"""peer_torch.py — the PyTorch eager peer of `nvfp4dbg trace` for one DeepSeek-V4 layer.

The baseline of issue 11: what an engineer would write by hand to get the same answers as the
trace, run side by side with it (bench/bench_layer.sh PEER). It replays the stages of
recipes/deepseek_v4.yaml for the prologue, one sliding-attention layer (the layers before it on
the reference path only, as `trace --layers` does) and, when that layer is the last one, the
epilogue, doing the work the trace does:

  reference path   weights dequantized with tensor ops (e2m1 nibbles, low first, x e4m3 block
                   scale / weight_global_scale; FP8 blocks x their scales), FP32 torch.matmul,
                   BF16 rounding after every stage;
  production path  NVFP4 activations per 16-block with the module's input_global_scale
                   (kernel semantics: s = e4m3(amax/6 * g), codes = RNE e2m1 of x/(s/g), saturating
                   at 6), then the (codes x scales) GEMM against the weight codes, times alpha
                   (the emulated FP4xFP4 GEMM); FP8 per-128 activations before o_a_proj; the FP8
                   KV cache; same math elsewhere;
  both modes       isolated (production stage on the reference input) and chained (on the
                   previous production output), plus the NVFP4 floor GEMM per quantized linear
                   (the input quantized with the healthy multiplier 2688/amax): per NVFP4 linear
                   four GEMMs (reference, isolated, floor, chained), as src/pipeline/ops_linear.c;
  probes           per stage and mode: amax, NaN/Inf counts, cosine, relative L2, SQNR, max error,
                   worst 16-block; saturation and zero-scale fractions, floor SQNR; router top-k
                   agreement; head KL and top-1 agreement.

Routed experts: only the experts the tokens pick (on either path) are read from the mmapped
safetensors. Compressed (CSA/HCA) layers are not replayed.

Prints `peer_elapsed_s S` (load + compute + probes of the replay, device synchronised) and
`peer_weight_bytes N`. Python 3, torch and safetensors (h5py only for --compare-trace).
Not used by the build or the tests.

usage: python3 bench/peer_torch.py CKPT --tokens N --layer 0 [--device cuda|cpu] [--repeat R]
                                   [--csv ROWS.csv] [--compare-trace TRACE.h5]
"""
import argparse
import csv
import glob
import json
import math
import os
import sys
import time

import torch
from safetensors import safe_open

E4M3_MAX = 448.0
GLOBAL_NUM = 2688.0  # 448 * 6: global = 2688 / amax
E2M1_MAG = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


# ---------------------------------------------------------------- checkpoint access
class Ckpt:
    """Tensors by name over every *.safetensors file of a directory; counts the bytes read."""

    def __init__(self, path, device):
        self.dev = device
        self.files = {}
        self.where = {}
        self.bytes = 0
        for f in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
            h = safe_open(f, framework="pt", device=str(device))
            self.files[f] = h
            for k in h.keys():
                self.where[k] = h
        if not self.where:
            sys.exit(f"{path}: no *.safetensors files")
        with open(os.path.join(path, "config.json")) as fh:
            self.cfg = json.load(fh)

    def has(self, name):
        return name in self.where

    def raw(self, name):
        if name not in self.where:
            sys.exit(f"checkpoint has no tensor {name}")
        t = self.where[name].get_tensor(name)
        self.bytes += t.numel() * t.element_size()
        return t

    def f32(self, name):
        return self.raw(name).float()

    def rows(self, name, ids):
        """Rows of a [V, D] table (the embedding): only the rows asked for are read."""
        sl = self.where[name].get_slice(name)
        out = []
        for i in ids:
            r = sl[i:i + 1]
            self.bytes += r.numel() * r.element_size()
            out.append(r)
        return torch.cat(out).to(self.dev).float()


# ---------------------------------------------------------------- scalar formats
def bf16(x):
    return x.to(torch.bfloat16).float()


def e4m3_sat(x):
    """float -> e4m3 (RNE, |x| > 448 clamps to 448: the kernels' satfinite) -> float."""
    return x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).float()


def e2m1_round(y):
    """RNE onto the e2m1 grid, saturating at 6 (ties 0.25, 1.25, 2.5, 5 down; 0.75, 1.75, 3.5 up)."""
    a = y.abs()
    i = ((a > 0.25).to(torch.int64) + (a >= 0.75) + (a > 1.25) + (a >= 1.75) + (a > 2.5) + (a >= 3.5) + (a > 5.0))
    mag = torch.tensor(E2M1_MAG, device=y.device)[i]
    return torch.where(y < 0, -mag, mag)


def e2m1_lut(device):
    return torch.tensor(E2M1_MAG + [-m for m in E2M1_MAG], device=device)


def quant_dequant_nvfp4(x, g):
    """Kernel semantics (vLLM scaled_fp4_quant): per 16-block s = e4m3(g * amax/6), codes = e2m1 of
    x * 1/(s/g); returns codes x s (the GEMM operand; the global factors live in alpha) and the
    saturation / zero-scale counts."""
    rows, k = x.shape
    xb = x.reshape(rows, k // 16, 16)
    amax = xb.abs().amax(-1)
    s = e4m3_sat(g * (amax * (1.0 / 6.0)))
    mult = torch.where(s != 0, 1.0 / (s * (1.0 / g)), torch.zeros_like(s))
    y = xb * mult[..., None]
    q = e2m1_round(y) * s[..., None]
    sat = (y.abs() > 6.0).sum()
    zero = ((s == 0) & (amax > 0)).sum()
    nonzero = (amax > 0).sum()
    return q.reshape(rows, k), (sat, zero, nonzero, x.numel())


def fake_quant_fp8(x, group, pow2=True):
    """FP8 e4m3 per `group` values of each row with power-of-two scales 2^ceil(log2(amax/448))."""
    rows, k = x.shape
    group = min(group, k)
    if k % group:  # a short last group: each group by itself
        return torch.cat([fake_quant_fp8(x[:, c0:c0 + group], group, pow2) for c0 in range(0, k, group)], 1)
    xg = x.reshape(rows, k // group, group)
    amax = xg.abs().amax(-1, keepdim=True)
    if pow2:
        m, e = torch.frexp(amax.clamp_min(1e-4) / E4M3_MAX)
        s = torch.ldexp(torch.ones_like(m), torch.where(m == 0.5, e - 1, e))
    else:
        s = amax / E4M3_MAX
    q = e4m3_sat(xg / s) * s
    return torch.where(amax == 0, xg, q).reshape(rows, k)  # an all-zero group stays as it is


# ---------------------------------------------------------------- GEMMs
class Gemm:
    """FP32 GEMM for the reference; for the (codes x scales) operands, which BF16 holds exactly,
    BF16 tensor cores with FP32 output on CUDA (torch.mm out_dtype) when this torch has it."""

    def __init__(self, device):
        self.qdtype = torch.float32
        if device.type == "cuda":
            try:
                a = torch.ones(16, 16, device=device, dtype=torch.bfloat16)
                torch.mm(a, a, out_dtype=torch.float32)
                self.qdtype = torch.bfloat16
            except (TypeError, RuntimeError):
                pass

    @staticmethod
    def ref(x, w):
        return torch.matmul(x, w.t())

    def q(self, xq, wq):
        if self.qdtype == torch.bfloat16:
            return torch.mm(xq.to(torch.bfloat16), wq.t(), out_dtype=torch.float32)
        return torch.matmul(xq, wq.t())

    def qweight(self, w):
        return w.to(self.qdtype)


# ---------------------------------------------------------------- probes
class Probes:
    def __init__(self, layer_of):
        self.rows = []
        self.layer_of = layer_of

    def row(self, name, op, mode, ref, prod, quantized, **extra):
        r = ref.reshape(-1).double()
        p = prod.reshape(-1).double()
        rf, pf = torch.isfinite(r), torch.isfinite(p)
        both = rf & pf
        rz = torch.where(both, r, 0.0)
        pz = torch.where(both, p, 0.0)
        d = rz - pz
        n = r.numel()
        ee = d * d
        pad = (-n) % 16
        blk = torch.nn.functional.pad(ee, (0, pad)).reshape(-1, 16).sum(-1)
        st = torch.stack([
            torch.where(rf, r.abs(), 0.0).max(), torch.where(pf, p.abs(), 0.0).max(),
            torch.isnan(r).sum().double(), torch.isnan(p).sum().double(),
            torch.isinf(r).sum().double(), torch.isinf(p).sum().double(),
            (rz * rz).sum(), (pz * pz).sum(), (rz * pz).sum(), ee.sum(), d.abs().max(), blk.argmax().double(),
        ]).tolist()
        ra, pa, rn, pn, ri, pi, srr, spp, srp, see, mx, wb = st
        row = {
            "index": len(self.rows), "layer": self.layer_of(name), "name": name, "op": op, "mode": mode,
            "quantized": int(quantized), "numel": n, "ref_amax": ra, "prod_amax": pa,
            "ref_nan": int(rn), "prod_nan": int(pn), "ref_inf": int(ri), "prod_inf": int(pi),
            "cosine": srp / math.sqrt(srr * spp) if srr > 0 and spp > 0 else float("nan"),
            "rel_l2": math.sqrt(see / srr) if srr > 0 else float("nan"),
            "sqnr_db": sqnr_db(srr, see),
            "max_abs_err": mx, "worst_block": int(wb),
        }
        row.update(extra)
        self.rows.append(row)


def amax_of(x):
    a = x.abs().amax()
    return float("nan") if not torch.isfinite(a) else a.item()


def sqnr_db(srr, see):
    """10 log10(signal / error), capped at 200 dB like the trace (identical tensors)."""
    if not srr > 0:
        return float("nan")
    return min(200.0, 10 * math.log10(srr / see)) if see > 0 else 200.0


def sqnr(ref, y):
    r, d = ref.double(), (ref.double() - y.double())
    return sqnr_db((r * r).sum().item(), (d * d).sum().item())


# ---------------------------------------------------------------- linear modules
class Linear:
    """One checkpoint linear: NVFP4 (compressed-tensors names), FP8 blocks, or dense BF16/F32."""

    def __init__(self, ck, gemm, module, groups=1, act_fp8_group=0):
        self.gemm, self.name, self.groups, self.fp8g = gemm, module, groups, act_fp8_group
        dev = ck.dev
        if ck.has(module + ".weight_packed"):
            packed = ck.raw(module + ".weight_packed")
            sf = ck.raw(module + ".weight_scale").float()
            self.w_div = ck.f32(module + ".weight_global_scale").reshape(-1)[0].item()
            n, k2 = packed.shape
            lut = e2m1_lut(dev)
            # element 2j in the low nibble, 2j+1 in the high one
            codes = torch.stack([packed & 15, packed >> 4], dim=-1).reshape(n, 2 * k2).long()
            vals = lut[codes].reshape(n, -1, 16)
            self.w_ref = (vals * (sf / self.w_div)[..., None]).reshape(n, 2 * k2)
            self.kind = "nvfp4" if ck.has(module + ".input_global_scale") else "weight_only"
            if self.kind == "nvfp4":
                self.mult = ck.f32(module + ".input_global_scale").reshape(-1)[0].item()
                self.alpha = 1.0 / (self.mult * self.w_div)
                self.w_q = gemm.qweight((vals * sf[..., None]).reshape(n, 2 * k2))
            del codes, vals
        elif ck.raw_dtype_is_fp8(module + ".weight"):
            w = ck.raw(module + ".weight").float()
            s = ck.fp8_scale(module, w.shape)
            self.w_ref = w * s
            self.kind = "weight_only"
        else:
            self.w_ref = ck.f32(module + ".weight")
            self.kind = "weight_only" if act_fp8_group else "same"

    def _mm(self, x, w, alpha=1.0, quant=False):
        f = self.gemm.q if quant else self.gemm.ref
        if self.groups > 1:
            t = x.shape[0]
            g = self.groups
            xg = x.reshape(t, g, -1).transpose(0, 1)
            wg = w.reshape(g, w.shape[0] // g, w.shape[1])
            y = torch.stack([f(xg[i], wg[i]) for i in range(g)], 1).reshape(t, -1)
        else:
            y = f(x, w)
        return y * alpha if alpha != 1.0 else y

    def ref(self, x):
        return bf16(self._mm(x, self.w_ref))

    def prod(self, x):
        """Production output and its quantizer figures."""
        if self.kind == "nvfp4":
            xq, (sat, zero, nz, ne) = quant_dequant_nvfp4(x, self.mult)
            y = self._mm(xq, self.w_q, self.alpha, quant=True)
            return bf16(y), {"sat_frac": sat.item() / ne, "zero_block_frac": zero.item() / max(nz.item(), 1),
                             "scale_mult": self.mult, "alpha": self.alpha}
        xin = x
        if self.fp8g:
            xin = fake_quant_fp8(x, min(self.fp8g, self.w_ref.shape[1]))
        return bf16(self._mm(xin, self.w_ref)), {}

    def floor(self, x, amax):
        """The same quantized GEMM with the input multiplier clamped into [0.5, 2] x 2688/amax."""
        if self.kind != "nvfp4" or not (amax > 0) or not math.isfinite(amax):
            return None
        gi = GLOBAL_NUM / amax
        g = min(max(self.mult, 0.5 * gi), 2.0 * gi) if self.mult > 0 and math.isfinite(self.mult) else gi
        xq, _ = quant_dequant_nvfp4(x, g)
        return bf16(self._mm(xq, self.w_q, 1.0 / (g * self.w_div), quant=True))


def lin_stage(pr, lin, name, x_ref, y_ref, x_chain, iso=True, chain=True, emit=True):
    """ops_linear.c nd_lin_stage: isolated output, floor, chained output, and their rows."""
    amax = amax_of(x_ref)
    y_iso = y_chain = None
    quantized = lin.kind != "same"
    if iso:
        fig = {}
        if lin.kind == "same":
            y_iso = y_ref
        else:
            y_iso, fig = lin.prod(x_ref)
        yf = lin.floor(x_ref, amax)
        fig["floor_sqnr_db"] = sqnr(y_ref, yf) if yf is not None else float("nan")
        if emit:
            pr.row(name, "linear", "isolated", y_ref, y_iso, quantized, **fig)
    if chain and x_chain is not None:
        y_chain, fig = lin.prod(x_chain)
        if emit:
            pr.row(name, "linear", "chained", y_ref, y_chain, quantized, **fig)
    return y_iso, y_chain


# ---------------------------------------------------------------- the ops
def rmsnorm(x, w, eps, group=0):
    shp = x.shape
    xs = x.reshape(-1, group) if group else x
    y = xs * torch.rsqrt((xs * xs).mean(-1, keepdim=True) + eps)
    if w is not None:
        y = y * w
    return bf16(y.reshape(shp))


def rope(x, heads, head_dim, rot_dim, pos, inv_freq, inverse=False):
    t = x.shape[0]
    xh = x.reshape(t, heads, head_dim).clone()
    off = head_dim - rot_dim
    ang = pos[:, None] * inv_freq[None, :]
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    if inverse:
        s = -s
    a, b = xh[..., off::2].clone(), xh[..., off + 1::2].clone()
    xh[..., off::2] = a * c - b * s
    xh[..., off + 1::2] = a * s + b * c
    return bf16(xh.reshape(t, -1))


def attention(q, kv, heads, head_dim, window, sinks, chunk=1024):
    """MQA (one shared latent head: k = v), causal, sliding window, per-head sink logits. With a
    window, every query sees only its last `window` keys: a banded computation."""
    t = q.shape[0]
    qh = q.reshape(t, heads, head_dim)
    scale = 1.0 / math.sqrt(head_dim)
    out = torch.empty_like(qh)
    sink = sinks[None, :, None]
    if 0 < window < t:
        kpad = torch.cat([kv.new_zeros(window - 1, head_dim), kv])
        kw_all = kpad.unfold(0, window, 1).transpose(1, 2)  # [t, window, d]: keys i-window+1 .. i
        slot = torch.arange(window, device=q.device)
        for c0 in range(0, t, chunk):
            c1 = min(t, c0 + chunk)
            kw = kw_all[c0:c1]
            sc = torch.einsum("thd,twd->thw", qh[c0:c1], kw) * scale
            valid = (torch.arange(c0, c1, device=q.device)[:, None] - (window - 1) + slot[None, :]) >= 0
            sc = sc.masked_fill(~valid[:, None, :], float("-inf"))
            p = torch.softmax(torch.cat([sc, sink.expand(c1 - c0, heads, 1)], -1), -1)[..., :window]
            out[c0:c1] = torch.einsum("thw,twd->thd", p, kw)
    else:
        for c0 in range(0, t, chunk):
            c1 = min(t, c0 + chunk)
            sc = torch.einsum("thd,sd->ths", qh[c0:c1], kv) * scale
            qp = torch.arange(c0, c1, device=q.device)[:, None]
            kp = torch.arange(t, device=q.device)[None, :]
            vis = kp <= qp
            if window > 0:
                vis &= qp - kp < window
            sc = sc.masked_fill(~vis[:, None, :], float("-inf"))
            p = torch.softmax(torch.cat([sc, sink.expand(c1 - c0, heads, 1)], -1), -1)[..., :t]
            out[c0:c1] = torch.einsum("ths,sd->thd", p, kv)
    return bf16(out.reshape(t, -1))


def hc_mix(X, fn, eps):
    mm = Gemm.ref(X, fn)
    return mm * torch.rsqrt((X * X).mean(-1, keepdim=True) + eps)


def hc_pre(X, fn, base, scale, n, iters, eps, hc_eps):
    """Hyper-connection pre: collapse weights, post weights and the Sinkhorn-normalised mixer."""
    t = X.shape[0]
    dm = X.shape[1] // n
    m = hc_mix(X, fn, eps)
    pre = torch.sigmoid(scale[0] * m[:, :n] + base[:n]) + hc_eps
    post = 2.0 * torch.sigmoid(scale[1] * m[:, n:2 * n] + base[n:2 * n])
    C = torch.softmax((scale[2] * m[:, 2 * n:] + base[2 * n:]).reshape(t, n, n), -1) + hc_eps
    for it in range(iters):
        if it > 0:
            C = C / (C.sum(-1, keepdim=True) + hc_eps)
        C = C / (C.sum(-2, keepdim=True) + hc_eps)
    return bf16(collapse(X.reshape(t, n, dm), pre)), post, C


def collapse(Xs, pre):
    """u = sum_i pre_i X_i, summed in stream order (as the kernels do)."""
    u = pre[:, 0, None] * Xs[:, 0]
    for i in range(1, Xs.shape[1]):
        u = u + pre[:, i, None] * Xs[:, i]
    return u


def hc_post(X, y, post, comb):
    t, n = post.shape
    Xs = X.reshape(t, n, -1)
    # stream j: post_j y + sum_i comb[i, j] X_i, added in that order
    out = post[..., None] * y[:, None, :]
    for i in range(n):
        out = out + comb[:, i, :, None] * Xs[:, i, None, :]
    return bf16(out.reshape(t, -1))


def hc_head(X, fn, base, scale, n, eps, hc_eps):
    t = X.shape[0]
    m = hc_mix(X, fn, eps)
    pre = torch.sigmoid(scale[0] * m + base) + hc_eps
    return bf16(collapse(X.reshape(t, n, -1), pre))


def swiglu(g, v, limit):
    if limit > 0:
        g = g.clamp(max=limit)
        v = v.clamp(-limit, limit)
    return bf16(g * torch.sigmoid(g) * v)


def fp8_kv(x, cols, group=64):
    out = x.clone()
    out[:, :cols] = fake_quant_fp8(x[:, :cols].contiguous(), group)
    return out


def router_scores(lg, func):
    if func == "sigmoid":
        return torch.sigmoid(lg)
    if func == "sqrtsoftplus":
        return torch.sqrt(torch.nn.functional.softplus(lg))
    return torch.softmax(lg, -1)


# ---------------------------------------------------------------- the replay
class Replay:
    def __init__(self, ck, tokens, layer, probes, keep):
        self.ck, self.cfg, self.pr, self.keep = ck, ck.cfg, probes, keep
        self.dev = ck.dev
        self.gemm = Gemm(self.dev)
        self.tokens = tokens
        self.t = len(tokens)
        self.pos = torch.arange(self.t, device=self.dev, dtype=torch.float32)
        self.layer = layer
        self.kept = {}

    def c(self, key, default=None):
        v = self.cfg.get(key, default)
        if v is None:
            sys.exit(f"config.json has no {key}")
        return v

    # -- stage helpers: `ch` is the chained input (None on layers before the replayed one)
    def pure(self, name, op, fn, ref_in, ch_in, emit=True):
        ref = fn(*ref_in)
        chain = fn(*ch_in) if ch_in is not None else None
        first = lambda o: o[0] if isinstance(o, tuple) else o
        if chain is not None and emit:
            self.pr.row(name, op, "isolated", first(ref), first(ref), False)
            self.pr.row(name, op, "chained", first(ref), first(chain), False)
        self.stash(name, first(ref), first(chain) if chain is not None else None)
        return ref, (chain if chain is not None else ref)

    def stash(self, name, ref, chain):
        if self.keep:
            self.kept[name] = (ref.cpu(), chain.cpu() if chain is not None else None)

    def linear(self, name, module, x, xc, replay, **kw):
        lin = Linear(self.ck, self.gemm, module, **kw)
        y = lin.ref(x)
        if not replay:
            return y, y
        _, yc = lin_stage(self.pr, lin, name, x, y, xc)
        self.stash(name, y, yc)
        return y, yc

    # -- prologue, layer, epilogue
    def prologue(self):
        x = self.ck.rows("model.embed_tokens.weight", self.tokens)
        n = self.c("hc_mult")
        ref, ch = self.pure("embed", "embedding", lambda v: v, (x,), (x,))
        X, Xc = self.pure("hc_expand", "hc_expand", lambda v: v.repeat(1, n), (ref,), (ch,))
        return X, Xc

    def inv_freq(self, rot_dim):
        theta = float(self.c("rope_theta"))
        return torch.tensor([theta ** (-2.0 * i / rot_dim) for i in range(rot_dim // 2)],
                            dtype=torch.float32, device=self.dev)

    def run_layer(self, L, X, Xc, replay):
        ck, cfg, P = self.ck, self.cfg, f"model.layers.{L}"
        if ck.has(f"{P}.self_attn.compressor.position_bias"):
            sys.exit(f"layer {L} is a compressed-attention (CSA/HCA) layer; the peer replays sliding-attention layers only")
        n, iters = self.c("hc_mult"), self.c("hc_sinkhorn_iters")
        eps, hc_eps = float(self.c("rms_norm_eps")), float(self.c("hc_eps"))
        H, d, rot = self.c("num_attention_heads"), self.c("head_dim"), self.c("qk_rope_head_dim")
        win = self.c("sliding_window", 0)
        cin = Xc if replay else None
        S = f"layers.{L}"

        def hc_params(pfx):
            return ck.f32(pfx + ".fn"), ck.f32(pfx + ".base"), ck.f32(pfx + ".scale").tolist()

        # attention sublayer
        fn, base, sc = hc_params(f"{P}.attn_hc")
        hc = lambda Xi: hc_pre(Xi, fn, base, sc, n, iters, eps, hc_eps)
        (u, post, comb), (uc, postc, combc) = self.pure(f"{S}.attn_hc.pre", "hc_pre", hc, (X,), (cin,) if replay else None)
        w = ck.f32(f"{P}.input_layernorm.weight")
        a, ac = self.pure(f"{S}.input_layernorm", "rmsnorm", lambda v: rmsnorm(v, w, eps), (u,), (uc,) if replay else None)
        qa, qac = self.linear(f"{S}.self_attn.q_a_proj", f"{P}.self_attn.q_a_proj", a, ac, replay)
        kvr, kvrc = self.linear(f"{S}.self_attn.kv_proj", f"{P}.self_attn.kv_proj", a, ac, replay)
        w = ck.f32(f"{P}.self_attn.q_a_norm.weight")
        qr, qrc = self.pure(f"{S}.self_attn.q_a_norm", "rmsnorm", lambda v: rmsnorm(v, w, eps), (qa,), (qac,) if replay else None)
        w2 = ck.f32(f"{P}.self_attn.kv_norm.weight")
        kv, kvc = self.pure(f"{S}.self_attn.kv_norm", "rmsnorm", lambda v: rmsnorm(v, w2, eps), (kvr,), (kvrc,) if replay else None)
        q, qc = self.linear(f"{S}.self_attn.q_b_proj", f"{P}.self_attn.q_b_proj", qr, qrc, replay)
        qn, qnc = self.pure(f"{S}.self_attn.q_b_norm", "rmsnorm", lambda v: rmsnorm(v, None, eps, d), (q,), (qc,) if replay else None)
        f = self.inv_freq(rot)
        qp, qpc = self.pure(f"{S}.self_attn.q_rope", "rope", lambda v: rope(v, H, d, rot, self.pos, f), (qn,), (qnc,) if replay else None)
        kp, kpc = self.pure(f"{S}.self_attn.kv_rope", "rope", lambda v: rope(v, 1, d, rot, self.pos, f), (kv,), (kvc,) if replay else None)
        # FP8 KV cache on the production path only (nope dims, UE8M0 scale per 64 values)
        kvp = kp
        kvpc = kp
        if replay:
            k_iso, kvpc = fp8_kv(kp, d - rot), fp8_kv(kpc, d - rot)
            self.pr.row(f"{S}.self_attn.kv_cache_fp8", "fp8_sim", "isolated", kp, k_iso, True)
            self.pr.row(f"{S}.self_attn.kv_cache_fp8", "fp8_sim", "chained", kp, kvpc, True)
            # isolated attention gets the reference inputs; the production cache feeds the chain
        sinks = ck.f32(f"{P}.self_attn.sinks")
        att = lambda qq, kk: attention(qq, kk, H, d, win, sinks)
        o, oc = self.pure(f"{S}.self_attn.attention", "attention", att, (qp, kvp), (qpc, kvpc) if replay else None)
        oi, oic = self.pure(f"{S}.self_attn.o_rope_inv", "rope", lambda v: rope(v, H, d, rot, self.pos, f, True), (o,), (oc,) if replay else None)
        z, zc = self.linear(f"{S}.self_attn.o_a_proj", f"{P}.self_attn.o_a_proj", oi, oic, replay,
                            groups=self.c("o_groups"), act_fp8_group=128)
        ya, yac = self.linear(f"{S}.self_attn.o_b_proj", f"{P}.self_attn.o_b_proj", z, zc, replay)
        X, Xc = self.pure(f"{S}.attn_hc.post", "hc_post", hc_post, (X, ya, post, comb), (Xc, yac, postc, combc) if replay else None)
        # feed-forward sublayer
        fn, base, sc = hc_params(f"{P}.ffn_hc")
        hc = lambda Xi: hc_pre(Xi, fn, base, sc, n, iters, eps, hc_eps)
        (u, post, comb), (uc, postc, combc) = self.pure(f"{S}.ffn_hc.pre", "hc_pre", hc, (X,), (Xc,) if replay else None)
        w = ck.f32(f"{P}.post_attention_layernorm.weight")
        b, bc = self.pure(f"{S}.post_attention_layernorm", "rmsnorm", lambda v: rmsnorm(v, w, eps), (u,), (uc,) if replay else None)
        rt, rtc = self.router(L, b, bc if replay else None)
        yr, yrc = self.moe(L, b, bc if replay else None, rt, rtc)
        ys, ysc = self.shared(L, b, bc if replay else None)
        yf, yfc = self.pure(f"{S}.mlp", "add", lambda p, q2: bf16(p + q2), (yr, ys), (yrc, ysc) if replay else None)
        X, Xc = self.pure(f"{S}.ffn_hc.post", "hc_post", hc_post, (X, yf, post, comb), (Xc, yfc, postc, combc) if replay else None)
        X, Xc = self.pure(S, "identity", lambda v: v, (X,), (Xc,) if replay else None)
        return X, Xc

    def router(self, L, b, bc):
        ck, P = self.ck, f"model.layers.{L}.mlp.gate"
        E, k = self.c("n_routed_experts"), self.c("num_experts_per_tok")
        func = self.cfg.get("scoring_func", "softmax")
        norm, scal = bool(self.cfg.get("norm_topk_prob", True)), float(self.cfg.get("routed_scaling_factor", 1.0))
        wg = ck.f32(P + ".weight")
        hash_t = ck.raw(P + ".tid2eid").long() if ck.has(P + ".tid2eid") else None
        bias = ck.f32(P + ".e_score_correction_bias") if hash_t is None and ck.has(P + ".e_score_correction_bias") else None
        tok = torch.tensor(self.tokens, device=self.dev)

        def route(x):
            lg = Gemm.ref(x, wg)
            sc = router_scores(lg, func)
            if hash_t is not None:
                idx = hash_t[tok]
            else:
                sel = sc + bias if bias is not None else sc
                idx = torch.topk(sel, k, -1).indices
            w = sc.gather(1, idx)
            if norm:
                w = w / (w.sum(-1, keepdim=True) + 1e-20)
            return lg, idx, w * scal

        ref = route(b)
        if bc is None:
            return ref, ref
        ch = route(bc)
        agree = (ref[1][:, :, None] == ch[1][:, None, :]).any(-1).float().mean().item()
        name = f"layers.{L}.mlp.gate"
        self.pr.row(name, "router", "isolated", ref[0], ref[0], False, topk_agree=1.0)
        self.pr.row(name, "router", "chained", ref[0], ch[0], False, topk_agree=agree)
        return ref, ch

    def mlp(self, module, stage, x, xc, limit, iso=True, chain=True, emit=True):
        """ops_moe.c mlp_run: reference, per-projection rows, and the isolated block output."""
        g_, u_, d_ = (Linear(self.ck, self.gemm, f"{module}.{p}") for p in ("gate_proj", "up_proj", "down_proj"))
        g, v = g_.ref(x), u_.ref(x)
        h = swiglu(g, v, limit)
        o = d_.ref(h)
        chain = chain and xc is not None
        gi, gc = lin_stage(self.pr, g_, f"{stage}.gate_proj", x, g, xc, iso, chain, emit)
        vi, vc = lin_stage(self.pr, u_, f"{stage}.up_proj", x, v, xc, iso, chain, emit)
        hc = swiglu(gc, vc, limit) if chain else None
        _, oc = lin_stage(self.pr, d_, f"{stage}.down_proj", h, o, hc, iso, chain, emit)
        oi = d_.prod(swiglu(gi, vi, limit))[0] if iso else None
        return o, oi, oc

    def shared(self, L, b, bc):
        limit = float(self.cfg.get("swiglu_limit", 0) or 0)
        name = f"layers.{L}.mlp.shared_experts"
        o, oi, oc = self.mlp(f"model.layers.{L}.mlp.shared_experts", name, b, bc, limit, iso=bc is not None, chain=bc is not None)
        if bc is None:
            return o, o
        self.pr.row(name, "mlp", "isolated", o, oi, True)
        self.pr.row(name, "mlp", "chained", o, oc, True)
        self.stash(name, o, oc)
        return o, oc

    def moe(self, L, b, bc, rt, rtc):
        """ops_moe.c nd_op_moe_experts: experts picked on either path, in expert order."""
        limit = float(self.cfg.get("swiglu_limit", 0) or 0)
        replay = bc is not None
        t, dmod = b.shape
        y = torch.zeros_like(b)
        yi = torch.zeros_like(b) if replay else None
        yc = torch.zeros_like(b) if replay else None

        def by_expert(r):
            ids = r[1].tolist()
            m = {}
            for i, row in enumerate(ids):
                for s, ex in enumerate(row):
                    m.setdefault(ex, []).append((i, s))
            return m

        mr, mc = by_expert(rt), by_expert(rtc) if replay else {}
        for ex in sorted(set(mr) | set(mc)):
            mod = f"model.layers.{L}.mlp.experts.{ex}"
            stage = f"layers.{L}.mlp.experts.{ex}"
            pr_ = mr.get(ex, [])
            pc_ = mc.get(ex, [])
            rows_r = torch.tensor([i for i, _ in pr_], device=self.dev, dtype=torch.long)
            rows_c = torch.tensor([i for i, _ in pc_], device=self.dev, dtype=torch.long)
            oc = None
            if pr_:
                wr = rt[2][rows_r, torch.tensor([s for _, s in pr_], device=self.dev)]
                o, oi, oc = self.mlp(mod, stage, b[rows_r], bc[rows_r] if replay else None, limit, iso=replay, chain=replay)
                y.index_add_(0, rows_r, o * wr[:, None])
                if replay:
                    yi.index_add_(0, rows_r, oi * wr[:, None])
            if replay and pc_:
                wc = rtc[2][rows_c, torch.tensor([s for _, s in pc_], device=self.dev)]
                same = [i for i, _ in pr_] == [i for i, _ in pc_]
                if not (same and oc is not None):
                    # production-only token set: the expert once more, on those rows, unreported
                    _, oc, _ = self.mlp(mod, stage, bc[rows_c], None, limit, iso=True, chain=False, emit=False)
                yc.index_add_(0, rows_c, oc * wc[:, None])
        name = f"layers.{L}.mlp.experts"
        y = bf16(y)
        if not replay:
            return y, y
        yi, yc = bf16(yi), bf16(yc)
        self.pr.row(name, "moe_experts", "isolated", y, yi, True)
        self.pr.row(name, "moe_experts", "chained", y, yc, True)
        self.stash(name, y, yc)
        return y, yc

    def epilogue(self, X, Xc):
        ck = self.ck
        n, eps, hc_eps = self.c("hc_mult"), float(self.c("rms_norm_eps")), float(self.c("hc_eps"))
        fn, base = ck.f32("model.hc_head.hc_fn"), ck.f32("model.hc_head.hc_base")
        sc = ck.f32("model.hc_head.hc_scale").tolist()
        h, hcc = self.pure("hc_head", "hc_head", lambda v: hc_head(v, fn, base, sc, n, eps, hc_eps), (X,), (Xc,))
        w = ck.f32("model.norm.weight")
        hn, hnc = self.pure("norm", "rmsnorm", lambda v: rmsnorm(v, w, eps), (h,), (hcc,))
        lin = Linear(ck, self.gemm, "lm_head")
        lg = lin.ref(hn)
        _, lgc = lin_stage(self.pr, lin, "lm_head", hn, lg, hnc)
        # the head's own probes: KL(ref || prod) and top-1 agreement, per token, averaged
        for row, prod in ((self.pr.rows[-2], lg), (self.pr.rows[-1], lgc)):
            lp, lq = torch.log_softmax(lg, -1), torch.log_softmax(prod, -1)
            row["kl_div"] = (lp.exp() * (lp - lq)).sum(-1).mean().item()
            row["top1_agree"] = (lg.argmax(-1) == prod.argmax(-1)).float().mean().item()
        self.stash("lm_head", lg, lgc)

    def run(self):
        X, Xc = self.prologue()
        nl = self.c("num_hidden_layers")
        if not 0 <= self.layer < nl:
            sys.exit(f"--layer {self.layer}: the checkpoint has {nl} layers")
        for L in range(self.layer + 1):
            X, Xc = self.run_layer(L, X, Xc if L == self.layer else X, L == self.layer)
        if self.layer == nl - 1:
            self.epilogue(X, Xc)
        return X, Xc


def _raw_dtype_is_fp8(self, name):
    return self.has(name) and self.where[name].get_slice(name).get_dtype() in ("F8_E4M3", "float8_e4m3fn")


def _fp8_scale(self, module, shape):
    """FP8 weight scales as a full [N, K] multiplier: per tensor, per channel or per block."""
    n, k = shape
    for nm in ("weight_scale", "weight_scale_inv", "scale"):
        if self.has(f"{module}.{nm}"):
            s = self.raw(f"{module}.{nm}")
            break
    else:
        sys.exit(f"{module}: FP8 weight without a scale")
    if s.dtype == getattr(torch, "float8_e8m0fnu", None):
        s = torch.ldexp(torch.ones(s.shape, device=s.device), s.view(torch.uint8).int() - 127)
    s = s.float()
    if s.numel() == 1:
        return s.reshape(1, 1)
    if s.numel() == n:
        return s.reshape(n, 1)
    gn, gk = s.shape
    bn, bk = -(-n // gn), -(-k // gk)
    return s.repeat_interleave(bn, 0)[:n].repeat_interleave(bk, 1)[:, :k]


Ckpt.raw_dtype_is_fp8 = _raw_dtype_is_fp8
Ckpt.fp8_scale = _fp8_scale


def compare_trace(path, kept):
    """Cosine of our reference and chained outputs against the trace's dumped tensors."""
    import h5py
    with h5py.File(path, "r", swmr=True) as f:
        tg = f["tensors"]
        for name, (ref, ch) in kept.items():
            out = []
            if name in tg and "ref" in tg[name]:
                out.append(("ref", ref, torch.from_numpy(tg[name]["ref"][:])))
            cn = name + "@chained"
            if ch is not None and cn in tg and "prod" in tg[cn]:
                out.append(("chained", ch, torch.from_numpy(tg[cn]["prod"][:])))
            for what, ours, theirs in out:
                a, b = ours.reshape(-1).double(), theirs.reshape(-1).double()
                cos = (a @ b / (a.norm() * b.norm())).item() if a.norm() > 0 and b.norm() > 0 else float("nan")
                rel = ((a - b).norm() / b.norm()).item() if b.norm() > 0 else float("nan")
                print(f"vs_trace {name} {what} cosine {cos:.7f} rel_l2 {rel:.3e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ckpt")
    ap.add_argument("--tokens", type=int, default=16, help="token count: token i = (i*7919+13) %% vocab")
    ap.add_argument("--layer", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeat", type=int, default=1,
                    help="replays in this process; peer_elapsed_s is the fastest, peer_first_s the first (lazy CUDA/cuBLAS set-up included)")
    ap.add_argument("--csv", help="write the probe rows here")
    ap.add_argument("--compare-trace", help="an nvfp4dbg trace written with --dump tensors")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.zeros(1, device=dev)  # the context exists before the clock starts, as for the trace
        torch.cuda.synchronize()
    with open(os.path.join(a.ckpt, "config.json")) as fh:
        vocab = json.load(fh)["vocab_size"]
    tokens = [(i * 7919 + 13) % vocab for i in range(a.tokens)]
    times = []
    for _ in range(max(1, a.repeat)):
        t0 = time.perf_counter()
        ck = Ckpt(a.ckpt, dev)
        pr = Probes(lambda name: int(name.split(".")[1]) if name.startswith("layers.") else -1)
        rp = Replay(ck, tokens, a.layer, pr, keep=bool(a.compare_trace))
        rp.run()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        wbytes = ck.bytes
        del ck
    rows = pr.rows
    if a.csv:
        keys = sorted({k for r in rows for k in r}, key=lambda k: (k not in rows[0], list(rows[0]).index(k) if k in rows[0] else 0, k))
        with open(a.csv, "w", newline="") as fh:
            wr = csv.DictWriter(fh, fieldnames=keys, restval="")
            wr.writeheader()
            wr.writerows(rows)
    gemm = Gemm(dev)
    worst = min((r for r in rows if r["mode"] == "chained"), key=lambda r: r["cosine"], default=None)
    print(f"peer device {dev} tokens {a.tokens} layer {a.layer} rows {len(rows)} quantized-gemm {str(gemm.qdtype).split('.')[-1]}")
    if worst:
        print(f"peer lowest chained cosine {worst['cosine']:.6f} at {worst['name']}")
    if a.compare_trace:
        compare_trace(a.compare_trace, rp.kept)
    if len(times) > 1:
        print("peer_times_s " + " ".join(f"{x:.4f}" for x in times))
    print(f"peer_first_s {times[0]:.6f}")
    print(f"peer_elapsed_s {min(times):.6f}")
    print(f"peer_weight_bytes {wbytes}")


if __name__ == "__main__":
    main()
