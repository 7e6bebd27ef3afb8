/* fuzz_common.c — scratch folder, input files and the error oracle of the harnesses. */
#define _GNU_SOURCE /* nftw */
#include "fuzz_common.h"
#include "ckpt/ckpt.h"
#include "ckpt/findings.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[512];

static int rm_one(const char *p, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb; (void)type; (void)ftw;
    return remove(p);
}

static void cleanup(void) {
    if (g_dir[0]) nftw(g_dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

const char *fz_path(const char *name) {
    static char buf[4][1024];
    static int k;
    if (!g_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(g_dir, sizeof g_dir, "%s/nd_fuzz.XXXXXX", base && base[0] ? base : P_tmpdir);
        if (!mkdtemp(g_dir)) { perror("mkdtemp"); abort(); }
        atexit(cleanup);
    }
    char *p = buf[k++ & 3];
    snprintf(p, 1024, "%s/%s", g_dir, name);
    return p;
}

const char *fz_write(const char *name, const void *data, size_t size) {
    const char *p = fz_path(name);
    FILE *f = fopen(p, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(p);
        abort();
    }
    return p;
}

void fz_remove(const char *name) { unlink(fz_path(name)); }

void fz_fail(const char *file, int line, const char *cond, const char *fmt, ...) {
    fprintf(stderr, "%s:%d: invariant %s violated: ", file, line, cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void fz_check_err(int rc, const nd_err *e, const char *prefix) {
    if (rc == 0) return;
    FZ_ASSERT(rc == e->code, "returned %d but nd_err holds %d (%s)", rc, e->code, e->msg);
    FZ_ASSERT(rc == ND_EXIT_BADINPUT, "bad input gave exit class %d, not 2: %s", rc, e->msg);
    FZ_ASSERT(strncmp(e->msg, prefix, strlen(prefix)) == 0, "message does not name the file %s: %s", prefix,
              e->msg);
}

const char *fz_parse(const char *name, const uint8_t *data, size_t size, fz_loader load, void *out) {
    const char *p = fz_write(name, data, size);
    nd_err e = {0};
    int rc = load(p, out, &e);
    fz_check_err(rc, &e, p);
    return rc ? NULL : p;
}

nd_ckpt *fz_open_ckpt(const char *dir) {
    nd_ckpt *c = NULL;
    nd_err e = {0};
    int rc = nd_ckpt_open(dir, &c, &e);
    fz_check_err(rc, &e, dir);
    return rc ? NULL : c;
}

void fz_check_ckpt(nd_ckpt *c, const char *dir) {
    nd_findings f;
    nd_findings_init(&f);
    nd_scale_stats *stats = NULL;
    nd_err e = {0};
    fz_check_err(nd_ckpt_check(c, &f, &stats, &e), &e, dir);
    for (size_t i = 0; i < nd_ckpt_module_count(c); i++) {
        const char *mp = nd_ckpt_module_path(c, i);
        nd_module m;
        nd_err e2 = {0};
        int r2 = nd_ckpt_module(c, mp, &m, &e2);
        fz_check_err(r2, &e2, dir);
        (void)nd_ckpt_module_ignored(c, mp);
        FZ_ASSERT(nd_ckpt_has_module(c, mp), "module %s has no tensor", mp);
        if (!r2) FZ_ASSERT(m.out_features >= 0 && m.in_features >= 0 && m.weight, "bound module %s", mp);
    }
    free(stats);
    nd_findings_free(&f);
}
