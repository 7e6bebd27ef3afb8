/* synth_quant.h — weight quantization exactly as compressed-tensors does it (nvfp4-spec.md §2.2),
 * built only from the scalar rules of kernels/numerics/nd_numerics.h.
 *
 * NVFP4: gw = 2688 / amax(W) (a divisor); per 16-block s = e4m3(clamp(gw * amax_blk / 6, 448)),
 * a zero s stored as 0.125 (compressed-tensors' FP8 eps); codes = e2m1(clamp(W / (s / gw), ±6)),
 * element 2j in the low nibble of byte j. ModelOpt files hold the same codes and block scales
 * with weight_scale_2 = amax / 2688 (nvfp4-spec.md §3.1).
 * FP8 block (compressed-tensors float-quantized, strategy block): per bn x bk block
 * scale = amax_blk / 448 (0 -> FLT_EPSILON, compressed-tensors' eps for an F32 scale),
 * q = e4m3_satfinite(clamp(W / scale, ±448)); W ~ q * scale. */
#ifndef ND_SYNTH_QUANT_H
#define ND_SYNTH_QUANT_H

#include <stdint.h>

/* max |w| over n BF16 values (NaN ignored). */
float sy_amax_bf16(const uint16_t *w, int64_t n);
/* compressed-tensors weight global scale 2688 / amax; 1.0 when that is not finite (CT PR #637). */
float sy_nvfp4_global_div(float amax);
/* W [n,k] BF16 -> packed [n,k/2] and block scales [n,k/16] with divisor gw. k % 16 == 0. */
void sy_nvfp4_quantize(const uint16_t *w, int64_t n, int64_t k, float gw, uint8_t *packed, uint8_t *sf);
/* W [n,k] BF16 -> e4m3 [n,k] and F32 scales [ceil(n/bn), ceil(k/bk)]. */
void sy_fp8_block_quantize(const uint16_t *w, int64_t n, int64_t k, int bn, int bk, uint8_t *q, float *scale);

#endif
