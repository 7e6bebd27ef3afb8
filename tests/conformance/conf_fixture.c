/* conf_fixture.c — see conf_fixture.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "conf_fixture.h"

const char *const conf_models[3] = {"llama", "deepseek_v3", "deepseek_v4"};

void conf_path(char *buf, size_t cap, const char *model, const char *rel) {
    const char *root = getenv("ND_SOURCE_ROOT");
    /* a MODEL with a slash is a fixture folder elsewhere (the real-model tier's cache) */
    if (strchr(model, '/')) snprintf(buf, cap, "%s/%s", model, rel);
    else snprintf(buf, cap, "%s/golden/conformance/%s/%s", root && *root ? root : ".", model, rel);
}

/* MODEL/REL opened as a safetensors file (ckpt 0) or a checkpoint folder (ckpt 1); the error printed */
static void *open_fixture(const char *model, const char *rel, int ckpt) {
    char path[1024];
    conf_path(path, sizeof path, model, rel);
    nd_st_file *f = NULL;
    nd_ckpt *c = NULL;
    nd_err e = {0};
    if (ckpt ? nd_ckpt_open(path, &c, &e) : nd_st_open(path, &f, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return NULL;
    }
    return ckpt ? (void *)c : (void *)f;
}

nd_st_file *conf_open(const char *model, const char *rel) { return open_fixture(model, rel, 0); }
nd_ckpt *conf_ckpt(const char *model, const char *rel) { return open_fixture(model, rel, 1); }

float *conf_floats(const nd_st_file *f, const char *name, int64_t *n) {
    const nd_tview *t = nd_st_find(f, name);
    if (!t) {
        fprintf(stderr, "fixture has no tensor %s\n", name);
        return NULL;
    }
    float *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
    if (!v) return NULL;
    for (int64_t i = 0; i < t->numel; i++) v[i] = nd_tview_get_f32(t, i);
    *n = t->numel;
    return v;
}

int64_t conf_tokens(const char *model, char *buf, size_t cap) {
    nd_st_file *f = conf_open(model, "reference.safetensors");
    if (!f) return 0;
    const nd_tview *t = nd_st_find(f, "input_ids");
    int64_t n = 0;
    size_t o = 0;
    buf[0] = 0;
    if (t && t->dtype == ND_DT_I64) {
        for (int64_t i = 0; i < t->numel && o + 24 < cap; i++, n++) {
            int64_t v;
            memcpy(&v, (const char *)t->data + 8 * i, 8);   /* safetensors data may be unaligned */
            o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? "," : "", (long long)v);
        }
    } else {
        fprintf(stderr, "%s: reference.safetensors has no I64 input_ids\n", model);
    }
    nd_st_close(f);
    return n;
}

void conf_metrics(const float *a, const float *b, int64_t n, double *cosine, double *rel_l2) {
    double ab = 0, aa = 0, bb = 0, ee = 0;
    for (int64_t i = 0; i < n; i++) {
        const double x = a[i], y = b[i];
        ab += x * y;
        aa += x * x;
        bb += y * y;
        ee += (x - y) * (x - y);
    }
    *cosine = (aa > 0 && bb > 0) ? ab / sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
    *rel_l2 = bb > 0 ? sqrt(ee / bb) : (ee > 0 ? INFINITY : 0.0);
}

int conf_system(const char *cmd) {
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}
