/* synth_scales.c — see synth_scales.h. */
#include "synth/synth_scales.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pipeline/scale_repr.h"
#include "numerics/nd_numerics.h"

int sy_scale_fault(sy_fault_kind k) {
    return k == SY_F_SCALE_POW2 || k == SY_F_SCALE_SWIZZLED || k == SY_F_SCALE_TRANSPOSED || k == SY_F_SCALE_ENCODING ||
           k == SY_F_SCALE_ROW_STRIDE || k == SY_F_SCALE_EXPONENT;
}

int sy_scale_fault_value(const char *spec, const char *word, sy_fault *f, nd_err *e) {
    int x = nd_sf_encoding_parse(word);
    if (x != ND_SF_E8M0 && x != ND_SF_E8M0_B125 && x != ND_SF_E8M0_B128)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': scale-encoding takes e8m0 (the encoding an NVFP4 weight's bytes "
                       "are written in), or e8m0_bias125 / e8m0_bias128 (an MXFP4 weight's E8M0 bytes written with that bias; "
                       "e4m3 is NVFP4's own, u8 is a way of reading them: stack key block_scale_encoding), not '%s'",
                       spec, word);
    f->value = x;
    f->has_value = 1;
    return 0;
}

int sy_scale_fault_check(const sy_fault *f, int64_t n, int64_t k, const char *spec, nd_err *e) {
    if (f->kind == SY_F_SCALE_ENCODING && f->value != ND_SF_E8M0)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': %s is an MXFP4 weight's fault; an NVFP4 weight's E4M3 bytes "
                       "are written as e8m0", spec, nd_sf_encoding_name((int)f->value));
    if (f->kind == SY_F_SCALE_SWIZZLED && (n % 128 || (k / 16) % 4))
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': the swizzled 128x4 layout pads [%lld, %lld] block scales to "
                       "[%lld, %lld]: scale-swizzled needs rows %% 128 == 0 and K/16 %% 4 == 0 (the tensor keeps its shape)",
                       spec, (long long)n, (long long)(k / 16), (long long)((n + 127) / 128 * 128), (long long)((k / 16 + 3) / 4 * 4));
    if (f->kind == SY_F_SCALE_EXPONENT && (f->value != (int)f->value || f->value < 1 || f->value > 8))
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': scale-exponent-shift takes the binades the exponent is "
                       "written too low, an integer from 1 to 8, not %g", spec, f->value);
    if (f->kind == SY_F_SCALE_ROW_STRIDE) {
        const double v = f->value;
        if (v != (int)v || v < 2 || v > 128 || ((int)v & ((int)v - 1)))
            return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': scale-row-stride takes the multiple the rows are "
                           "padded to, a power of two from 2 to 128 (4: the 128x4 layouts' columns), not %g", spec, v);
        if ((k / 16) % (int64_t)v == 0)
            return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': K/16 = %lld is already a multiple of %d: rows padded "
                           "to it are not longer (take a larger multiple)", spec, (long long)(k / 16), (int)v);
    }
    return 0;
}

const char *sy_scale_fault_apply(sy_fault *f, int ct, sy_qmod *m) {
    const int64_t nb = m->k / 16, ns = m->n * nb;
    uint8_t *before = malloc((size_t)ns + 1);
    if (before) memcpy(before, m->sf, (size_t)ns);
    switch (f->kind) {
    case SY_F_SCALE_POW2:
        if (nd_sf_e4m3_pow2_ceil(m->sf, ns)) {
            /* every scale stored at half its ceiling: the divisor halves (ModelOpt's multiplier doubles) */
            m->wglobal = ct ? m->wglobal * 0.5f : m->wglobal * 2.0f;
            f->stored = m->wglobal;
        }
        break;
    case SY_F_SCALE_SWIZZLED:
    case SY_F_SCALE_TRANSPOSED:
        if (before) nd_sf_store_as(f->kind == SY_F_SCALE_SWIZZLED ? ND_SF_SWIZZLED : ND_SF_TRANSPOSED, before, m->n, nb, m->sf);
        break;
    case SY_F_SCALE_ENCODING:
        nd_sf_to_e8m0_requant(m->packed, m->sf, m->n, m->k);
        break;
    case SY_F_SCALE_EXPONENT:
        /* an encoder whose exponent bias is off by K: every scale 2^-K of its value (exact for
         * normal E4M3 values; the smallest round to E4M3's subnormals), global and codes kept */
        for (int64_t i = 0; i < ns; i++)
            m->sf[i] = nd_e4m3_from_f32_satfinite((float)ldexp(nd_e4m3_to_f32(m->sf[i]), -(int)f->value));
        break;
    case SY_F_SCALE_ROW_STRIDE:
        /* the caller sized sf for n rows of the padded length (sy_faults_sf_cols) */
        f->stride = nd_sf_padded_stride(nb, (int64_t)f->value);
        if (before) nd_sf_store_strided(before, m->n, nb, f->stride, m->sf);
        m->sf_cols = f->stride;
        break;
    default: break;
    }
    f->count = 0;
    for (int64_t i = 0; before && i < ns; i++) f->count += before[i] != m->sf[i];
    free(before);
    return "weight_scale";
}
