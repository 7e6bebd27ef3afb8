/* synth_from.c — see synth_from.h. */
#include "recipe/recipe.h"
#include "util/infile.h"
#include "util/outfile.h"
#include "util/term.h"
#include <unistd.h>
#include <fcntl.h>
#include "synth/synth_outdir.h"
#include "synth/synth_from.h"
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ckpt/ckpt.h"
#include "pipeline/scale_repr.h"
#include "synth/synth_faults.h"
#include "synth/synth_kv.h"
#include "synth/synth_scales.h"
#include "synth/synth_static.h"

/* One module some fault targets: its tensors in CKPT and the changed copies written instead.
 * Faults on the same module act on one state in command-line order, as in synth's own
 * checkpoints (sy_faults_apply with the target's index as the fault's param). */
typedef struct target {
    nd_module m;
    uint8_t *packed, *sf;      /* changed copies of the module's weight and block scales */
    int64_t sf_shape[2];       /* the block scales' stored shape (scale-row-stride pads the rows) */
    float wglobal, iglobal;
    int has_input;
    const nd_tview *fused_sf;  /* MXFP4: the stored [E, N, K/32] scales of fused experts the module's are a slice of */
} target;

static int one_f32(const nd_tview *t) { return t->dtype == ND_DT_F32 && t->numel == 1 && t->nbytes == 4; }

/* The stored tensor whose bytes hold view v (gpt-oss's fused [E, N, K/32] scales of an expert's slice). */
static const nd_tview *holder(const nd_ckpt *ck, const nd_tview *v) {
    const char *p = v->data;
    for (size_t j = 0; j < nd_ckpt_count(ck); j++) {
        const nd_tview *t = nd_ckpt_at(ck, j);
        const char *d = t->data;
        if (t != v && p >= d && p + v->nbytes <= d + t->nbytes) return t;
    }
    return NULL;
}

/* A fault on an MXFP4 module: only its E8M0 bytes written with another bias (C26), in a tensor of their
 * own or in their slice of gpt-oss's fused experts (one expert per fused tensor). */
static int mx_target(const nd_ckpt *ck, const char *spec, sy_fault *f, const char *path, target *ts, int i, nd_err *e) {
    const nd_module *m = &ts[i].m;
    if (f->kind != SY_F_SCALE_ENCODING || (f->value != ND_SF_E8M0_B125 && f->value != ND_SF_E8M0_B128))
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: --inject '%s': %s is MXFP4: the faults that apply to it are "
                       "scale-encoding=e8m0_bias125 and scale-encoding=e8m0_bias128", spec, path);
    int stored = 0;
    for (size_t j = 0; j < nd_ckpt_count(ck) && !stored; j++) stored = nd_ckpt_at(ck, j) == m->weight_scale;
    if (m->weight_scale->nbytes != (size_t)(m->out_features * (m->in_features / 32)))
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: %s's E8M0 scales are not [%lld, %lld]", nd_ckpt_dir(ck), path,
                       (long long)m->out_features, (long long)(m->in_features / 32));
    if (!stored) {
        const nd_tview *h = holder(ck, m->weight_scale);
        if (!h)
            return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: %s's E8M0 scales are in no stored tensor", nd_ckpt_dir(ck), path);
        for (int j = 0; j < i; j++)
            if (ts[j].fused_sf == h)
                return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: --inject '%s': %s and %s are slices of the same fused "
                               "%s; plant one expert of it per run", spec, ts[j].m.path, path, h->name);
        ts[i].fused_sf = h;
    }
    f->param = i;
    return 0;
}

/* Parse spec into f and bind its module, adding a target for a module not seen before. */
static int parse(const nd_ckpt *ck, const char *spec, sy_fault *f, target *ts, int *nt, nd_err *e) {
    const char *mod;
    ND_TRY(sy_fault_parse_spec(spec, f, &mod, e));
    if (sy_static_fault(f->kind)) { /* config, names, precision of a module (synth_static.c) */
        f->param = -1;
        return 0;
    }
    if (sy_kv_fault(f->kind)) { /* an attention module's KV-cache scales (synth_kv.c) */
        char attn[300];
        f->param = -1;
        return sy_kv_module(ck, spec, mod, attn, sizeof attn, e);
    }
    char path[300], hint[360];
    if (!sy_module_path(ck, mod, path, sizeof path))
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: no module '%s' (nor model.%s)%s", nd_ckpt_dir(ck), mod, mod,
                       sy_module_hint(ck, mod, hint, sizeof hint));
    int i;
    for (i = 0; i < *nt; i++)
        if (!strcmp(ts[i].m.path, path)) break;
    if (i == *nt) {
        target *t = &ts[i];
        memset(t, 0, sizeof *t);
        ND_TRY(nd_ckpt_module(ck, path, &t->m, e));
        (*nt)++;
        const nd_module *m = &t->m;
        if (m->wfmt == ND_WF_MXFP4) return mx_target(ck, spec, f, path, ts, i, e);
        if (m->wfmt != ND_WF_NVFP4 || !m->weight_scale || !m->weight_global)
            return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: module '%s' is not an NVFP4 linear", nd_ckpt_dir(ck), path);
        if (!one_f32(m->weight_global) || (m->input_global && !one_f32(m->input_global)))
            return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: %s's global scales are not single F32 values", nd_ckpt_dir(ck), path);
        if (m->weight->nbytes != (size_t)(m->out_features * (m->in_features / 2)) ||
            m->weight_scale->nbytes != (size_t)(m->out_features * (m->in_features / m->block)))
            return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: %s's packed weight or block scales have an unexpected size", nd_ckpt_dir(ck), path);
    }
    if (ts[i].m.wfmt == ND_WF_MXFP4) return mx_target(ck, spec, f, path, ts, i, e);
    if (f->kind == SY_F_SCALE_ENCODING && f->value != ND_SF_E8M0)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: --inject '%s': %s is NVFP4: its E4M3 bytes are written as e8m0, "
                       "the E8M0 biases are an MXFP4 weight's", spec, path);
    /* block scales per 32 (W4A8_NVFP4_FP8): only the faults that leave the block-scale bytes as they
     * are (globals, input scales, codes, names) are planted; the others address 16-blocks */
    if (ts[i].m.block != 16) {
        static const int keep32[] = {SY_F_INPUT_INVERTED, SY_F_INPUT_MUL, SY_F_INPUT_INF, SY_F_WGLOBAL_ZERO, SY_F_WGLOBAL_NEGATIVE, SY_F_NIBBLE_SWAP,
                                     SY_F_FUSED_MISMATCH, SY_F_MISSING_INPUT, SY_F_WGLOBAL_MUL, SY_F_WEIGHT_MUL,
                                     SY_F_SCALE_RENAMED, SY_F_WSCALE_RENAMED, SY_F_CONFIG_IGNORE, SY_F_GATE_UP_SWAP,
                                     SY_F_SCALE_MISSING_EXPERT};
        int ok = 0;
        for (size_t k = 0; k < sizeof keep32 / sizeof keep32[0] && !ok; k++) ok = (int)f->kind == keep32[k];
        if (!ok)
            return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: --inject '%s': %s holds block scales per %d (W4A8_NVFP4_FP8); "
                           "the faults that rewrite block scales are planted in 16-blocks only", spec, path, ts[i].m.block);
    }
    if (sy_scale_fault(f->kind)) ND_TRY(sy_scale_fault_check(f, ts[i].m.out_features, ts[i].m.in_features, spec, e));
    if (f->kind == SY_F_MISSING_INPUT && !ts[i].m.input_global)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: module '%s' has no input scale to remove", nd_ckpt_dir(ck), path);
    /* a weight-only module (W4A16) has no input scale to change: the fault list would name one */
    if ((f->kind == SY_F_INPUT_INVERTED || f->kind == SY_F_INPUT_MUL || f->kind == SY_F_INPUT_INF) && !ts[i].m.input_global)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: module '%s' has no input scale (weights only) for --inject '%s'",
                       nd_ckpt_dir(ck), path, spec);
    f->param = i;
    return 0;
}

/* An MXFP4 target's E8M0 bytes rewritten as a writer with exponent bias 125 (127 + floor(log2) - 2,
 * compressed-tensors 0.13) or 128 stores them: read with OCP's 127 the weight is 4x too small or 2x
 * too large. Bytes clamp to [0, 254]; 0xFF (NaN) stays. */
static int apply_mx(target *t, long idx, sy_faults *fs, nd_err *e) {
    const nd_module *m = &t->m;
    t->sf_shape[0] = m->out_features;
    t->sf_shape[1] = m->in_features / 32;
    t->packed = malloc(m->weight->nbytes + 1);
    /* a fused slice: the whole stored tensor is copied and written, the slice's bytes changed */
    const nd_tview *whole = t->fused_sf ? t->fused_sf : m->weight_scale;
    t->sf = malloc(whole->nbytes + 1);
    if (!t->packed || !t->sf) return nd_fail(e, ND_EXIT_INTERNAL, "synth --from: out of memory");
    memcpy(t->packed, m->weight->data, m->weight->nbytes);
    memcpy(t->sf, whole->data, whole->nbytes);
    uint8_t *sf = t->sf + ((const char *)m->weight_scale->data - (const char *)whole->data);
    for (int j = 0; j < fs->n; j++) {
        sy_fault *f = &fs->f[j];
        if (f->param != idx || f->kind != SY_F_SCALE_ENCODING) continue;
        const int delta = f->value == ND_SF_E8M0_B125 ? -2 : 1;
        f->count = 0;
        for (size_t b = 0; b < m->weight_scale->nbytes; b++) {
            if (sf[b] == 0xff) continue;
            const int v = sf[b] + delta, c = v < 0 ? 0 : v > 254 ? 254 : v;
            f->count += c != sf[b];
            sf[b] = (uint8_t)c;
        }
        snprintf(f->tensor, sizeof f->tensor, "%s", m->weight_scale->name);
        f->applied = 1;
    }
    return 0;
}

/* Copy the target's on-disk values and apply every fault aimed at it, in command-line order. */
static int apply(target *t, long idx, sy_faults *fs, nd_err *e) {
    const nd_module *m = &t->m;
    if (m->wfmt == ND_WF_MXFP4) return apply_mx(t, idx, fs, e);
    const int64_t nb = m->in_features / m->block, cols = sy_faults_sf_cols(fs, idx, nb);
    t->sf_shape[0] = m->out_features;
    t->sf_shape[1] = cols;
    t->packed = malloc(m->weight->nbytes);
    t->sf = calloc((size_t)(m->out_features * cols) + 1, 1);
    if (!t->packed || !t->sf) return nd_fail(e, ND_EXIT_INTERNAL, "synth --from: out of memory");
    memcpy(t->packed, m->weight->data, m->weight->nbytes);
    memcpy(t->sf, m->weight_scale->data, m->weight_scale->nbytes);
    memcpy(&t->wglobal, m->weight_global->data, 4);
    t->iglobal = 1.0f;
    if (m->input_global) memcpy(&t->iglobal, m->input_global->data, 4);
    sy_qmod q = {.packed = t->packed, .sf = t->sf, .n = m->out_features, .k = m->in_features,
                 .wglobal = t->wglobal, .iglobal = t->iglobal, .has_input = m->input_global != NULL};
    sy_faults_apply(fs, idx, m->conv == ND_CONV_MODELOPT ? ND_SYNTH_MODELOPT : ND_SYNTH_CT, m->path, &q);
    ND_TRY(sy_faults_stored_ok(fs, idx, e));
    t->wglobal = q.wglobal;
    t->iglobal = q.iglobal;
    t->has_input = q.has_input;
    return 0;
}

/* The shape to write tensor v with: a target's block scales as they are now stored, else v's own. */
static const int64_t *shape_for(const nd_tview *v, const target *ts, int n) {
    for (int i = 0; i < n; i++)
        if (v == ts[i].m.weight_scale) return ts[i].sf_shape;
    return v->shape;
}

/* The bytes to write for tensor v: a target's changed tensor, NULL to leave it out, or v's own. */
static const void *bytes_for(const nd_tview *v, target *ts, int n, int *skip) {
    *skip = 0;
    for (int i = 0; i < n; i++) {
        target *t = &ts[i];
        if (v == t->m.weight) return t->packed;
        if (v == t->m.weight_scale || (t->fused_sf && v == t->fused_sf)) return t->sf;
        if (v == t->m.weight_global) return &t->wglobal;
        if (v == t->m.input_global) { *skip = !t->has_input; return &t->iglobal; }
    }
    return v->data;
}

/* Copy a regular file of the source checkpoint; the copy never gets a wider mode than its source
 * (created with the source's permission bits, the umask applied). */
static int copy_file(const char *from, const char *to, mode_t mode, nd_err *e) {
    int a = open(from, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (a < 0) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot read: %s", from, strerror(errno));
    struct stat st;
    if (fstat(a, &st) || !S_ISREG(st.st_mode)) { close(a); return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file; not copied", from); }
    int b = open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0666);
    if (b < 0) { const int err = errno; close(a); return nd_fail(e, nd_io_exit(err), "%s: cannot write: %s%s", to, strerror(err), nd_io_hint(err)); }
    char buf[1 << 16];
    ssize_t k;
    int rc = 0;
    while (!rc && (k = read(a, buf, sizeof buf)) != 0) {
        if (k < 0) { if (errno == EINTR) continue; rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: read error: %s", from, strerror(errno)); break; }
        for (ssize_t off = 0; !rc && off < k;) {
            ssize_t w = write(b, buf + off, (size_t)(k - off));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) rc = nd_fail(e, nd_io_exit(errno), "%s: write failed: %s%s", to, strerror(errno), nd_io_hint(errno));
            else off += w;
        }
    }
    close(a);
    if (close(b) && !rc) rc = nd_fail(e, nd_io_exit(errno), "%s: write failed: %s%s", to, strerror(errno), nd_io_hint(errno));
    return rc;
}

/* The source's weight files (*.safetensors, one level): each must lie inside the source (a shard
 * linked anywhere but a Hugging Face cache's blobs/ is refused: synth copies the weights into a
 * checkpoint a user shares); *wmode gets the union of their permission bits. */
static int source_weights(const char *src, mode_t *wmode, nd_err *e) {
    *wmode = 0;
    DIR *d = opendir(src);
    int rc = 0;
    for (struct dirent *de; !rc && d && (de = readdir(d));) {
        const size_t len = strlen(de->d_name);
        if (len <= 12 || strcmp(de->d_name + len - 12, ".safetensors")) continue;
        char p[2200];
        struct stat sw;
        snprintf(p, sizeof p, "%s/%s", src, de->d_name);
        rc = nd_member_link_ok(src, p, e);
        if (!rc && stat(p, &sw) == 0 && S_ISREG(sw.st_mode)) *wmode |= sw.st_mode & 0777;
    }
    if (d) closedir(d);
    return rc;
}

/* The new checkpoint is never more open than its source: the folder takes at most the source
 * folder's permission bits, and the files synth writes itself (the weights, its manifest) at most
 * wmode, the source weights' (copies keep their own source's bits, copy_file). */
static void narrow_modes(const char *src, const char *stage, mode_t wmode) {
    struct stat sd, st;
    if (stat(src, &sd) == 0 && stat(stage, &st) == 0) (void)chmod(stage, st.st_mode & sd.st_mode & 07777);
    if (!wmode) return;
    const char *own[] = {"model.safetensors", SY_OUTDIR_MANIFEST};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        char p[2200];
        snprintf(p, sizeof p, "%s/%s", stage, own[i]);
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) (void)chmod(p, st.st_mode & wmode);
    }
}

int nd_synth_from(const char *src, const char *outdir_arg, const char *const *injects, int n, int force, nd_err *e) {
    char outdir[1024];
    size_t ol = strlen(outdir_arg);
    while (ol > 1 && outdir_arg[ol - 1] == '/') ol--;
    if (!ol || ol >= sizeof outdir) return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: bad output directory '%s'", outdir_arg);
    memcpy(outdir, outdir_arg, ol);
    outdir[ol] = 0;

    nd_ckpt *ck = NULL;
    nd_st_writer *w = NULL;
    sy_faults fs = {.f = calloc((size_t)(n ? n : 1), sizeof(sy_fault)), .n = 0};
    target *ts = calloc((size_t)(n ? n : 1), sizeof *ts);
    int nt = 0;
    int rc = fs.f && ts ? 0 : nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    mode_t wmode = 0;
    if (!rc) rc = source_weights(src, &wmode, e);
    if (!rc) rc = nd_ckpt_open(src, &ck, e);
    for (int i = 0; !rc && i < n; i++) {
        rc = parse(ck, injects[i], &fs.f[i], ts, &nt, e);
        if (!rc) fs.n++;
    }
    if (!rc) rc = sy_faults_stride_last(&fs, e);
    for (int i = 0; !rc && i < nt; i++) rc = apply(&ts[i], i, &fs, e);
    sy_kv_edits *kv = rc ? NULL : calloc(1, sizeof *kv);
    if (!rc && !kv) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (!rc) rc = sy_kv_plan(ck, src, fs.f, fs.n, kv, e);
    sy_static sedits = {0};
    if (!rc) rc = sy_static_plan(ck, fs.f, fs.n, &sedits, e);
    char side[1100], stage[1200];
    snprintf(side, sizeof side, "%s.faults.json", outdir);
    /* the source checkpoint (and the recipe folder) are inputs: the fault list never replaces a file of them */
    const char *inputs[2] = {src, nd_recipe_dir()};
    const nd_out_rules side_rules = {.what = "fault list", .inputs = inputs, .n_inputs = 2, .force = force,
                                     .ours = sy_faults_is_ours};
    int slot = -1, staged = 0;
    if (!rc) rc = sy_outdir_check(outdir, force, inputs, 2, e);
    /* everything goes into a staging folder beside OUTDIR, renamed onto it when complete */
    if (!rc) { rc = sy_stage_begin(outdir, stage, sizeof stage, &slot, e); staged = !rc; }
    if (!rc) rc = nd_out_check(side, &side_rules, e);
    /* every file but the tensors, as the writer left them; links only within the checkpoint */
    DIR *d = rc ? NULL : opendir(src);
    if (!rc && !d) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot list: %s", src, strerror(errno));
    for (struct dirent *de; !rc && d && (de = readdir(d));) {
        const char *nm = de->d_name;
        size_t len = strlen(nm);
        if (!strcmp(nm, ".") || !strcmp(nm, "..") || (len > 12 && !strcmp(nm + len - 12, ".safetensors")) ||
            !strcmp(nm, "model.safetensors.index.json") || !strcmp(nm, SY_OUTDIR_MANIFEST))
            continue;
        char a[2200], b[2400];
        struct stat st;
        snprintf(a, sizeof a, "%s/%s", src, nm);
        if ((rc = nd_member_link_ok(src, a, e))) break;
        if (stat(a, &st)) continue;
        if (S_ISDIR(st.st_mode)) continue; /* sub-folders (an original/) are not part of it */
        /* synth's manifest records one name a line: a name holding a control character (a newline)
         * could not be recorded, and a later --force would refuse synth's own output */
        int ctl = 0;
        for (const unsigned char *q = (const unsigned char *)nm; *q && !ctl; q++) ctl = *q < 0x20 || *q == 0x7f;
        if (ctl) {
            char shown[1200];
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s/%s: a file name with a control character; synth --from does not copy it "
                         "(rename or remove it in the source)", src, nd_term_safe(nm, shown, sizeof shown));
            break;
        }
        if (!S_ISREG(st.st_mode)) { rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file (a FIFO, device or socket); not copied", a); break; }
        snprintf(b, sizeof b, "%s/%s", stage, nm);
        rc = copy_file(a, b, st.st_mode, e);
    }
    if (d) closedir(d);
    char out[1300];
    snprintf(out, sizeof out, "%s/model.safetensors", stage);
    if (!rc) rc = nd_st_writer_open(out, &w, e);
    if (!rc) rc = nd_st_writer_meta(w, "format", "pt", e);
    for (size_t i = 0; !rc && i < nd_ckpt_count(ck); i++) {
        const nd_tview *t = nd_ckpt_at(ck, i);
        int skip;
        const void *data = bytes_for(t, ts, nt, &skip), *kvb = sy_kv_bytes_for(kv, t);
        if (kvb) data = kvb;
        const sy_static_edit *se = sy_static_for(&sedits, t);
        if (se && se->drop) continue;
        if (se) rc = nd_st_writer_add(w, se->name, se->dtype, se->ndim, se->shape, se->data == t->data ? data : se->data, e);
        else if (!skip) rc = nd_st_writer_add(w, t->name, t->dtype, t->ndim, shape_for(t, ts, nt), data, e);
    }
    if (!rc) rc = sy_static_add_new(&sedits, w, e);
    if (!rc) rc = sy_kv_add_new(kv, w, e);
    if (!rc) { rc = nd_st_writer_close(w, e); w = NULL; }
    if (!rc) rc = sy_kv_announce(kv, ck, stage, e);
    if (!rc) rc = sy_static_config(&sedits, stage, e);
    if (w) nd_st_writer_abort(w);
    if (!rc) rc = sy_outdir_record(stage, e);
    if (!rc) narrow_modes(src, stage, wmode);
    if (!rc) { rc = sy_stage_commit(stage, slot, outdir, force, e); staged = 0; }
    if (staged) { nd_err_swap(e, stage, outdir); sy_stage_abort(stage, slot); }
    if (!rc) rc = sy_faults_write(&fs, side, e);
    for (int i = 0; ts && i < nt; i++) { free(ts[i].packed); free(ts[i].sf); }
    free(ts);
    free(kv);
    sy_static_free(&sedits);
    free(fs.f);
    if (ck) nd_ckpt_close(ck);
    return rc;
}
