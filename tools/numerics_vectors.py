#!/usr/bin/env python3
"""numerics_vectors.py — write the external test vectors under golden/vectors/.

Run once (pip install torch compressed-tensors), commit the outputs; tests/kernels/test_vectors.c
reads them and checks kernels/numerics/nd_numerics.h and the CPU backend bit for bit. Building and
testing never need Python.

  e4m3_torch.bin : PyTorch float32 -> torch.float8_e4m3fn for chosen inputs
                   ("NDE4", u32 n, f32 x[n], u8 byte[n])
  nvfp4_ct.bin   : compressed-tensors NVFP4 (tensor_group, group 16) weight quantization
                   ("NDF4", u32 ncases, then per case: u32 rows, u32 k, f32 global_scale,
                    f32 w[rows*k], u8 packed[rows*k/2], u8 scale[rows*k/16],
                    f32 deq32[rows*k], u16 deq_bf16[rows*k])
All little-endian. The versions used are written to golden/vectors/versions.txt.

Usage: python3 tools/numerics_vectors.py [OUTDIR]   (default: golden/vectors next to this tool)
"""
import os
import struct
import sys

import numpy as np
import torch
import compressed_tensors
from compressed_tensors.compressors.nvfp4 import NVFP4PackedCompressor
from compressed_tensors.quantization import QuantizationScheme
from compressed_tensors.quantization.lifecycle.forward import dequantize
from compressed_tensors.quantization.quant_scheme import preset_name_to_scheme
from compressed_tensors.quantization.utils.helpers import calculate_qparams, generate_gparam
from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8


def e4m3_values():
    """Every finite positive e4m3 value, decoded by torch itself."""
    b = torch.arange(0, 127, dtype=torch.uint8)
    return b.view(torch.float8_e4m3fn).float().numpy().astype(np.float64)


def e4m3_inputs(rng):
    grid = e4m3_values()
    xs = []
    mids = (grid[:-1] + grid[1:]) / 2
    for m in mids:                      # every midpoint and its float neighbours
        m32 = np.float32(m)
        xs += [m32, np.nextafter(m32, np.float32(0)), np.nextafter(m32, np.float32(1e9))]
    xs += list(grid.astype(np.float32))  # the grid itself
    top = [440, 447.9, 448, 448.1, 455, 463.9, 464, np.nextafter(np.float32(464), np.float32(1e9)),
           470, 479.9, 480, 481, 500, 1e4, 3.4e38]
    xs += [np.float32(v) for v in top]
    sub = [2 ** -10, 2 ** -11, 3 * 2 ** -10, 2 ** -9 * 7.5, 1e-6, 1e-30, 2 ** -6 - 2 ** -12]
    xs += [np.float32(v) for v in sub]
    xs += list((rng.standard_normal(1500) * np.exp(rng.uniform(-9, 6, 1500))).astype(np.float32))
    xs = np.array(xs, dtype=np.float32)
    xs = np.concatenate([xs, -xs, np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], dtype=np.float32)])
    return xs


def write_e4m3(path, rng):
    x = e4m3_inputs(rng)
    b = torch.from_numpy(x).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    with open(path, "wb") as f:
        f.write(b"NDE4" + struct.pack("<I", x.size))
        f.write(x.astype("<f4").tobytes())
        f.write(b.astype(np.uint8).tobytes())
    return x.size


def ct_nvfp4_case(w):
    """compressed-tensors' own path: global scale (generate_gparam), block scales
    (calculate_qparams with the NVFP4 preset's weight args), quantize + pack and dequantize
    (NVFP4PackedCompressor.compress / decompress), plus an FP32 dequantize."""
    scheme = QuantizationScheme(targets=["Linear"], **preset_name_to_scheme("NVFP4", ["Linear"]).model_dump(exclude={"targets"}))
    args = scheme.weights
    rows, k = w.shape
    gs = generate_gparam(w.amin(), w.amax())
    blocks = w.reshape(rows, k // 16, 16)
    scale, _ = calculate_qparams(blocks.amin(-1), blocks.amax(-1), args, global_scale=gs)
    sd = NVFP4PackedCompressor.compress({"weight": w.clone(), "weight_scale": scale.clone(),
                                         "weight_global_scale": gs.clone()}, scheme)
    packed, sf = sd["weight_packed"], sd["weight_scale"]
    dec = NVFP4PackedCompressor.decompress({"weight_packed": packed, "weight_scale": sf,
                                            "weight_global_scale": gs}, scheme)
    deq_bf16 = dec["weight"]
    codes32 = unpack_fp4_from_uint8(packed, rows, k, dtype=torch.float32)
    deq32 = dequantize(x_q=codes32, scale=sf.to(torch.float32), args=args, global_scale=gs,
                       dtype=torch.float32)
    assert deq_bf16.dtype == torch.bfloat16 and deq32.dtype == torch.float32
    return gs, packed, sf.view(torch.uint8), deq32, deq_bf16


def nvfp4_matrices(rng):
    mats = []
    for rows, k, spread in [(32, 64, 0.0), (16, 128, 2.0), (24, 48, 4.0)]:
        w = rng.standard_normal((rows, k)) * np.exp(rng.uniform(-spread, spread, (rows, k // 16, 1))).repeat(16, 2).reshape(rows, k)
        mats.append(w.astype(np.float32))
    # special blocks: one large outlier row (others' scales pushed down), an all-zero block,
    # a block so small its scale underflows to 0, exact e2m1 ties after scaling
    w = rng.standard_normal((8, 64)).astype(np.float32)
    w[0, 0] = 1000.0                       # sets the global scale
    w[1, 0:16] = 0.0                       # all-zero block
    w[2, 16:32] *= 1e-6                    # scale underflows
    w[3, 32:48] = np.array([6, 5, 3.5, 2.5, 1.75, 1.25, .75, .25] * 2, np.float32) * np.float32(1000.0 / 6 / 448 * 8)
    mats.append(w)
    mats.append(order_sensitive_matrix(rng))
    return mats


def order_sensitive_matrix(rng):
    """Blocks whose amax makes g*(amax/6) (what calculate_qparams computes) and (g*amax)/6
    round to different e4m3 scales: they pin down the order of the scale arithmetic."""
    top = np.float32(3.7)
    g = generate_gparam(torch.tensor(-top), torch.tensor(top))
    a = torch.from_numpy(rng.uniform(0.01, 3.7, 4_000_000).astype(np.float32))
    s1 = (g * (a / 6)).clamp(max=448).to(torch.float8_e4m3fn).view(torch.uint8)
    s2 = ((g * a) / 6).clamp(max=448).to(torch.float8_e4m3fn).view(torch.uint8)
    picks = a[s1 != s2][:15].numpy()
    w = rng.uniform(-1, 1, (4, 64)).astype(np.float32)
    w[0, 0] = top                                   # the tensor amax, so g is as above
    for i, am in enumerate(picks):
        blk = w[(i + 1) // 4, ((i + 1) % 4) * 16:((i + 1) % 4) * 16 + 16]
        blk *= am / np.abs(blk).max() * np.float32(0.999)
        blk[3] = -am if i % 2 else am               # the block amax exactly
    return w


def write_nvfp4(path, rng):
    mats = nvfp4_matrices(rng)
    with open(path, "wb") as f:
        f.write(b"NDF4" + struct.pack("<I", len(mats)))
        for w in mats:
            t = torch.from_numpy(w)
            gs, packed, sf, deq32, deq_bf16 = ct_nvfp4_case(t)
            rows, k = w.shape
            f.write(struct.pack("<IIf", rows, k, float(gs.item())))
            f.write(w.astype("<f4").tobytes())
            f.write(packed.numpy().astype(np.uint8).tobytes())
            f.write(sf.numpy().astype(np.uint8).tobytes())
            f.write(deq32.numpy().astype("<f4").tobytes())
            f.write(deq_bf16.view(torch.int16).numpy().astype("<i2").tobytes())
    return len(mats)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "vectors")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20240607)
    torch.manual_seed(0)
    n = write_e4m3(os.path.join(out, "e4m3_torch.bin"), rng)
    c = write_nvfp4(os.path.join(out, "nvfp4_ct.bin"), rng)
    with open(os.path.join(out, "versions.txt"), "w") as f:
        f.write(f"torch {torch.__version__}\ncompressed-tensors {compressed_tensors.__version__}\n"
                f"numpy {np.__version__}\npython {sys.version.split()[0]}\n"
                f"e4m3 inputs {n}\nnvfp4 cases {c}\n")
    print(f"wrote {n} e4m3 vectors and {c} NVFP4 cases to {out}")


if __name__ == "__main__":
    main()
