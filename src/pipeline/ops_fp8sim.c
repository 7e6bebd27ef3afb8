/* ops_fp8sim.c — `fp8_sim`: an activation the serving stack stores in FP8 while the reference
 * keeps BF16 (DeepSeek-V4's KV cache in vLLM, fp8_ds_mla: the nope dims of every kv row in e4m3
 * with one power-of-two scale per 64 values; the rope dims stay BF16; research/model-arch.md §3.6,
 * §8.8). Reference: the input unchanged. Production: the first `cols` columns of each row
 * quantized-dequantized in groups of `group` (pow2: 1 for UE8M0 scales); the rest unchanged. */
#include <stdlib.h>
#include "ops.h"

static int fp8_prod(nd_opctx *c, const nd_buf *x, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    double cols, group, pow2;
    ND_TRY(nd_attr_req(r, c->st, "cols", &cols, e));
    ND_TRY(nd_attr_num(r, c->st, "group", 64, &group, e));
    ND_TRY(nd_attr_num(r, c->st, "pow2", 1, &pow2, e));
    int64_t n = (int64_t)cols;
    if (n <= 0 || n > x->cols || group < 1)
        return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: cols %lld / group %g do not fit rows of %lld", c->st->name, (long long)n, group, (long long)x->cols);
    *out = nd_buf_new(r, x->rows, x->cols, e);
    if (!*out) return e->code;
    ND_TRY(r->be->copy(r->be, (*out)->p, x->p, sizeof(float) * (size_t)x->n, e));
    float *part = r->be->alloc(r->be, sizeof(float) * (size_t)(x->rows * n), e);
    if (!part) return e->code;
    int rc = r->be->copy2d(r->be, part, n, x->p, x->cols, n, x->rows, e);
    if (!rc) rc = r->be->fake_quant_fp8(r->be, part, x->rows, n, (int)group, (int)pow2, part, e);
    if (!rc) rc = r->be->copy2d(r->be, (*out)->p, x->cols, part, n, n, x->rows, e);
    r->be->release(r->be, part);
    return rc;
}

int nd_op_fp8_sim(nd_opctx *c, nd_err *e) {
    c->out_ref[0] = nd_buf_ref(c->in_ref[0]);
    c->quantized = 1;
    if (c->want_iso) ND_TRY(fp8_prod(c, c->in_ref[0], &c->out_iso[0], e));
    if (c->want_chain) ND_TRY(fp8_prod(c, c->in_chain[0], &c->out_chain[0], e));
    return 0;
}
