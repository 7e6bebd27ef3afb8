/* mk_gate_cases.c — writes the traces of the gate's cases of the bad-input corpus (corpus.sh) into
 * OUTDIR: a golden, runs that hide a broken run (a duplicate stage row, an extra row of NaN
 * figures, a missing stage, status error), a golden whose status is error, a run of other tokens,
 * one of another recipe, a golden with an HDF5 external link to another trace in /tensors, and a
 * trace whose /prompt is a NULLPAD string that fills its size (as h5py writes one).
 *   usage: mk_gate_cases OUTDIR */
#include <hdf5.h>
#include <stdio.h>
#include <string.h>
#include "trace/trace_fixture.h"

#define N 12
static char dir[512];

static const char *at(const char *name) {
    static char p[4][700];
    static int k;
    char *s = p[k++ & 3];
    snprintf(s, 700, "%s/%s", dir, name);
    return s;
}

static int put(const char *name, const nd_row *rows, int n, const char *status, const int64_t *tok, int ntok,
               const char *recipe) {
    nd_trace_summary s = fx_summary(status, "", "", "");
    nd_trace_meta m = fx_meta();
    if (recipe) m.recipe = recipe;
    nd_trace_w *w = NULL;
    nd_err e = {0};
    int rc = nd_trace_create(at(name), &m, tok, ntok, &w, &e);
    for (int i = 0; !rc && i < n; i++) rc = nd_trace_append(w, &rows[i], &e);
    if (w) {
        nd_err e2 = {0};
        int rc2 = nd_trace_finish(w, rc ? NULL : &s, rc ? &e2 : &e);
        if (!rc) rc = rc2;
    }
    if (rc) fprintf(stderr, "mk_gate_cases: %s: %s\n", name, e.msg);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: mk_gate_cases OUTDIR\n"); return 2; }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    nd_row rows[N + 1], r2[N + 1];
    for (int i = 0; i < N; i++) rows[i] = fx_row(i);
    const int64_t tok[4] = {11, 22, 33, 44}, other[4] = {11, 22, 34, 44};
    int rc = put("golden.h5", rows, N, "ok", tok, 4, NULL);
    memcpy(r2, rows, sizeof rows);
    r2[N] = rows[3];
    rc |= put("dup-row.h5", r2, N + 1, "ok", tok, 4, NULL);
    memcpy(r2, rows, sizeof rows);
    r2[N] = fx_row(98);
    r2[N].layer = rows[N - 1].layer; /* a new stage within the golden's layers (more layers: not comparable) */
    r2[N].prod_nan = 4;
    r2[N].cosine = NAN;
    rc |= put("extra-nan-row.h5", r2, N + 1, "ok", tok, 4, NULL);
    memcpy(r2, rows, sizeof rows);
    memmove(&r2[3], &r2[4], (size_t)(N - 4) * sizeof *r2);
    rc |= put("missing-stage.h5", r2, N - 1, "ok", tok, 4, NULL);
    memcpy(r2, rows, sizeof rows);
    r2[5].sqnr_db = NAN;
    rc |= put("nan-figure.h5", r2, N, "ok", tok, 4, NULL);
    rc |= put("status-error.h5", rows, N, "error", tok, 4, NULL);
    rc |= put("bogus-status.h5", rows, N, "bogus", tok, 4, NULL); /* no status a run writes */
    rc |= put("other-tokens.h5", rows, N, "ok", other, 4, NULL);
    rc |= put("other-recipe.h5", rows, N, "ok", tok, 4, "llama");
    /* a golden without stage rows gates nothing; a run over more layers is another model */
    rc |= put("no-rows.h5", rows, 0, "ok", tok, 4, NULL);
    memcpy(r2, rows, sizeof rows);
    for (int i = 0; i < N; i++) r2[i].layer += 10;
    rc |= put("other-layers.h5", r2, N, "ok", tok, 4, NULL);
    /* the same highest layer, another set of layers (--layers 1 against --layers 0-1) */
    memcpy(r2, rows, sizeof rows);
    for (int i = 0; i < N; i++) if (r2[i].layer == 0) r2[i].layer = 1;
    rc |= put("layer-gap.h5", r2, N, "ok", tok, 4, NULL);
    /* strings of a trace file with terminal escapes: a verdict, a mode and an op */
    memcpy(r2, rows, sizeof rows);
    snprintf(r2[2].verdict, sizeof r2[2].verdict, "ok\033[31mred");
    snprintf(r2[2].op, sizeof r2[2].op, "lin\033]0;title\007");
    rc |= put("escapes.h5", r2, N, "ok", tok, 4, NULL);
    /* a golden with an external link in /tensors to the golden above */
    rc |= put("external-link.h5", rows, N, "ok", tok, 4, NULL);
    hid_t f = H5Fopen(at("external-link.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0 || H5Lcreate_external(at("golden.h5"), "/stages", f, "/tensors/elsewhere", H5P_DEFAULT, H5P_DEFAULT) < 0 ||
        H5Fclose(f) < 0) {
        fprintf(stderr, "mk_gate_cases: cannot add the external link\n");
        rc = 1;
    }
    /* /prompt as h5py writes a fixed-length bytes string: NULLPAD, filling its size (no NUL) */
    rc |= put("prompt-nullpad.h5", rows, N, "ok", tok, 4, NULL);
    f = H5Fopen(at("prompt-nullpad.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t st = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), d = -1;
    if (f < 0 || st < 0 || sp < 0 || H5Tset_size(st, 11) < 0 || H5Tset_strpad(st, H5T_STR_NULLPAD) < 0 ||
        (d = H5Dcreate2(f, "prompt", st, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
        H5Dwrite(d, st, H5S_ALL, H5S_ALL, H5P_DEFAULT, "hello world") < 0 || H5Dclose(d) < 0 || H5Fclose(f) < 0) {
        fprintf(stderr, "mk_gate_cases: cannot add the NULLPAD prompt\n");
        rc = 1;
    }
    H5Tclose(st);
    H5Sclose(sp);
    return rc ? 1 : 0;
}
