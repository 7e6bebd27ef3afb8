/* scale_repr.h — the representation of NVFP4 block scales between the checkpoint and a GEMM
 * (issue 18): the byte layout a [rows, K/16] scale matrix is stored or read in, the encoding its
 * bytes are decoded with, rounding to powers of two (UE8M0), and the padding of a tensor-parallel
 * rank's K shard. Pure functions on host buffers: the checkpoint faults of synth, the stack
 * behaviours of the production path and the diagnosis's repairs are all made of them.
 *
 * Layouts (where element (r, c) of the logical [rows, cols] scale matrix sits in a buffer):
 *   linear          r * cols + c (what compressed-tensors and ModelOpt store)
 *   swizzled_128x4  CUTLASS / FlashInfer / cuBLASLt block-scale layout: rows padded to 128, cols to
 *                   4, tiles [32, 4, 4] (nd_sf_swizzle_offset, research/nvfp4-spec.md)
 *   transposed      c * rows + r (the [cols, rows] matrix row-major)
 *   padded_128x4    r * round_up(cols, 4) + c: rows padded to 128 and columns to 4 like the
 *                   swizzled layout, but in linear order (a row stride of round_up(K/16, 4): the
 *                   buffer of a kernel that pads without swizzling; field report C37's stride)
 * Encodings (the value a scale byte b stands for):
 *   e4m3  NVFP4's FP8 E4M3 scale
 *   e8m0  2^(b - bias) (MXFP's UE8M0; bias 127 in OCP MX), 0xFF NaN
 *   u8    the integer b itself (a U8-typed tensor converted numerically instead of bit-cast)
 * An MXFP4 module's scales are E8M0: the same decoder takes another bias for the "exponent bias
 * off" variant once the loader reads MXFP4 scales through it. */
#ifndef ND_SCALE_REPR_H
#define ND_SCALE_REPR_H
#include <stddef.h>
#include <stdint.h>

typedef enum nd_sf_layout { ND_SF_LINEAR = 0, ND_SF_SWIZZLED = 1, ND_SF_TRANSPOSED = 2, ND_SF_PADDED = 3, ND_SF_NLAYOUTS } nd_sf_layout;
/* e8m0_bias125 / e8m0_bias128: E8M0 exponents read with another bias than OCP's 127 (compressed-tensors
 * 0.13 wrote 125 = 127 - 2, C26; 128 is the "128 = 2**7" reading): 4x too large / 2x too small. For an
 * MXFP4 weight e4m3 (0) stands for the format's own reading, E8M0 with bias 127. */
typedef enum nd_sf_encoding {
    ND_SF_E4M3 = 0, ND_SF_E8M0 = 1, ND_SF_U8 = 2, ND_SF_E8M0_B125 = 3, ND_SF_E8M0_B128 = 4, ND_SF_NENCODINGS
} nd_sf_encoding;

#define ND_E8M0_BIAS 127

/* "linear", "swizzled_128x4", "transposed", "padded_128x4" / "e4m3", "e8m0", "u8", "e8m0_bias125",
 * "e8m0_bias128" ("?" out of range) */
const char *nd_sf_layout_name(int layout);
const char *nd_sf_encoding_name(int encoding);
/* The index of a name in those lists, or -1. */
int nd_sf_layout_parse(const char *name);
int nd_sf_encoding_parse(const char *name);

/* Bytes a buffer of the [rows, cols] scale matrix takes in `layout` (swizzled: padded). */
int64_t nd_sf_layout_bytes(int layout, int64_t rows, int64_t cols);
/* Where element (r, c) sits in such a buffer. */
int64_t nd_sf_layout_offset(int layout, int64_t rows, int64_t cols, int64_t r, int64_t c);
/* Read a buffer of buf_n bytes as if it held the matrix in `layout`: lin[r * cols + c] =
 * buf[offset(r, c)]; an offset past buf_n (a swizzled read of an unpadded buffer) reads 0. Returns
 * how many elements were past the buffer. */
int64_t nd_sf_read_as(int layout, const uint8_t *buf, int64_t buf_n, int64_t rows, int64_t cols, uint8_t *lin);
/* Store the linear matrix in `layout`: buf (nd_sf_layout_bytes long) gets zero padding and
 * buf[offset(r, c)] = lin[r * cols + c]. nd_sf_read_as of the result gives lin back. */
void nd_sf_store_as(int layout, const uint8_t *lin, int64_t rows, int64_t cols, uint8_t *buf);
/* Rows of `stride` bytes (stride >= cols; the padded layouts' row length): read the [rows, cols]
 * matrix from a buffer of buf_n bytes whose row r starts at r * stride (past buf_n reads 0;
 * returns how many were past), and store it so (buf rows * stride bytes, zero padding). */
int64_t nd_sf_read_strided(const uint8_t *buf, int64_t buf_n, int64_t rows, int64_t cols, int64_t stride, uint8_t *lin);
void nd_sf_store_strided(const uint8_t *lin, int64_t rows, int64_t cols, int64_t stride, uint8_t *buf);
/* The row stride of the padded layouts: round_up(cols, multiple). */
int64_t nd_sf_padded_stride(int64_t cols, int64_t multiple);

/* The value of scale byte b in `encoding` (e8m0 with ND_E8M0_BIAS). */
float nd_sf_decode(uint8_t b, int encoding);
/* 2^(b - bias), 0xFF NaN: E8M0 with any exponent bias. */
float nd_e8m0_biased(uint8_t b, int bias);
/* UE8M0 rounding up: the smallest power of two >= |v|, sign kept; 0, NaN and Inf unchanged. */
float nd_sf_pow2_ceil(float v);
/* 1 when v is a finite nonzero power of two (either sign). */
int nd_sf_is_pow2(float v);
/* Of n E4M3 scale bytes: how many are finite and nonzero, and how many of those powers of two. */
void nd_sf_pow2_share(const uint8_t *sf, int64_t n, int64_t *nonzero, int64_t *pow2);
/* The largest finite |value| among n E4M3 block scales (0 when none). */
float nd_sf_e4m3_max(const uint8_t *sf, int64_t n);

/* ---- checkpoint-side transforms (synth faults) ---- */
/* Round every E4M3 scale up to a power of two in place (codes untouched). Powers of two past 256
 * do not exist in E4M3: when a ceiling is 512 every scale is stored at half its ceiling and the
 * function returns 1 (the caller halves the global divisor so the weight is exactly the rounded
 * one; a ceiling of 2^-9 then stays 2^-9, the one block value that cannot halve); else 0. */
int nd_sf_e4m3_pow2_ceil(uint8_t *sf, int64_t n);
/* The MX conversion of an NVFP4 weight [rows, k]: each block's E4M3 scale s rounded up to the
 * power of two p (ceiling), its codes re-quantized to code * s / p (RNE E2M1), the scale stored as
 * the E8M0 byte of p. Reading the bytes as E8M0 gives the weight back up to the re-quantization. */
void nd_sf_to_e8m0_requant(uint8_t *packed, uint8_t *sf, int64_t rows, int64_t k);

/* ---- repairs ---- */
/* With the original weight orig [rows, k] (FP32): the E4M3 block scales (RNE, satfinite) that make
 * e2m1(codes) * scale / div closest to it, block by block (least squares: div <orig, c> / <c, c>;
 * an all-zero block keeps 0). */
void nd_sf_refit(const uint8_t *packed, const float *orig, float div, int64_t rows, int64_t k, uint8_t *sf);
/* The NVFP4 weight decoded on the host from float block scales f [rows, k/16]: out = e2m1(code) *
 * (f / div), in the backends' order (one division per block). */
void nd_nvfp4_decode_f(const uint8_t *packed, const float *f, float div, int64_t rows, int64_t k, float *out);

/* ---- tensor-parallel padding ---- */
/* A row-parallel weight's K split over tp ranks (K % tp == 0), each shard of K/tp columns padded
 * to a multiple of `tile`. With padding left uninitialised, rank i's padding reads what follows
 * its shard in the row: the next columns (i+1)K/tp, ... (none past K). extra[j] (k entries) gets
 * how many padded reads land on column j. Returns the padded columns per rank (0: the shards are
 * aligned or the split is not possible: K % tp != 0, tp < 1 or tile < 1). */
int64_t nd_tp_pad_reads(int64_t k, int tp, int tile, int *extra);

#endif
