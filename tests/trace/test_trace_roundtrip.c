/* test_trace_roundtrip.c — every field of every row, the root attributes, /tokens, /summary,
 * tensors and routing survive a write and a read; the writer's error paths give exit 2. */
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "nd_test.h"
#include "trace_fixture.h"

/* Same value, NaN equal to NaN (bitwise equality would also do, but this says what we mean). */
static int same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void check_row(const nd_row *a, const nd_row *b) {
    CHECK_EQ_INT(a->index, b->index);
    CHECK_EQ_INT(a->layer, b->layer);
    CHECK(!strcmp(a->name, b->name), "name %s vs %s", a->name, b->name);
    CHECK(!strcmp(a->op, b->op), "op %s vs %s", a->op, b->op);
    CHECK(!strcmp(a->mode, b->mode), "mode %s vs %s", a->mode, b->mode);
    CHECK_EQ_INT(a->quantized, b->quantized);
    CHECK_EQ_INT(a->numel, b->numel);
    CHECK_EQ_INT(a->ref_nan, b->ref_nan);
    CHECK_EQ_INT(a->prod_nan, b->prod_nan);
    CHECK_EQ_INT(a->ref_inf, b->ref_inf);
    CHECK_EQ_INT(a->prod_inf, b->prod_inf);
    CHECK_EQ_INT(a->worst_block, b->worst_block);
    const double av[] = {a->ref_amax, a->prod_amax, a->cosine, a->rel_l2, a->sqnr_db, a->max_abs_err, a->sat_frac,
                         a->zero_block_frac, a->scale_ratio, a->weight_rel_l2, a->floor_sqnr_db, a->scale_mult,
                         a->alpha, a->worst_block_rel, a->topk_agree, a->kl_div, a->top1_agree};
    const double bv[] = {b->ref_amax, b->prod_amax, b->cosine, b->rel_l2, b->sqnr_db, b->max_abs_err, b->sat_frac,
                         b->zero_block_frac, b->scale_ratio, b->weight_rel_l2, b->floor_sqnr_db, b->scale_mult,
                         b->alpha, b->worst_block_rel, b->topk_agree, b->kl_div, b->top1_agree};
    for (size_t i = 0; i < sizeof av / sizeof av[0]; i++) CHECK(same(av[i], bv[i]), "double field %zu: %.17g vs %.17g", i, av[i], bv[i]);
    CHECK(!strcmp(a->verdict, b->verdict), "verdict %s vs %s", a->verdict, b->verdict);
}

static void test_roundtrip(void) {
    enum { N = 150 }; /* more than two chunks of /stages */
    nd_row rows[N];
    for (int i = 0; i < N; i++) rows[i] = fx_row(i);
    rows[5].prod_nan = 12; rows[6].ref_inf = 3; rows[7].prod_inf = -0; rows[8].cosine = NAN;
    rows[9].sqnr_db = INFINITY; rows[10].max_abs_err = -INFINITY;
    snprintf(rows[11].verdict, sizeof rows[11].verdict, "scale_inverted");
    memset(rows[12].name, 'x', sizeof rows[12].name - 1); /* longest name that fits */
    rows[12].name[sizeof rows[12].name - 1] = 0;
    /* garbage after the terminator must not reach the file */
    snprintf(rows[13].op, sizeof rows[13].op, "linear");
    memset(rows[13].op + 7, 'Z', sizeof rows[13].op - 8);

    const char *p = fx_path("roundtrip.h5");
    nd_err e = {0};
    nd_trace_meta m = fx_meta();
    int64_t tok[5] = {0, 1, -5, 129280, (int64_t)1 << 40};
    nd_trace_w *w = NULL;
    CHECK_EQ_INT(nd_trace_create(p, &m, tok, 5, &w, &e), 0);
    for (int i = 0; w && i < N; i++) CHECK_EQ_INT(nd_trace_append(w, &rows[i], &e), 0);
    float ten[2 * 3 * 5];
    for (int i = 0; i < 30; i++) ten[i] = (float)i * 0.5f - 3.0f;
    ten[4] = NAN;
    int64_t shape[3] = {2, 3, 5};
    CHECK_EQ_INT(nd_trace_put_tensor(w, "layers.0.mlp", "ref", ten, 3, shape, &e), 0);
    CHECK_EQ_INT(nd_trace_put_tensor(w, "layers.0.mlp", "prod", ten, 3, shape, &e), 0);
    CHECK(nd_trace_put_tensor(w, "layers.0.mlp", "prod", ten, 3, shape, &e) != 0, "second write of the same tensor");
    CHECK(nd_trace_put_tensor(w, "a/b", "ref", ten, 3, shape, &e) != 0, "stage name with a slash");
    int32_t route[4 * 2] = {1, 7, 3, 2, 0, 5, 6, 4};
    CHECK_EQ_INT(nd_trace_put_routing(w, "layers.0.mlp.gate", "ref", route, 4, 2, &e), 0);
    nd_trace_summary s = fx_summary("diverged", "layers.0.self_attn.q_a_proj.s11", "chained", "scale_inverted");
    CHECK_EQ_INT(nd_trace_finish(w, &s, &e), 0);
    if (e.code) fprintf(stderr, "writer: %s\n", e.msg);

    nd_trace *t = NULL;
    CHECK_EQ_INT(nd_trace_read(p, &t, &e), 0);
    if (!t) { fprintf(stderr, "read: %s\n", e.msg); return; }
    CHECK(!strcmp(t->schema, ND_TRACE_SCHEMA), "schema %s", t->schema);
    CHECK(!strcmp(t->tool_version, m.tool_version), "%s", t->tool_version);
    CHECK(!strcmp(t->checkpoint, m.checkpoint), "%s", t->checkpoint);
    CHECK(!strcmp(t->checkpoint_format, m.checkpoint_format), "%s", t->checkpoint_format);
    CHECK(!strcmp(t->recipe, m.recipe), "%s", t->recipe);
    CHECK(!strcmp(t->stack, m.stack), "%s", t->stack);
    CHECK(!strcmp(t->backend, m.backend), "%s", t->backend);
    CHECK(!strcmp(t->device, m.device), "%s", t->device);
    CHECK(!strcmp(t->modes, m.modes), "%s", t->modes);
    /* ISO-8601 UTC: 2026-01-02T03:04:05Z */
    CHECK(strlen(t->created_utc) == 20 && t->created_utc[4] == '-' && t->created_utc[10] == 'T' &&
          t->created_utc[19] == 'Z', "created_utc %s", t->created_utc);
    CHECK_EQ_INT(t->ntokens, 5);
    for (int i = 0; i < 5 && t->ntokens == 5; i++) CHECK_EQ_INT(t->tokens[i], tok[i]);
    CHECK_EQ_INT(t->nrows, N);
    rows[13].op[6] = 0; /* what the writer must have stored */
    for (int i = 0; i < N && t->nrows == N; i++) check_row(&t->rows[i], &rows[i]);
    CHECK_EQ_INT(t->has_summary, 1);
    CHECK(!strcmp(t->summary.status, "diverged"), "%s", t->summary.status);
    CHECK(!strcmp(t->summary.first_divergence, s.first_divergence), "%s", t->summary.first_divergence);
    CHECK(!strcmp(t->summary.first_divergence_mode, "chained"), "%s", t->summary.first_divergence_mode);
    CHECK(!strcmp(t->summary.cause, "scale_inverted"), "%s", t->summary.cause);
    CHECK(!strcmp(t->summary.message, s.message), "%s", t->summary.message);
    nd_trace_free(t);

    float *back = NULL;
    int nd = 0;
    int64_t sh[ND_TRACE_MAXDIM];
    CHECK_EQ_INT(nd_trace_read_tensor(p, "layers.0.mlp", "prod", &back, &nd, sh, &e), 0);
    CHECK_EQ_INT(nd, 3);
    if (back && nd == 3) {
        CHECK(sh[0] == 2 && sh[1] == 3 && sh[2] == 5, "shape %lld %lld %lld", (long long)sh[0], (long long)sh[1], (long long)sh[2]);
        int ok = 1;
        for (int i = 0; i < 30; i++) ok &= same(back[i], ten[i]);
        CHECK(ok, "tensor values differ");
    }
    free(back);
    int32_t *r = NULL;
    int64_t rt = 0, rk = 0;
    CHECK_EQ_INT(nd_trace_read_routing(p, "layers.0.mlp.gate", "ref", &r, &rt, &rk, &e), 0);
    CHECK(rt == 4 && rk == 2 && r && !memcmp(r, route, sizeof route), "routing differs");
    free(r);
    CHECK_EQ_INT(nd_trace_read_routing(p, "layers.0.mlp.gate", "prod", &r, &rt, &rk, &e), ND_EXIT_BADINPUT);
    CHECK(strstr(e.msg, p) != NULL, "message names the file: %s", e.msg);
}

/* A stage name that does not fit is a caller bug, reported, and the trace stays usable. */
static void test_overlong_name(void) {
    const char *p = fx_path("overlong.h5");
    nd_err e = {0};
    nd_trace_meta m = fx_meta();
    nd_trace_w *w = NULL;
    CHECK_EQ_INT(nd_trace_create(p, &m, NULL, 0, &w, &e), 0);
    nd_row r = fx_row(0);
    memset(r.name, 'y', sizeof r.name);
    CHECK(nd_trace_append(w, &r, &e) != 0, "unterminated name accepted");
    r = fx_row(1);
    CHECK_EQ_INT(nd_trace_append(w, &r, &e), 0);
    CHECK_EQ_INT(nd_trace_finish(w, NULL, &e), 0);
    nd_trace *t = NULL;
    CHECK_EQ_INT(nd_trace_read(p, &t, &e), 0);
    if (t) {
        CHECK_EQ_INT(t->nrows, 1);
        CHECK_EQ_INT(t->ntokens, 0);
        CHECK(!strcmp(t->summary.status, "incomplete"), "status %s", t->summary.status);
    }
    nd_trace_free(t);
}

static void test_unwritable(void) {
    nd_err e = {0};
    nd_trace_meta m = fx_meta();
    nd_trace_w *w = NULL;
    const char *p = fx_path("no-such-dir/x.h5");
    CHECK_EQ_INT(nd_trace_create(p, &m, NULL, 0, &w, &e), ND_EXIT_BADINPUT);
    CHECK(w == NULL && strstr(e.msg, p) && strstr(e.msg, "No such file"), "%s", e.msg);
    if (geteuid() != 0) { /* root ignores directory permissions */
        const char *ro = fx_path("readonly");
        mkdir(ro, 0555);
        char q[700];
        snprintf(q, sizeof q, "%s/x.h5", ro);
        CHECK_EQ_INT(nd_trace_create(q, &m, NULL, 0, &w, &e), ND_EXIT_BADINPUT);
        CHECK(strstr(e.msg, "Permission denied") != NULL, "%s", e.msg);
    }
}

/* A full disk, simulated with RLIMIT_FSIZE in a child: the append that hits it fails with exit 2
 * and says why, and the rows before it stay readable. */
static void test_disk_full(void) {
    const char *p = fx_path("full.h5");
    int pfd[2];
    if (pipe(pfd) != 0) return;
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {256 * 1024, 256 * 1024};
        setrlimit(RLIMIT_FSIZE, &rl);
        nd_err e = {0};
        nd_trace_meta m = fx_meta();
        nd_trace_w *w = NULL;
        int rc = nd_trace_create(p, &m, NULL, 0, &w, &e);
        int i = 0;
        for (; !rc && i < 100000; i++) {
            nd_row r = fx_row(i);
            rc = nd_trace_append(w, &r, &e);
        }
        char msg[1100];
        int n = snprintf(msg, sizeof msg, "%d %d %s", rc, i - 1, e.msg);
        if (write(pfd[1], msg, (size_t)n) < 0) _exit(4);
        nd_err e2 = {0};
        nd_trace_finish(w, NULL, &e2);
        _exit(0);
    }
    close(pfd[1]);
    char buf[1200] = "";
    ssize_t n = read(pfd[0], buf, sizeof buf - 1);
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    buf[n > 0 ? n : 0] = 0;
    int rc = -1, written = -1;
    sscanf(buf, "%d %d", &rc, &written);
    CHECK_EQ_INT(rc, ND_EXIT_BADINPUT);
    CHECK(strstr(buf, p) && strstr(buf, "File too large"), "message: %s", buf);
    fprintf(stderr, "disk full after %d rows: %s\n", written, buf);
    nd_err e = {0};
    nd_trace *t = NULL;
    int rrc = nd_trace_read(p, &t, &e);
    /* the file may be unreadable if the limit hit the metadata; if it opens, its rows are intact */
    if (rrc == 0) {
        CHECK(t->nrows >= written - 1 && t->nrows <= written + 1, "%lld rows of %d", (long long)t->nrows, written);
        int ok = 1;
        for (int64_t i = 0; i < t->nrows; i++) { nd_row r = fx_row((int)i); ok &= !strcmp(r.name, t->rows[i].name); }
        CHECK(ok, "rows differ after disk full");
    } else {
        CHECK_EQ_INT(rrc, ND_EXIT_BADINPUT);
    }
    nd_trace_free(t);
}

int main(void) {
    test_roundtrip();
    test_overlong_name();
    test_unwritable();
    test_disk_full();
    return nd_test_report("test_trace_roundtrip");
}
