/* nd_numerics.h — the one definition of nvfp4dbg's scalar numerics.
 *
 * FP4 E2M1, FP8 E4M3 (both saturation behaviours), E8M0, BF16/F16 conversions, and the NVFP4
 * block-scale rules. Included by the CPU backend (C11) and the CUDA backend (nvcc): every
 * function is `ND_HD`, i.e. `static inline` in C and `__host__ __device__` under nvcc, so both
 * backends compute bit-identical codes and scales from the same source.
 *
 * Sources for every rule: shared research notes nvfp4-spec.md §1 and §5 (compressed-tensors,
 * vLLM nvfp4_utils.cuh, FlashInfer quantization_utils.cuh, PyTorch Float8_e4m3fn.h).
 *
 * Rounding is round-to-nearest-even throughout; it relies on the default FP environment
 * (FE_TONEAREST), which nothing in nvfp4dbg changes.
 */
#ifndef ND_NUMERICS_H
#define ND_NUMERICS_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#ifdef __CUDACC__
#define ND_HD __host__ __device__ __forceinline__ static
#else
#define ND_HD static inline
#endif

#define ND_E2M1_MAX 6.0f
#define ND_E4M3_MAX 448.0f
#define ND_NVFP4_BLOCK 16
/* 448 * 6: the canonical global "encode" scale numerator (global = 2688 / amax). */
#define ND_NVFP4_GLOBAL_NUM 2688.0f

/* ---- bit casts ------------------------------------------------------------------------ */
ND_HD uint32_t nd_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
ND_HD float nd_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- BF16 ----------------------------------------------------------------------------- */
/* Round-to-nearest-even; NaN stays a (quiet) NaN, Inf stays Inf. */
ND_HD uint16_t nd_bf16_from_f32(float f) {
    uint32_t u = nd_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return (uint16_t)(u >> 16);
}
ND_HD float nd_bf16_to_f32(uint16_t h) { return nd_bits_f32((uint32_t)h << 16); }
ND_HD float nd_bf16_round(float f) { return nd_bf16_to_f32(nd_bf16_from_f32(f)); }

/* ---- IEEE half (F16) ------------------------------------------------------------------- */
/* Decode, for F16 checkpoints. */
ND_HD float nd_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return nd_bits_f32(s | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
        return s ? -v : v;
    }
    return nd_bits_f32(s | ((e + 112u) << 23) | (m << 13));
}

/* float -> F16, round-to-nearest-even, as a real cast does (torch .half(), __float2half_rn, a
 * kernel's float2num): beyond the F16 range it gives Inf, not 65504 — magnitudes from 65520
 * (the midpoint to the next power of two, a tie that rounds to the even, infinite side) up;
 * subnormals keep 2^-24 steps; NaN stays a quiet NaN with the sign and top payload bits. */
ND_HD uint16_t nd_f16_from_f32(float f) {
    const uint32_t u = nd_f32_bits(f), a = u & 0x7fffffffu;
    const uint16_t s = (uint16_t)((u >> 16) & 0x8000u);
    if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u);           /* >= 65520 and Inf: Inf */
    if (a < 0x38800000u)                                            /* below 2^-14: m * 2^-24 */
        return (uint16_t)(s | (uint16_t)rintf(nd_bits_f32(a) * 16777216.0f)); /* exact scaling; RNE */
    uint32_t r = a - 0x38000000u;                                   /* exponent bias 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);                                 /* RNE on the 13 dropped bits */
    return (uint16_t)(s | (r >> 13));
}
ND_HD float nd_f16_round(float f) { return nd_f16_to_f32(nd_f16_from_f32(f)); }

/* ---- FP4 E2M1 ------------------------------------------------------------------------- */
/* code = s e1 e0 m (bit 3 sign). Magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6. No Inf/NaN. */
ND_HD float nd_e2m1_to_f32(uint8_t code) {
    const uint32_t c = code & 7u; /* 0,1,2,3 -> c/2; 4,5,6,7 -> 2^(c/2-1) * (1 + (c&1)/2) */
    const float mag = c < 4u ? 0.5f * (float)c : (float)(1u << ((c >> 1) - 1u)) * (1.0f + 0.5f * (float)(c & 1u));
    return (code & 8u) ? -mag : mag;
}

/* The magnitude code (0..7) of a float from the bits a = |x| of a non-NaN x (Inf saturates to 7).
 * Branch-free on the bits (one definition for both backends; equal to the compare chain 0.25 < a,
 * 0.75 <= a, 1.25 < a, 1.75 <= a, 2.5 < a, 3.5 <= a, 5 < a for every float): below 1 the grid is
 * 0.5, so the code is rint(2a): 2a + 1.5 * 2^23 rounds to an integer (RNE, 2a is exact) whose low
 * bits it is; from 1 on, RNE of the mantissa to one bit (add 2^21 - 1 plus the kept bit, shift by
 * 22) gives code - 2, saturated at 7. */
ND_HD uint32_t nd_e2m1_mag_code(uint32_t a) {
    const uint32_t lo = nd_f32_bits(nd_bits_f32(a) * 2.0f + 12582912.0f) & 3u;
    uint32_t hi = (a + (0x001fffffu + 0x00800000u - 0x3f800000u) + ((a >> 22) & 1u)) >> 22;
    hi = hi < 7u ? hi : 7u;
    return a < 0x3f800000u ? lo : hi;
}

/* float -> E2M1, round-to-nearest-even, saturating at ±6 (cvt.rn.satfinite.e2m1x2.f32 and the
 * cast_to_fp4 reference tables). Ties 0.25, 1.25, 2.5, 5 go down; 0.75, 1.75, 3.5 go up.
 * Negative inputs keep the sign bit even when they round to zero (code 8), as the references do.
 * NaN maps to code 7 (+6): the hardware converter's NaN result is not documented in the sources
 * we read, and a NaN block is already visible through its NaN block scale. */
ND_HD uint8_t nd_e2m1_from_f32(float x) {
    const uint32_t u = nd_f32_bits(x), a = u & 0x7fffffffu;
    return (uint8_t)(a > 0x7f800000u ? 7u : (((u >> 28) & 8u) | nd_e2m1_mag_code(a)));
}

/* The sign bits of eight floats (their bit patterns u[0..7]) where eight packed E2M1 codes keep
 * them: bit 4j + 3 for element j (nd_e2m1_from_f32's sign, for non-NaN elements). A GPU quantizer
 * ORs this onto the magnitude codes instead of placing each sign: on CUDA four byte permutes
 * gather the top bytes of the even and of the odd elements (two more merge them), whose top bits
 * then sit 4 bits above (even j) or at (odd j) their places. */
ND_HD uint32_t nd_e2m1_signs8(const uint32_t u[8]) {
#ifdef __CUDA_ARCH__
    const uint32_t ev = __byte_perm(__byte_perm(u[0], u[2], 0x0073u), __byte_perm(u[4], u[6], 0x0073u), 0x5410u);
    const uint32_t od = __byte_perm(__byte_perm(u[1], u[3], 0x0073u), __byte_perm(u[5], u[7], 0x0073u), 0x5410u);
    return ((ev >> 4) & 0x08080808u) | (od & 0x80808080u);
#else
    uint32_t w = 0;
    for (int j = 0; j < 8; j++) w |= (u[j] >> 31) << (4 * j + 3);
    return w;
#endif
}

/* ---- FP8 E4M3 (e4m3fn) ---------------------------------------------------------------- */
/* bias 7, no Inf, 0x7F/0xFF = NaN, max 448, min normal 2^-6, subnormal step 2^-9. */
ND_HD float nd_e4m3_to_f32(uint8_t b) {
    uint32_t s = b >> 7, e = (b >> 3) & 15u, m = b & 7u;
    float v;
    if (e == 15u && m == 7u) return nd_bits_f32(0x7fc00000u | (s << 31));
    if (e == 0) v = (float)m * (1.0f / 512.0f);
    else v = nd_bits_f32(((e + 120u) << 23) | (m << 20));
    return s ? -v : v;
}

/* Round |x| to the E4M3 grid (RNE) without range checks; returns the rounded magnitude, which may
 * be 480 (one step past the largest finite value) or more. */
ND_HD float nd_e4m3_round_mag(float a) {
    int e;
    (void)frexpf(a, &e);           /* a = f * 2^e, f in [0.5, 1): unbiased exponent is e-1 */
    int ue = e - 1;
    if (ue < -6) ue = -6;          /* subnormal range: fixed quantum 2^-9 */
    float q = ldexpf(1.0f, ue - 3); /* 3 mantissa bits */
    return rintf(a / q) * q;       /* exact scaling by a power of two; rintf is RNE */
}

/* Encode an already-rounded, in-range magnitude (0 .. 448) to its 7-bit code. */
ND_HD uint8_t nd_e4m3_code_of_mag(float r) {
    if (r < 0.015625f) return (uint8_t)(r * 512.0f); /* subnormal: 0..7 (8 is the first normal) */
    int e;
    float f = frexpf(r, &e);       /* r = f*2^e, f in [0.5,1) */
    int ue = e - 1;
    uint32_t m = (uint32_t)((f * 2.0f - 1.0f) * 8.0f);
    return (uint8_t)(((uint32_t)(ue + 7) << 3) | m);
}

/* CUDA __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3): RNE, magnitudes past 448 clamp to 448,
 * NaN -> 0x7F (sign kept), ±Inf -> ±448. This is what the vLLM/FlashInfer quant kernels store. */
ND_HD uint8_t nd_e4m3_from_f32_satfinite(float x) {
    /* On the bits (equal to rounding with nd_e4m3_round_mag and encoding with nd_e4m3_code_of_mag
     * for every float): below 2^-6 the subnormal grid 2^-9 (x * 512 is exact, rintf is RNE; 8
     * is the code of 2^-6); from 2^-6 the exponent rebiased 127 -> 7 and RNE on the 20 dropped
     * mantissa bits, a carry moving to the next exponent. */
    const uint32_t u = nd_f32_bits(x), a = u & 0x7fffffffu;
    const uint8_t s = (uint8_t)((u >> 24) & 0x80u);
    if (a > 0x7f800000u) return (uint8_t)(s | 0x7fu);   /* NaN, sign kept */
    if (a >= 0x43e00000u) return (uint8_t)(s | 0x7eu);  /* >= 448 and Inf: 448 */
    if (a < 0x3c800000u) return (uint8_t)(s | (uint8_t)rintf(nd_bits_f32(a) * 512.0f));
    uint32_t r = a - 0x3c000000u;
    r += 0x7ffffu + ((r >> 20) & 1u);
    return (uint8_t)(s | (uint8_t)(r >> 20)); /* a < 448 rounds to 448 (0x7e) at most */
}

/* FP8 KV cache with per-tensor scales (vLLM --kv-cache-dtype fp8, k_scale / v_scale): the cache
 * write stores e4m3 satfinite(x / write_scale) (vLLM's scaled_convert, __NV_SATFINITE), the
 * attention kernel reads it back times read_scale. A consistent stack uses one scale for both; a
 * stack that drops the checkpoint's scale on one side uses 1.0 there (docs/stacks.md, kv_scales). */
ND_HD float nd_kv_fp8(float x, float write_scale, float read_scale) {
    return nd_e4m3_to_f32(nd_e4m3_from_f32_satfinite(x / write_scale)) * read_scale;
}

/* Non-saturating E4M3 (OCP non-saturating mode; PyTorch's tensor.to(torch.float8_e4m3fn) before
 * pytorch/pytorch PR #178817, c10 fp8e4m3fn_from_fp32_value): RNE, and anything that is >= 480 or
 * rounds up past 448 becomes NaN (0x7F). Inf -> NaN too. PyTorch releases with that PR (2.15 in
 * golden/vectors) saturate instead and match nd_e4m3_from_f32_satfinite bit for bit. */
ND_HD uint8_t nd_e4m3_from_f32_torch(float x) {
    uint8_t s = (nd_f32_bits(x) >> 31) ? 0x80u : 0u;
    if (x != x) return (uint8_t)(s | 0x7fu);
    float a = fabsf(x);
    if (a >= 480.0f) return (uint8_t)(s | 0x7fu);
    float r = nd_e4m3_round_mag(a);
    if (r > ND_E4M3_MAX) return (uint8_t)(s | 0x7fu);
    return (uint8_t)(s | nd_e4m3_code_of_mag(r));
}

/* ---- E8M0 (power-of-two scales: MXFP4 and DeepSeek-V4 FP8 `.scale`) -------------------- */
/* value = 2^(b - 127); 0xFF = NaN. */
ND_HD float nd_e8m0_to_f32(uint8_t b) {
    if (b == 0xffu) return nd_bits_f32(0x7fc00000u);
    if (b == 0) return ldexpf(1.0f, -127);
    return nd_bits_f32((uint32_t)b << 23);
}

/* ---- MXFP4 (OCP Microscaling Formats v1.0): E2M1 codes, 32-element blocks along K, one E8M0
 * scale per block, no global scale. docs/formats.md lists the sources of each rule. ---- */
#define ND_MXFP4_BLOCK 32
#define ND_E8M0_NAN 0xffu

/* The E8M0 byte of the smallest power of two >= |v| (cvt.rp.satfinite.ue8m0x2.f32; the
 * ROUND_UP of triton_kernels' downcast_to_mxfp: (bits + 0x7FFFFF) & 0x7F800000). 0 and values
 * below 2^-126 give byte 0 or 1 as that bit rule does; past 2^127 and Inf give 0xFF; NaN 0xFF. */
ND_HD uint8_t nd_e8m0_from_f32_ceil(float v) {
    const uint32_t a = nd_f32_bits(v) & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint8_t)ND_E8M0_NAN;
    return (uint8_t)(((a + 0x7fffffu) & 0x7f800000u) >> 23);
}

/* Multiplier 1/2^(b-127) of an E8M0 byte, exact: 2^127 for b = 0, 2^-127 (subnormal) for b = 254,
 * 0 for 0xFF (an infinite scale: triton_kernels' quant_scale = 1/inf; also a NaN block's byte). */
ND_HD float nd_e8m0_inv(uint8_t b) {
    if (b == ND_E8M0_NAN) return 0.0f;
    if (b == 254u) return nd_bits_f32(0x00400000u);
    return nd_bits_f32((uint32_t)(254u - b) << 23);
}

/* float -> E2M1 rounding to nearest with ties away from zero, saturating at 6 (triton_kernels'
 * downcast_to_mxfp bit rule ((exp << 2 | top two mantissa bits) + 1) >> 1, which gpt-oss's
 * checkpoint was made with): 0.25 -> 0.5, 1.25 -> 1.5, 2.5 -> 3, 5 -> 6, where RNE goes down. */
ND_HD uint8_t nd_e2m1_from_f32_rna(float x) {
    if (x != x) return 7u; /* as nd_e2m1_from_f32: a NaN's sign is the hardware's (x86 makes -NaN of inf*0) */
    uint8_t s = (nd_f32_bits(x) >> 31) ? 8u : 0u;
    float a = fabsf(x);
    uint8_t m;
    if (a < 0.25f) m = 0;
    else if (a < 0.75f) m = 1;
    else if (a < 1.25f) m = 2;
    else if (a < 1.75f) m = 3;
    else if (a < 2.5f) m = 4;
    else if (a < 3.5f) m = 5;
    else if (a < 5.0f) m = 6;
    else m = 7;
    return (uint8_t)(s | m);
}

/* The block-scale rule of an MXFP4 quantizer (activations, or weights as a producer made them):
 *  OCP    : OCP MX v1.0 §6.3: shared_exp = floor(log2(amax)) - emax_elem (2 for E2M1), clamped to
 *           the E8M0 range (byte 0 for amax = 0); elements x / 2^shared_exp saturated to ±6, RNE.
 *           Blocks with amax in (6, 8) x 2^shared_exp clip their largest elements.
 *  CEIL   : scale = amax / 6 rounded UP to a power of two (FlashInfer mxfp4_quantize / TRT-LLM UE8M0
 *           scale factors, cudaRoundPosInf; triton_kernels ROUND_UP): no element clips; RNE codes.
 *  TRITON : CEIL's scale with triton_kernels' codes (ties away from zero, nd_e2m1_from_f32_rna):
 *           downcast_to_mxfp(_torch), the quantizer of gpt-oss's release and transformers'
 *           quantize_to_mxfp4.
 *  CT     : compressed-tensors generate_mx_scales: amax rounded to a power of two at the E2M1
 *           mantissa (bits + 2^21, masked: mantissas from 1.75 up go to the next power), then
 *           exponent - 2, clamped to [0, 255]; codes clamp(x / scale, ±6) RNE.
 * A NaN in the block gives byte 0xFF on every rule (the block is visibly broken). */
enum nd_mxsem { ND_MXSEM_OCP = 0, ND_MXSEM_CEIL = 1, ND_MXSEM_TRITON = 2, ND_MXSEM_CT = 3, ND_MXSEM_N = 4 };

ND_HD uint8_t nd_mxfp4_scale_byte(float amax, int sem) {
    const uint32_t a = nd_f32_bits(amax) & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint8_t)ND_E8M0_NAN;
    if (sem == ND_MXSEM_CEIL || sem == ND_MXSEM_TRITON) return nd_e8m0_from_f32_ceil(fabsf(amax) / ND_E2M1_MAX);
    int be;
    if (sem == ND_MXSEM_CT) {
        be = (int)(((a + (1u << 21)) & 0x7f800000u) >> 23); /* round_to_power_2 */
        if (be == 255) return (uint8_t)ND_E8M0_NAN;          /* log2(inf): clamped to 255 */
    } else {
        if (a == 0x7f800000u) return (uint8_t)ND_E8M0_NAN;
        be = (int)(a >> 23);                                   /* floor(log2(amax)) + 127; 0: below 2^-126 */
    }
    be -= 2;                                                   /* emax of E2M1 */
    return (uint8_t)(be < 0 ? 0 : be);
}

/* 1 if x's scaled magnitude exceeds 6 before rounding (it clips). */
ND_HD int nd_mxfp4_elem_saturates(float x, uint8_t sf) { return fabsf(x * nd_e8m0_inv(sf)) > ND_E2M1_MAX; }

/* One element's code given its block's scale byte: x times the exact inverse scale (x / 2^e, the
 * same product for the division of CT and OCP and the multiplication of the kernels). */
ND_HD uint8_t nd_mxfp4_quant_elem(float x, uint8_t sf, int sem) {
    const float y = x * nd_e8m0_inv(sf);
    return sem == ND_MXSEM_TRITON ? nd_e2m1_from_f32_rna(y) : nd_e2m1_from_f32(y);
}

/* Power-of-two scale as vLLM/DeepGEMM pick it for FP8 activations: 2^ceil(log2(amax/448)). */
ND_HD float nd_pow2_scale_ceil(float amax, float floor_amax) {
    float a = amax > floor_amax ? amax : floor_amax;
    int e;
    float f = frexpf(a / ND_E4M3_MAX, &e); /* a/448 = f*2^e, f in [0.5,1) */
    /* ceil(log2(f*2^e)) = e when f > 0.5, e-1 when f == 0.5 exactly */
    return ldexpf(1.0f, f == 0.5f ? e - 1 : e);
}

/* ---- NVFP4 dequantization -------------------------------------------------------------- */
/* Weight element: e2m1(code) * e4m3(block scale) / global divisor (compressed-tensors direction;
 * ModelOpt's multiplier m is handed in as divisor 1/m by src/ckpt). The division happens once per
 * block scale, as `scale = scale / global_scale; x_q * scale` in compressed-tensors. */
ND_HD float nd_nvfp4_block_dequant_scale(uint8_t sf, float global_div) {
    return nd_e4m3_to_f32(sf) / global_div;
}
ND_HD uint8_t nd_nibble(const uint8_t *packed_row, int64_t k) {
    uint8_t b = packed_row[k >> 1];
    return (k & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 15u); /* element 0 in the low nibble */
}

/* compressed-tensors' global scale (generate_gparam): 2688 / max(amax, FLT_MIN) evaluated by
 * torch as reciprocal-then-multiply (python scalar / tensor), i.e. 2688 * (1/amax) with two
 * roundings; NaN or Inf -> 1. It can differ by one ulp from a plain 2688.0f / amax. */
ND_HD float nd_nvfp4_global_scale_ct(float amax) {
    const float tiny = 1.17549435e-38f;               /* torch.finfo(float32).tiny */
    float a = amax > tiny ? amax : (amax != amax ? amax : tiny);
    float g = ND_NVFP4_GLOBAL_NUM * (1.0f / a);
    return (g != g || g - g != 0.0f) ? 1.0f : g;      /* nan_to_num(nan=1, posinf=1, neginf=1) */
}

/* ---- NVFP4 activation quantization ----------------------------------------------------- */
/* Semantics of the 16-element block quantizer (nvfp4-spec.md §5):
 *  KERNEL : vLLM scaled_fp4_quant / FlashInfer fp4_quantize:
 *           s = e4m3_satfinite(g * (amax * (1/6))); out = (s != 0) ? 1 / (s * (1/g)) : 0;
 *           code = e2m1(x * out). rcp.approx.ftz is modelled by a correctly rounded reciprocal
 *           (documented difference: an exact-midpoint element can move to the neighbouring code).
 *  CT     : compressed-tensors fake quantization: s = fp8(clamp(g * amax / 6, 448));
 *           code = e2m1(clamp(x / (s / g), ±6)); a zero scale is replaced by eps 0.125 (FP8 eps).
 *  CT_BF16: CT as compressed-tensors runs it on a BF16 tensor (every checkpoint llmcompressor
 *           calibrates in BF16): calculate_qparams divides the BF16 amax by bit_range/2 = 6 as a
 *           BF16 tensor op, so s = fp8(clamp(g * bf16(amax / 6), 448)) (torch: f32 divide, RNE
 *           to BF16; then × g in F32). Codes as CT. docs/reference-notes.md (e): the F32 division
 *           of CT gives another e4m3 scale for 29 of the 1144 blocks of golden/conformance.
 *           Meant for inputs that hold BF16 values (amax is then exactly the BF16 amax).
 */
enum nd_qsem { ND_QSEM_KERNEL = 0, ND_QSEM_CT = 1, ND_QSEM_CT_BF16 = 2 };

/* 1 for the compressed-tensors semantics (division by s/g, eps for zero scales). */
ND_HD int nd_qsem_is_ct(int sem) { return sem == ND_QSEM_CT || sem == ND_QSEM_CT_BF16; }

typedef struct nd_block_q {
    uint8_t sf;        /* stored e4m3 block scale byte */
    float mult;        /* multiplier applied to x before e2m1 rounding */
    uint8_t zero_scale;/* 1 if amax > 0 but the stored scale is 0 */
} nd_block_q;

/* A NaN with its sign dropped: the block scale of g = inf (or NaN) times amax = 0 is a NaN whose sign
 * the hardware picks (x86 makes -NaN of inf*0, a GPU +NaN), and the stored e4m3 byte keeps the sign;
 * the quantizer stores the positive one on every backend. */
ND_HD float nd_nan_unsigned(float t) { return t != t ? nd_bits_f32(0x7fc00000u) : t; }

/* The kernel semantics' multiplier of a stored scale value sfv, given inv_g = 1 / g. */
ND_HD float nd_nvfp4_kernel_mult(float sfv, float inv_g) { return (sfv != 0.0f) ? 1.0f / (sfv * inv_g) : 0.0f; }

ND_HD nd_block_q nd_nvfp4_block_params(float amax, float g, int sem) {
    nd_block_q r;
    float sfv;
    if (nd_qsem_is_ct(sem)) {
        /* calculate_qparams: scales = amax / 6, then global_scale * scales (this order: the
         * other one, (g*amax)/6, rounds to a different e4m3 scale for ~1 block in 10^6;
         * golden/vectors/nvfp4_ct.bin holds such blocks) */
        const float local = amax / ND_E2M1_MAX;
        float t = g * (sem == ND_QSEM_CT_BF16 ? nd_bf16_round(local) : local);
        if (t > ND_E4M3_MAX) t = ND_E4M3_MAX;
        r.sf = nd_e4m3_from_f32_satfinite(nd_nan_unsigned(t));
        sfv = nd_e4m3_to_f32(r.sf);
        r.zero_scale = (uint8_t)(sfv == 0.0f && amax > 0.0f);
        if (sfv == 0.0f) sfv = 0.125f;
        r.mult = 1.0f / (sfv / g);   /* x / (s/g) is evaluated as a division in CT; see qdq below */
    } else {
        r.sf = nd_e4m3_from_f32_satfinite(nd_nan_unsigned(g * (amax * (1.0f / 6.0f))));
        sfv = nd_e4m3_to_f32(r.sf);
        r.zero_scale = (uint8_t)(sfv == 0.0f && amax > 0.0f);
        r.mult = nd_nvfp4_kernel_mult(sfv, 1.0f / g);
    }
    return r;
}

/* 1 if the element is clipped: its scaled magnitude exceeds 6 before rounding (SPEC §6 sat_frac).
 * A block whose scale clipped at 448 saturates its largest elements this way. */
ND_HD int nd_nvfp4_elem_saturates(float x, nd_block_q p, float g, int sem) {
    float y;
    if (nd_qsem_is_ct(sem)) {
        float sfv = nd_e4m3_to_f32(p.sf);
        if (sfv == 0.0f) sfv = 0.125f;
        y = x / (sfv / g);
    } else {
        y = x * p.mult;
    }
    return fabsf(y) > ND_E2M1_MAX;
}

/* Quantize one element given its block parameters. CT divides, the kernel multiplies. */
ND_HD uint8_t nd_nvfp4_quant_elem(float x, nd_block_q p, float g, int sem) {
    if (nd_qsem_is_ct(sem)) {
        float sfv = nd_e4m3_to_f32(p.sf);
        if (sfv == 0.0f) sfv = 0.125f;
        float y = x / (sfv / g);
        if (y > 6.0f) y = 6.0f;
        if (y < -6.0f) y = -6.0f;
        return nd_e2m1_from_f32(y);
    }
    return nd_e2m1_from_f32(x * p.mult);
}

/* ---- 128x4 swizzled scale-factor layout (CUTLASS / FlashInfer / cuBLASLt) --------------- */
/* Logical [M rows, K/16 cols] padded to [round_up(M,128), round_up(K/16,4)], stored as
 * [numMTiles, numKTiles, 32, 4, 4]. (row 5, kgrp 2) -> 82 and (row 5, kgrp 5) -> 593 for K/16 >= 8. */
ND_HD int64_t nd_sf_swizzle_offset(int64_t m, int64_t kgrp, int64_t num_k_tiles) {
    return ((m / 128) * num_k_tiles + kgrp / 4) * 512 + (m % 32) * 16 + ((m / 32) % 4) * 4 + (kgrp % 4);
}
ND_HD int64_t nd_sf_swizzled_bytes(int64_t m, int64_t k) {
    int64_t kg = (k + 15) / 16;
    return ((m + 127) / 128) * 128 * ((kg + 3) / 4) * 4;
}

/* ---- MoE router scores (research/model-arch.md §3.13, §6) -------------------------------
 * func: 0 softmax (handled over the whole row by the caller: this returns exp(x - row_max)),
 * 1 sigmoid, 2 sqrtsoftplus = sqrt(softplus(x)) with torch's softplus threshold (x > 20 -> x). */
ND_HD float nd_router_score(float x, int func, float row_max) {
    if (func == 1) return 1.0f / (1.0f + expf(-x));
    if (func == 2) return sqrtf(x > 20.0f ? x : log1pf(expf(x)));
    return expf(x - row_max);
}

#endif /* ND_NUMERICS_H */
