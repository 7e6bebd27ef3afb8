/* ops_tensor.c — `op: tensor`: a checkpoint F32/BF16/F16 tensor [rows, cols] as a stage output,
 * the same on both paths (a learned bias or table a later stage reads). The stage writes no row:
 * its output is data, not a computation to judge. */
#include <stdlib.h>
#include "run.h"
#include "ops.h"

static int tensor_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    (void)in;
    nd_run *r = c->r;
    char buf[256];
    const char *name = nd_attr_str(c->st, "weight", buf, sizeof buf);
    if (!name) return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s (op tensor) needs attribute 'weight'", nd_stage_file(r->rc, c->st->def), c->st->def->line, c->st->def->name);
    const nd_tview *t = nd_run_tensor(r, 0, name);
    if (!t) return nd_fail(e, ND_EXIT_BADINPUT, "%s: missing tensor %s (stage %s)", nd_ckpt_dir(r->ck), name, c->st->name);
    if (t->ndim != 2) return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s must be 2-D [rows, cols] (stage %s)", t->file, t->name, c->st->name);
    nd_buf *b = calloc(1, sizeof *b);
    if (!b) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    b->refs = 1;
    b->rows = t->shape[0];
    b->cols = t->shape[1];
    b->n = t->numel;
    if (nd_tensor_f32(r, t, &b->p, e)) { free(b); return e->code; }
    nd_buf_count(r, b);
    out[0] = b;
    return 0;
}

int nd_op_tensor(nd_opctx *c, nd_err *e) {
    c->quantized = -1; /* no row */
    return nd_run_pure(c, tensor_fn, e);
}
