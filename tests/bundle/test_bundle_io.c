/* test_bundle_io.c — the bundle file: a round trip keeps every field (a routing decision an input
 * carries included); truncated, foreign, non-HDF5, missing and inconsistent files are bad input
 * (exit 2 naming the file). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nd_test.h"
#include "bundle/bundle.h"

/* a second input carrying a routing decision: 2 rows, top-2 of 3 experts */
static int32_t route_ids[4] = {2, 0, 1, 2};
static float route_w[4] = {0.75f, 0.25f, 0.5f, 0.5f}, route_logits[6] = {0.1f, -1.f, 2.f, 0.f, 1.5f, 1.5f}, route_p[6];

static void fill(nd_bundle *b, float *in, uint8_t *w, int64_t *tok) {
    *b = (nd_bundle){.layer = 3, .th_floor_margin_db = 6.0, .th_min_cosine = 0.99, .th_min_sqnr_db = 15.0,
                     .th_chained_min_cosine = 0.9,
                     .stage_yaml = "{stage: \"layers.3.self_attn.q_a_proj\", op: \"linear\", in: [a], out: [qa]}",
                     .stack_yaml = "stack: vllm\nfused_input: max\n", .config_json = "{\"model_type\": \"deepseek_v4\"}",
                     .n_in = 1, .n_tensors = 1, .ntok = 2, .tokens = tok, .n_rows = 1};
    snprintf(b->stage, sizeof b->stage, "layers.3.self_attn.q_a_proj");
    snprintf(b->op, sizeof b->op, "linear");
    snprintf(b->recipe, sizeof b->recipe, "deepseek_v4");
    snprintf(b->stack, sizeof b->stack, "vllm");
    snprintf(b->overrides, sizeof b->overrides, "a.quant_mult=2;model.x.input_global_scale=719.8");
    for (int i = 0; i < 6; i++) in[i] = (float)i - 2.5f;
    snprintf(b->in[0].name, sizeof b->in[0].name, "a");
    b->in[0].rows = 2;
    b->in[0].cols = 3;
    b->in[0].data = in;
    b->n_in = 2;
    snprintf(b->in[1].name, sizeof b->in[1].name, "route");
    b->in[1].rows = 2;
    b->in[1].cols = 3;
    b->in[1].data = route_p;
    b->in[1].k = 2;
    b->in[1].idx = route_ids;
    b->in[1].w = route_w;
    b->in[1].logits = route_logits;
    b->in[1].route_scaling = 2.5f;
    for (int i = 0; i < 8; i++) w[i] = (uint8_t)(i * 37);
    snprintf(b->tensors[0].name, sizeof b->tensors[0].name, "model.layers.3.self_attn.q_a_proj.weight_packed");
    snprintf(b->tensors[0].dtype, sizeof b->tensors[0].dtype, "U8");
    b->tensors[0].ndim = 2;
    b->tensors[0].shape[0] = 2;
    b->tensors[0].shape[1] = 4;
    b->tensors[0].data = w;
    b->tensors[0].nbytes = 8;
    tok[0] = 7; tok[1] = 42;
    snprintf(b->rows[0].name, ND_NAME_LEN, "%s", b->stage);
    snprintf(b->rows[0].op, ND_OP_LEN, "%s", b->op);
    snprintf(b->rows[0].mode, ND_MODE_LEN, "isolated");
    snprintf(b->rows[0].verdict, ND_VERDICT_LEN, "scale_inverted");
    b->rows[0].cosine = 0.25;
}

static int read_code(const char *path, char *msg, size_t cap) {
    nd_err e = {0};
    nd_bundle *b = NULL;
    int rc = nd_bundle_read(path, &b, &e);
    snprintf(msg, cap, "%s", e.msg);
    nd_bundle_free(b);
    return rc;
}

int main(void) {
    char path[512], bad[512], msg[1024];
    snprintf(path, sizeof path, "%s/nd-bundle-io-%d.h5", P_tmpdir, (int)getpid());
    snprintf(bad, sizeof bad, "%s/nd-bundle-io-%d.bad", P_tmpdir, (int)getpid());
    nd_bundle b;
    float in[6];
    uint8_t w[8];
    int64_t tok[2];
    fill(&b, in, w, tok);
    nd_err e = {0};
    int rc = nd_bundle_write(path, &b, &e);
    CHECK(rc == 0, "write: %s", e.msg);
    nd_bundle *r = NULL;
    rc = nd_bundle_read(path, &r, &e);
    CHECK(rc == 0, "read: %s", e.msg);
    if (r) {
        CHECK(!strcmp(r->stage, b.stage), "%s", r->stage);
        CHECK_EQ_INT(r->layer, 3);
        CHECK(!strcmp(r->overrides, b.overrides), "%s", r->overrides);
        CHECK(!strcmp(r->stack, "vllm"), "%s", r->stack);
        CHECK_NEAR(r->th_floor_margin_db, 6.0, 0);
        CHECK_NEAR(r->th_chained_min_cosine, 0.9, 0);
        CHECK(r->stage_yaml && !strcmp(r->stage_yaml, b.stage_yaml), "stage_yaml");
        CHECK(r->stack_yaml && !strcmp(r->stack_yaml, b.stack_yaml), "stack_yaml");
        CHECK(r->config_json && !strcmp(r->config_json, b.config_json), "config_json");
        CHECK(r->hf_quant_config_json == NULL, "absent text stays absent");
        CHECK_EQ_INT(r->n_in, 2);
        CHECK_EQ_INT(r->in[0].rows, 2);
        CHECK_EQ_INT(r->in[0].cols, 3);
        CHECK(r->n_in >= 1 && !memcmp(r->in[0].data, in, sizeof in), "input values");
        CHECK(r->in[0].k == 0 && !r->in[0].idx && !r->in[0].w && !r->in[0].logits, "an input without routing has none");
        CHECK(r->n_in == 2 && r->in[1].k == 2 && r->in[1].idx && !memcmp(r->in[1].idx, route_ids, sizeof route_ids), "routing ids");
        CHECK(r->n_in == 2 && r->in[1].w && !memcmp(r->in[1].w, route_w, sizeof route_w), "routing weights");
        CHECK(r->n_in == 2 && r->in[1].logits && !memcmp(r->in[1].logits, route_logits, sizeof route_logits), "router logits");
        CHECK_NEAR(r->n_in == 2 ? r->in[1].route_scaling : 0, 2.5, 0);
        CHECK_EQ_INT(r->n_tensors, 1);
        CHECK(r->n_tensors == 1 && r->tensors[0].nbytes == 8 && !memcmp(r->tensors[0].data, w, 8), "tensor bytes");
        CHECK(!strcmp(r->tensors[0].dtype, "U8") && r->tensors[0].ndim == 2 && r->tensors[0].shape[1] == 4, "tensor meta");
        CHECK_EQ_INT(r->ntok, 2);
        CHECK_EQ_INT(r->tokens[1], 42);
        CHECK_EQ_INT(r->n_rows, 1);
        CHECK(!strcmp(r->rows[0].verdict, "scale_inverted"), "%s", r->rows[0].verdict);
        CHECK_NEAR(r->rows[0].cosine, 0.25, 0);
    }
    nd_bundle_free(r);

    /* truncated at several lengths */
    FILE *f = fopen(path, "rb");
    static unsigned char buf[1 << 20];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    CHECK(n > 1000, "bundle size %zu", n);
    const double cut[] = {0.1, 0.5, 0.9};
    for (int i = 0; i < 3; i++) {
        f = fopen(bad, "wb");
        fwrite(buf, 1, (size_t)(n * cut[i]), f);
        fclose(f);
        rc = read_code(bad, msg, sizeof msg);
        CHECK(rc == ND_EXIT_BADINPUT && strstr(msg, bad), "truncated at %.0f%%: rc %d: %s", cut[i] * 100, rc, msg);
    }
    /* not HDF5 */
    f = fopen(bad, "wb");
    fputs("{\"not\": \"a bundle\"}\n", f);
    fclose(f);
    rc = read_code(bad, msg, sizeof msg);
    CHECK(rc == ND_EXIT_BADINPUT && strstr(msg, bad), "text file: rc %d: %s", rc, msg);
    /* foreign HDF5: a trace (an unfinished one takes the path only where nothing is there) */
    unlink(bad);
    nd_trace_meta meta = {"0", "ckpt", "compressed-tensors", "r", "exact", "cpu", "cpu", "isolated", "", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    nd_trace_w *tw = NULL;
    rc = nd_trace_create(bad, &meta, tok, 2, &tw, &e);
    if (!rc) rc = nd_trace_finish(tw, NULL, &e);
    CHECK(rc == 0, "trace: %s", e.msg);
    rc = read_code(bad, msg, sizeof msg);
    CHECK(rc == ND_EXIT_BADINPUT && strstr(msg, "not an nvfp4dbg bundle"), "trace file: rc %d: %s", rc, msg);
    /* missing */
    unlink(bad);
    rc = read_code(bad, msg, sizeof msg);
    CHECK(rc == ND_EXIT_BADINPUT && strstr(msg, bad), "missing: rc %d: %s", rc, msg);
    /* routing ids whose rows are not the input's, and a k of 0 */
    /* ... and rows that name one expert twice (the expert's token list would overrun) */
    const hsize_t lie[3][2] = {{3, 2}, {2, 0}, {2, 2}};
    const char *want[3] = {"the input has 2 rows", "k must be 1..4096", "row 0 names expert 0 twice"};
    for (int i = 0; i < 3; i++) {
        rc = nd_bundle_write(bad, &b, &e);
        CHECK(rc == 0, "write: %s", e.msg);
        hid_t hf = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
        CHECK(hf >= 0 && H5Ldelete(hf, "/routing/route/ids", H5P_DEFAULT) >= 0, "cannot edit the bundle");
        hid_t sp = H5Screate_simple(2, lie[i], NULL);
        hid_t ds = H5Dcreate2(hf, "/routing/route/ids", H5T_NATIVE_INT32, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        int32_t zeros[6] = {0};
        CHECK(ds >= 0 && (!lie[i][1] || H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros) >= 0), "cannot write the lying ids");
        H5Dclose(ds);
        H5Sclose(sp);
        H5Fclose(hf);
        rc = read_code(bad, msg, sizeof msg);
        CHECK(rc == ND_EXIT_BADINPUT && strstr(msg, bad) && strstr(msg, want[i]), "lying routing ids %d: rc %d: %s", i, rc, msg);
    }
    /* a tensor whose bytes do not match its dtype and shape */
    b.tensors[0].shape[1] = 5;
    rc = nd_bundle_write(bad, &b, &e);
    CHECK(rc == 0, "write: %s", e.msg);
    rc = read_code(bad, msg, sizeof msg);
    CHECK(rc == ND_EXIT_BADINPUT && strstr(msg, "do not match"), "inconsistent tensor: rc %d: %s", rc, msg);

    unlink(path);
    unlink(bad);
    return nd_test_report("test_bundle_io");
}
