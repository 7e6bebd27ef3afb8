/* test_prod_dump.c — captured activations (trace --prod-dump): a capture file made from a
 * `--dump tensors` trace of golden/clean-v4 (the isolated production outputs, as a serving
 * stack's forward hook would save them, some under the stage name and some under the module
 * name), with one stage corrupted, must be judged stage by stage: the corrupted stage flagged in
 * mode "captured", the others ok, the first divergence the corrupted one. The diagnosis of a
 * captured divergence whose stage replays healthy names the stack's kernel (stack_kernel), never
 * a repair of the clean checkpoint; a capture that is all NaN gets no cosine or SQNR (not 1 / 200). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nd_test.h"
#include "pipeline/pipeline.h"
#include "diagnose/diagnose.h"

/* the first divergence's diagnosed cause, or "" */
static void diagnosed(const nd_trace_opts *o, nd_trace_result *res, char *cause, size_t cap) {
    nd_diagnosis *ds = NULL;
    int n = 0;
    nd_err e = {0};
    cause[0] = 0;
    int rc = nd_diagnose_run(o, res, 0, &ds, &n, &e);
    CHECK(rc == 0 && n >= 1, "diagnosis: rc %d %s", rc, e.msg);
    if (!rc && n >= 1) snprintf(cause, cap, "%s", ds[0].cause);
    free(ds);
}

typedef struct cap { const char *stage, *save_as; int corrupt; } cap;

int main(void) {
    const char *root = getenv("ND_SOURCE_ROOT");
    if (!root) root = ".";
    char ckpt[1024], trace[512], dump[512];
    snprintf(ckpt, sizeof ckpt, "%s/golden/clean-v4", root);
    snprintf(trace, sizeof trace, "%s/nd-prod-dump-%d.h5", P_tmpdir, (int)getpid());
    snprintf(dump, sizeof dump, "%s/nd-prod-dump-%d.safetensors", P_tmpdir, (int)getpid());
    nd_err e = {0};
    nd_trace_opts o = {.ckpt_dir = ckpt, .backend = "cpu", .layer_hi = -1, .modes = ND_MODES_ISOLATED, .out_path = trace,
                       .dump_tensors = 1};
    nd_trace_result res;
    int rc = nd_pipeline_trace(&o, &res, &e);
    CHECK(rc == 0, "dump trace: %s", e.msg);
    CHECK(!strcmp(res.summary.status, "ok"), "clean-v4 is %s", res.summary.status);
    nd_trace_result_free(&res);
    if (rc) return nd_test_report("test_prod_dump");

    /* the isolated production outputs of four quantized linears of layer 0 */
    const cap caps[] = {
        {"layers.0.self_attn.q_a_proj", "layers.0.self_attn.q_a_proj", 0},
        {"layers.0.self_attn.kv_proj", "model.layers.0.self_attn.kv_proj", 1},   /* module name; corrupted */
        {"layers.0.self_attn.q_b_proj", "model.layers.0.self_attn.q_b_proj", 0}, /* module name */
        {"layers.0.mlp.shared_experts.down_proj", "layers.0.mlp.shared_experts.down_proj", 0},
    };
    const int nc = (int)(sizeof caps / sizeof caps[0]);
    float *data[4] = {0};
    int64_t shape0[2] = {0, 0}; /* q_a_proj's [tokens, features] */
    nd_st_writer *w = NULL;
    rc = nd_st_writer_open(dump, &w, &e);
    CHECK(rc == 0, "writer: %s", e.msg);
    for (int i = 0; i < nc && !rc; i++) {
        char st[160];
        snprintf(st, sizeof st, "%s@isolated", caps[i].stage);
        int nd;
        int64_t shape[ND_TRACE_MAXDIM];
        rc = nd_trace_read_tensor(trace, st, "prod", &data[i], &nd, shape, &e);
        CHECK(rc == 0 && nd == 2, "read %s: %s", st, e.msg);
        if (rc) break;
        if (i == 0) shape0[0] = shape[0], shape0[1] = shape[1];
        if (caps[i].corrupt) /* a serving stack whose activation quantizer flushed most of the rows */
            for (int64_t j = 0; j < shape[0] * shape[1]; j++)
                if ((j / shape[1]) % 4 != 0) data[i][j] = 0.0f;
        rc = nd_st_writer_add(w, caps[i].save_as, ND_DT_F32, 2, shape, data[i], &e);
        CHECK(rc == 0, "add: %s", e.msg);
    }
    if (!rc) rc = nd_st_writer_close(w, &e);
    else nd_st_writer_abort(w);
    CHECK(rc == 0, "close: %s", e.msg);

    o = (nd_trace_opts){.ckpt_dir = ckpt, .backend = "cpu", .layer_hi = -1, .modes = ND_MODES_BOTH, .prod_dump = dump};
    if (!rc) rc = nd_pipeline_trace(&o, &res, &e);
    CHECK(rc == 0, "prod-dump trace: %s", e.msg);
    if (!rc) {
        int n_captured = 0;
        for (int64_t i = 0; i < res.nrows; i++) {
            const nd_row *r = &res.rows[i];
            if (strcmp(r->mode, "captured")) continue;
            n_captured++;
            int found = 0;
            for (int c = 0; c < nc; c++) {
                if (strcmp(r->name, caps[c].stage)) continue;
                found = 1;
                if (caps[c].corrupt) CHECK(strcmp(r->verdict, "ok") != 0, "%s (corrupted): verdict %s, cosine %g", r->name, r->verdict, r->cosine);
                else {
                    CHECK(!strcmp(r->verdict, "ok"), "%s: verdict %s, cosine %g", r->name, r->verdict, r->cosine);
                    /* the capture is the isolated production output itself */
                    CHECK(r->cosine > 0.98, "%s: cosine %g", r->name, r->cosine);
                }
            }
            CHECK(found, "captured row for %s, which the file does not hold", r->name);
        }
        CHECK_EQ_INT(n_captured, nc);
        CHECK(!strcmp(res.summary.status, "diverged"), "status %s", res.summary.status);
        CHECK(!strcmp(res.summary.first_divergence, "layers.0.self_attn.kv_proj"), "first divergence %s", res.summary.first_divergence);
        CHECK(!strcmp(res.summary.first_divergence_mode, "captured"), "mode %s", res.summary.first_divergence_mode);
        char cause[64];
        diagnosed(&o, &res, cause, sizeof cause);
        CHECK(!strcmp(cause, "stack_kernel"), "flushed capture of a clean stage: cause %s", cause);
    }
    nd_trace_result_free(&res);

    /* every value of a captured output NaN: the row has no figures, the cause is the stack's */
    {
        int64_t shape[ND_TRACE_MAXDIM] = {0};
        float *nan_out = NULL;
        int nd = 0;
        rc = nd_trace_read_tensor(trace, "layers.0.self_attn.q_a_proj@isolated", "prod", &nan_out, &nd, shape, &e);
        CHECK(rc == 0 && nd == 2, "read: %s", e.msg);
        for (int64_t j = 0; !rc && j < shape[0] * shape[1]; j++) nan_out[j] = __builtin_nanf("");
        if (!rc) rc = nd_st_writer_open(dump, &w, &e);
        if (!rc) rc = nd_st_writer_add(w, "layers.0.self_attn.q_a_proj", ND_DT_F32, 2, shape, nan_out, &e);
        /* a misspelt name beside a matched one: not judged, and said so */
        if (!rc) rc = nd_st_writer_add(w, "layers.0.self_attn.q_a_prj", ND_DT_F32, 2, shape, nan_out, &e);
        if (!rc) rc = nd_st_writer_close(w, &e);
        free(nan_out);
        CHECK(rc == 0, "nan capture: %s", e.msg);
        if (!rc) rc = nd_pipeline_trace(&o, &res, &e);
        CHECK(rc == 0, "nan capture trace: %s", e.msg);
        if (!rc) {
            int seen = 0;
            for (int64_t i = 0; i < res.nrows; i++) {
                const nd_row *r = &res.rows[i];
                if (strcmp(r->mode, "captured")) continue;
                seen = 1;
                CHECK(r->prod_nan == r->numel && r->numel > 0, "NaN count %lld of %lld", (long long)r->prod_nan, (long long)r->numel);
                CHECK(r->cosine != r->cosine && r->sqnr_db != r->sqnr_db, "all-NaN capture: cosine %g, SQNR %g (no pair compared)",
                      r->cosine, r->sqnr_db);
            }
            CHECK(seen, "no captured row");
            CHECK(strstr(res.warning, "1 of its 2 tensors named no stage") && strstr(res.warning, "layers.0.self_attn.q_a_prj"),
                  "the unmatched tensor is named: warning '%s'", res.warning);
            CHECK(!strcmp(res.summary.first_divergence, "layers.0.self_attn.q_a_proj"), "first divergence %s", res.summary.first_divergence);
            char cause[64];
            diagnosed(&o, &res, cause, sizeof cause);
            CHECK(!strcmp(cause, "stack_kernel"), "all-NaN capture of a clean stage: cause %s", cause);
            nd_trace_result_free(&res);
        }
    }

    /* a capture of the wrong width is bad input, not a crash */
    float small[3] = {1, 2, 3};
    int64_t sh[2] = {1, 3};
    rc = nd_st_writer_open(dump, &w, &e);
    if (!rc) rc = nd_st_writer_add(w, "layers.0.self_attn.q_a_proj", ND_DT_F32, 2, sh, small, &e);
    if (!rc) rc = nd_st_writer_close(w, &e);
    CHECK(rc == 0, "writer: %s", e.msg);
    memset(&e, 0, sizeof e);
    rc = nd_pipeline_trace(&o, &res, &e);
    CHECK_EQ_INT(rc, ND_EXIT_BADINPUT);
    CHECK(strstr(e.msg, dump) != NULL, "message names the file: %s", e.msg);
    nd_trace_result_free(&res);

    /* the same values under another shape (rows cut differently, transposed dims), or one stage
     * captured twice (under its stage and its module name): exit 2 naming the file; a batch of
     * one, [1, tokens, features], is the capture (issue 37, round 14) */
    struct { const char *what; int ndim; int64_t sh[3]; int twice; int want; const char *msg; } shapes[] = {
        {"rows cut in two", 2, {shape0[0] * 2, shape0[1] / 2}, 0, ND_EXIT_BADINPUT, "expected ["},
        {"dims exchanged", 2, {shape0[1], shape0[0]}, 0, ND_EXIT_BADINPUT, "expected ["},
        {"flat", 1, {shape0[0] * shape0[1]}, 0, ND_EXIT_BADINPUT, "expected ["},
        {"a batch of one", 3, {1, shape0[0], shape0[1]}, 0, 0, ""},
        {"stage and module name both", 2, {shape0[0], shape0[1]}, 1, ND_EXIT_BADINPUT, "two tensors capture stage layers.0.self_attn.q_a_proj"},
    };
    for (size_t k = 0; data[0] && shape0[0] != shape0[1] && k < sizeof shapes / sizeof shapes[0]; k++) {
        memset(&e, 0, sizeof e);
        rc = nd_st_writer_open(dump, &w, &e);
        if (!rc) rc = nd_st_writer_add(w, "layers.0.self_attn.q_a_proj", ND_DT_F32, shapes[k].ndim, shapes[k].sh, data[0], &e);
        if (!rc && shapes[k].twice) rc = nd_st_writer_add(w, "model.layers.0.self_attn.q_a_proj", ND_DT_F32, 2, shape0, data[0], &e);
        if (!rc) rc = nd_st_writer_close(w, &e);
        CHECK(rc == 0, "writer (%s): %s", shapes[k].what, e.msg);
        rc = nd_pipeline_trace(&o, &res, &e);
        CHECK(rc == shapes[k].want, "%s: exit %d, want %d (%s)", shapes[k].what, rc, shapes[k].want, e.msg);
        if (shapes[k].want) CHECK(strstr(e.msg, dump) && strstr(e.msg, shapes[k].msg), "%s: message '%s'", shapes[k].what, e.msg);
        else CHECK(!strcmp(res.summary.status, "ok"), "%s: the healthy capture is %s", shapes[k].what, res.summary.status);
        nd_trace_result_free(&res);
    }
    CHECK(data[0] && shape0[0] != shape0[1], "q_a_proj's capture is [%lld, %lld]", (long long)shape0[0], (long long)shape0[1]);

    for (int i = 0; i < nc; i++) free(data[i]);
    unlink(trace);
    unlink(dump);
    return nd_test_report("test_prod_dump");
}
