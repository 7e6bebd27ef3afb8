/* scale_read.h — an NVFP4 weight whose block scales are read another way than the checkpoint's
 * own: the diagnosis's module repairs (stack.h nd_module_repair: scale_layout, scale_encoding,
 * block_scale_refit) and a production GEMM's stack behaviours (nd_sf_read), decoded on the host
 * (scale_repr.h) and uploaded as FP32. */
#ifndef ND_SCALE_READ_H
#define ND_SCALE_READ_H
#include "run.h"

/* The row length of m's stored block-scale tensor sf for nb scales per row: its second dimension
 * when it is padded past nb (a [N(+pad), S > nb] tensor, scale_layout_mismatch's padded rows),
 * else round_up(nb, 4) (the padded_128x4 layout). */
int64_t nd_sf_stored_stride(const nd_tview *sf, int64_t nb);
/* 1 when fix or rd (may be NULL) changes how the block scales are read. */
int nd_scale_read_needed(const nd_module_repair *fix, const nd_sf_read *rd);
/* Decode m's weight [N, K] once per divisor div[0..nout) into out[i] (backend FP32 buffers): the
 * stored bytes (nibbles swapped when swap_nibbles), their scales re-read as fix says, then as rd
 * says (NULL: the reference reading). Exit 2 for a module that is not NVFP4, for a refit without
 * --reference-checkpoint or without an unquantized original of the same name. */
/* The production GEMM operand of m (codes x block scales, divisor 1) as the stage's kernel reads
 * its scales (rd from nd_stack_sf_read). */
int nd_weight_prod_codes_f32(nd_run *r, const nd_module *m, const nd_sf_read *rd, float **out, nd_err *e);
int nd_scale_read_decode(nd_run *r, const nd_module *m, const nd_module_repair *fix, const nd_sf_read *rd, int swap_nibbles,
                         const float *div, int nout, float **out, nd_err *e);

#endif
