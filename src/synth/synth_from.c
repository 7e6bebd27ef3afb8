/* synth_from.c — see synth_from.h. */
#include "synth/synth_from.h"
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ckpt/ckpt.h"
#include "synth/synth_faults.h"

typedef struct planted {
    sy_fault f;
    nd_module m;
    uint8_t *packed, *sf;      /* changed copies of the module's weight and block scales */
    float wglobal, iglobal;
    int has_input;
} planted;

static int parse(const nd_ckpt *ck, const char *spec, planted *p, nd_err *e) {
    memset(p, 0, sizeof *p);
    const char *mod;
    ND_TRY(sy_fault_parse_spec(spec, &p->f, &mod, e));
    const char *at = mod - 1;
    char path[300];
    snprintf(path, sizeof path, "model.%s", at + 1);
    if (!nd_ckpt_has_module(ck, path)) snprintf(path, sizeof path, "%s", at + 1);
    if (!nd_ckpt_has_module(ck, path))
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: no module '%s' (nor model.%s)", nd_ckpt_dir(ck), at + 1, at + 1);
    ND_TRY(nd_ckpt_module(ck, path, &p->m, e));
    if (p->m.wfmt != ND_WF_NVFP4 || !p->m.weight_scale || !p->m.weight_global)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: module '%s' is not an NVFP4 linear", nd_ckpt_dir(ck), path);
    if (p->m.weight_global->dtype != ND_DT_F32 || (p->m.input_global && p->m.input_global->dtype != ND_DT_F32))
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: %s's global scales are not F32", nd_ckpt_dir(ck), path);
    return 0;
}

static int apply(planted *p, nd_err *e) {
    const nd_module *m = &p->m;
    p->packed = malloc(m->weight->nbytes);
    p->sf = malloc(m->weight_scale->nbytes);
    if (!p->packed || !p->sf) return nd_fail(e, ND_EXIT_INTERNAL, "synth --from: out of memory");
    memcpy(p->packed, m->weight->data, m->weight->nbytes);
    memcpy(p->sf, m->weight_scale->data, m->weight_scale->nbytes);
    memcpy(&p->wglobal, m->weight_global->data, 4);
    p->iglobal = 1.0f;
    if (m->input_global) memcpy(&p->iglobal, m->input_global->data, 4);
    sy_qmod q = {.packed = p->packed, .sf = p->sf, .n = m->out_features, .k = m->in_features,
                 .wglobal = p->wglobal, .iglobal = p->iglobal, .has_input = m->input_global != NULL};
    sy_faults one = {.f = &p->f, .n = 1};
    p->f.param = 0;
    sy_faults_apply(&one, 0, m->conv == ND_CONV_MODELOPT ? ND_SYNTH_MODELOPT : ND_SYNTH_CT, m->path, &q);
    p->wglobal = q.wglobal;
    p->iglobal = q.iglobal;
    p->has_input = q.has_input;
    if (p->f.kind == SY_F_MISSING_INPUT && !m->input_global)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: module '%s' has no input scale to remove", m->path);
    return 0;
}

/* The bytes to write for tensor t: a planted module's changed tensor, NULL to leave it out, or t's own. */
static const void *bytes_for(const nd_tview *t, planted *ps, int n, int *skip) {
    *skip = 0;
    for (int i = 0; i < n; i++) {
        planted *p = &ps[i];
        if (t == p->m.weight) return p->packed;
        if (t == p->m.weight_scale) return p->sf;
        if (t == p->m.weight_global) return &p->wglobal;
        if (t == p->m.input_global) { *skip = !p->has_input; return &p->iglobal; }
    }
    return t->data;
}

static int copy_file(const char *from, const char *to, nd_err *e) {
    FILE *a = fopen(from, "rb");
    if (!a) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot read: %s", from, strerror(errno));
    FILE *b = fopen(to, "wb");
    if (!b) { fclose(a); return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot write: %s", to, strerror(errno)); }
    char buf[1 << 16];
    size_t k;
    int rc = 0;
    while ((k = fread(buf, 1, sizeof buf, a)) > 0)
        if (fwrite(buf, 1, k, b) != k) { rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: write failed", to); break; }
    fclose(a);
    if (fclose(b) && !rc) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: write failed", to);
    return rc;
}

static int prepare_outdir(const char *outdir, nd_err *e) {
    DIR *d = opendir(outdir);
    if (d) {
        struct dirent *de;
        int used = 0;
        while ((de = readdir(d))) used |= strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        closedir(d);
        if (used) return nd_fail(e, ND_EXIT_BADINPUT, "%s: exists and is not empty; synth --from writes only into a new or empty folder", outdir);
        return 0;
    }
    if (mkdir(outdir, 0777)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot create: %s", outdir, strerror(errno));
    return 0;
}

int nd_synth_from(const char *src, const char *outdir, const char *const *injects, int n, nd_err *e) {
    nd_ckpt *ck = NULL;
    planted *ps = calloc((size_t)(n ? n : 1), sizeof *ps);
    nd_st_writer *w = NULL;
    int rc = ps ? 0 : nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (!rc) rc = nd_ckpt_open(src, &ck, e);
    for (int i = 0; !rc && i < n; i++) rc = parse(ck, injects[i], &ps[i], e);
    for (int i = 0; !rc && i < n; i++) rc = apply(&ps[i], e);
    if (!rc) rc = prepare_outdir(outdir, e);
    /* every file but the tensors, as the writer left them */
    DIR *d = rc ? NULL : opendir(src);
    if (!rc && !d) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot list: %s", src, strerror(errno));
    for (struct dirent *de; !rc && d && (de = readdir(d));) {
        const char *nm = de->d_name;
        size_t len = strlen(nm);
        if (nm[0] == '.' || (len > 12 && !strcmp(nm + len - 12, ".safetensors")) || !strcmp(nm, "model.safetensors.index.json"))
            continue;
        char a[1200], b[1200];
        struct stat st;
        snprintf(a, sizeof a, "%s/%s", src, nm);
        if (stat(a, &st) || !S_ISREG(st.st_mode)) continue; /* sub-folders (an original/) are not part of it */
        snprintf(b, sizeof b, "%s/%s", outdir, nm);
        rc = copy_file(a, b, e);
    }
    if (d) closedir(d);
    char out[1200];
    snprintf(out, sizeof out, "%s/model.safetensors", outdir);
    if (!rc) rc = nd_st_writer_open(out, &w, e);
    if (!rc) rc = nd_st_writer_meta(w, "format", "pt", e);
    for (size_t i = 0; !rc && i < nd_ckpt_count(ck); i++) {
        const nd_tview *t = nd_ckpt_at(ck, i);
        int skip;
        const void *data = bytes_for(t, ps, n, &skip);
        if (!skip) rc = nd_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, data, e);
    }
    if (!rc) { rc = nd_st_writer_close(w, e); w = NULL; }
    if (w) nd_st_writer_abort(w);
    if (!rc) {
        sy_faults fs = {.f = NULL, .n = 0};
        sy_fault *list = calloc((size_t)(n ? n : 1), sizeof *list);
        if (!list) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        for (int i = 0; !rc && i < n; i++) list[i] = ps[i].f;
        fs.f = list;
        fs.n = n;
        char side[1200];
        snprintf(side, sizeof side, "%s.faults.json", outdir);
        if (!rc) rc = sy_faults_write(&fs, side, e);
        free(list);
    }
    for (int i = 0; ps && i < n; i++) { free(ps[i].packed); free(ps[i].sf); }
    free(ps);
    if (ck) nd_ckpt_close(ck);
    return rc;
}
