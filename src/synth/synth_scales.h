/* synth_scales.h — faults in the representation of a module's block scales (issue 18), for synth's
 * own checkpoints and synth --from alike (the bytes written, in the format's own tensors):
 *   scale-pow2          every block scale rounded up to a power of two (UE8M0 ceiling), codes kept
 *                       (a ceiling past E4M3's 448 halves every scale and the global divisor with them)
 *   scale-swizzled      the [N, K/16] scales stored in the CUTLASS/FlashInfer 128x4 swizzled layout
 *                       (needs N % 128 == 0 and K/16 % 4 == 0: the swizzled copy is then as large)
 *   scale-transposed    the scales stored as the [K/16, N] matrix in the [N, K/16] tensor
 *   scale-encoding=E    the scale bytes written in encoding E where the format reads E4M3:
 *                       e8m0 (the MX conversion: power-of-two ceiling, codes re-quantized to it,
 *                       the E8M0 exponent byte stored). (E4M3 bytes read as integers, C27's U8 reading,
                       is a loader behaviour: the stack key block_scale_encoding: u8.)
 *   scale-row-stride=M  the scales stored in rows padded to a multiple of M (a power of two, 2 to
 *                       128; 4 is the 128x4 layouts' column padding): the tensor becomes
 *                       [N, round_up(K/16, M)] with zero padding, as a writer that saves a kernel's
 *                       padded buffer; a loader reading the [N, K/16] it expects from those bytes
 *                       shifts every row (scale_layout_mismatch; the reverse, dense scales read
 *                       with a padded stride, is the stack key block_scale_layout: padded_128x4)
 *   scale-exponent-shift=K  every scale written with its E4M3 exponent K too low (an encoder's
 *                       exponent bias off by K): each 2^-K of its value, global and codes kept, so the
 *                       largest is 448/2^K (scale_encoding_mismatch, told from a global mismatch by
 *                       that range)
 * The transforms are src/pipeline/scale_repr.h's. */
#ifndef ND_SYNTH_SCALES_H
#define ND_SYNTH_SCALES_H
#include "synth/synth_faults.h"

/* 1 for the faults above. */
int sy_scale_fault(sy_fault_kind k);
/* The value of scale-encoding=WORD into f->value (the nd_sf_encoding: e8m0 only); exit 2 naming
 * the spec. */
int sy_scale_fault_value(const char *spec, const char *word, sy_fault *f, nd_err *e);
/* Exit 2 when the fault cannot apply to a module of n rows and k columns (spec for the message). */
int sy_scale_fault_check(const sy_fault *f, int64_t n, int64_t k, const char *spec, nd_err *e);
/* Apply the fault to m (ct: compressed-tensors names and meaning); the tensor changed, and the
 * count of scales changed in f->count, the new global in f->stored when it changes. */
const char *sy_scale_fault_apply(sy_fault *f, int ct, sy_qmod *m);

#endif
