/* ckpt.c — a checkpoint folder: config.json, the quantization config, and model.safetensors or the
 * shards named by model.safetensors.index.json. Other files and folders (an `original/` copy of
 * the unquantized model, tokenizer files) are not read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "util/json_load.h"
#include "ckpt/ckpt_internal.h"
#include "util/infile.h"

int nd_natural_cmp(const char *a, const char *b) {
    while (*a && *b) {
        if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
            const char *x = a, *y = b;
            while (*x == '0') x++;
            while (*y == '0') y++;
            size_t lx = strspn(x, "0123456789"), ly = strspn(y, "0123456789");
            if (lx != ly) return lx < ly ? -1 : 1;
            int c = strncmp(x, y, lx);
            if (c) return c;
            a = x + lx;
            b = y + ly;
            continue;
        }
        if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

static int tv_cmp(const void *a, const void *b) {
    return strcmp((*(const nd_tview *const *)a)->name, (*(const nd_tview *const *)b)->name);
}
static int str_natural(const void *a, const void *b) {
    return nd_natural_cmp(*(char *const *)a, *(char *const *)b);
}

void nd_ckpt_close(nd_ckpt *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n_files; i++) nd_st_close(c->files[i]);
    free(c->files);
    free(c->tensors);
    for (size_t i = 0; i < c->n_owned; i++) free(c->owned[i]);
    free(c->owned);
    for (size_t i = 0; i < c->n_modules; i++) free(c->modules[i]);
    free(c->modules);
    nd_ckpt_virt_free(c);
    nd_cfg_free(&c->cfg);
    nd_qcfg_free(&c->q);
    free(c->dir);
    free(c);
}

static int add_file(nd_ckpt *c, const char *path, nd_err *e) {
    nd_st_file **nf = realloc(c->files, (c->n_files + 1) * sizeof *nf);
    if (!nf) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", path);
    c->files = nf;
    ND_TRY(nd_st_open(path, &c->files[c->n_files], e));
    c->n_files++;
    return 0;
}

static int shard_name_ok(const char *s) {
    return s[0] && !strchr(s, '/') && !strstr(s, "..") && strcmp(s, ".") != 0;
}

static int load_index(nd_ckpt *c, const char *ipath, nd_err *e) {
    json_error_t jerr;
    ND_TRY(nd_input_regular(ipath, e));
    json_t *root = nd_json_load_file(ipath, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not valid JSON (line %d: %s)", ipath, jerr.line, jerr.text);
    int rc = 0;
    json_t *wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    const char **shards = NULL;
    size_t ns = 0;
    if (!json_is_object(wm)) { rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: missing object \"weight_map\"", ipath); goto out; }
    shards = calloc(json_object_size(wm) + 1, sizeof *shards);
    if (!shards) { rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", ipath); goto out; }
    const char *k;
    json_t *v;
    json_object_foreach(wm, k, v) {
        if (!json_is_string(v)) { rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': shard name is not a string", ipath, k); goto out; }
        const char *s = json_string_value(v);
        if (!shard_name_ok(s)) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': shard name \"%s\" is not a plain file name in the folder", ipath, k, s);
            goto out;
        }
        size_t i = 0;
        while (i < ns && strcmp(shards[i], s)) i++;
        if (i == ns) shards[ns++] = s;
    }
    for (size_t i = 0; i < ns; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", c->dir, shards[i]);
        struct stat st;
        if (stat(p, &st) != 0) { rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: shard \"%s\" named in %s is missing", p, shards[i], ipath); goto out; }
        if ((rc = add_file(c, p, e))) goto out;
    }
    json_object_foreach(wm, k, v) {
        const char *s = json_string_value(v);
        size_t i = 0;
        while (i < ns && strcmp(shards[i], s)) i++;
        if (!nd_st_find(c->files[i], k)) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s' is mapped to this shard by %s but is not in it",
                         c->files[i]->path, k, ipath);
            goto out;
        }
    }
out:
    free(shards);
    json_decref(root);
    return rc;
}

/* A tensor suffix that only a quantized linear has (so its prefix is a module even without a weight). */
static const char *const quant_suffixes[] = {
    "weight_packed", "weight_scale", "weight_global_scale", "input_global_scale", "weight_scale_2",
    "input_scale", "weight_scale_inv",
};

static int find_modules(nd_ckpt *c, nd_err *e) {
    c->modules = calloc(c->n_tensors + c->n_virt + 1, sizeof *c->modules);
    if (!c->modules) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", c->dir);
    for (size_t i = 0; i < c->n_tensors + c->n_virt; i++) {
        /* the stored tensors, then the per-expert views of fused MXFP4 experts */
        const nd_tview *t = i < c->n_tensors ? c->tensors[i] : c->virt_sorted[i - c->n_tensors];
        const char *dot = strrchr(t->name, '.');
        if (!dot) continue;
        const char *suf = dot + 1;
        int is_mod = strcmp(suf, "weight") == 0 && t->ndim == 2;
        for (size_t s = 0; !is_mod && s < sizeof quant_suffixes / sizeof *quant_suffixes; s++)
            is_mod = strcmp(suf, quant_suffixes[s]) == 0;
        if (!is_mod) continue;
        size_t pl = (size_t)(dot - t->name);
        int dup = 0;
        /* tensors are sorted by name, so a module's tensors are near each other but interleaved with
         * longer names ("x.weight" < "x.y.weight" < "x.weight_scale"): check the recent ones */
        for (size_t j = c->n_modules; j-- > 0 && j + 64 > c->n_modules;)
            if (strlen(c->modules[j]) == pl && strncmp(c->modules[j], t->name, pl) == 0) { dup = 1; break; }
        if (dup) continue;
        if (!(c->modules[c->n_modules] = strndup(t->name, pl))) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", c->dir);
        c->n_modules++;
    }
    qsort(c->modules, c->n_modules, sizeof *c->modules, str_natural);
    /* the window above may miss a far repeat: drop adjacent duplicates after sorting */
    size_t w = 0;
    for (size_t i = 0; i < c->n_modules; i++) {
        if (w && strcmp(c->modules[w - 1], c->modules[i]) == 0) { free(c->modules[i]); continue; }
        c->modules[w++] = c->modules[i];
    }
    c->n_modules = w;
    return 0;
}

static int open_impl(nd_ckpt *c, const char *dir, nd_err *e) {
    struct stat st;
    if (stat(dir, &st) != 0) return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a checkpoint folder (not a directory)", dir);
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    ND_TRY(nd_cfg_parse(p, &c->cfg, e));
    ND_TRY(nd_qcfg_load(dir, &c->cfg, &c->q, e));
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    if (stat(p, &st) == 0) {
        ND_TRY(load_index(c, p, e));
        /* model.safetensors beside an index that does not name it: transformers loads it (it looks
         * for the single file first), vLLM the index's shards; which model is this? */
        char single[4200];
        snprintf(single, sizeof single, "%s/model.safetensors", dir);
        int named = 0;
        for (size_t i = 0; i < c->n_files && !named; i++) {
            const char *f = c->files[i]->path, *sl = strrchr(f, '/');
            named = !strcmp(sl ? sl + 1 : f, "model.safetensors");
        }
        if (!named && lstat(single, &st) == 0)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: holds both model.safetensors and model.safetensors.index.json, whose shards are "
                           "others: transformers loads model.safetensors, vLLM the index's shards; remove the one that is not "
                           "the checkpoint", dir);
    } else {
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        if (stat(p, &st) != 0)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: no model.safetensors or model.safetensors.index.json", dir);
        ND_TRY(add_file(c, p, e));
    }
    size_t n = 0;
    for (size_t i = 0; i < c->n_files; i++) n += nd_st_count(c->files[i]);
    c->tensors = malloc((n ? n : 1) * sizeof *c->tensors);
    if (!c->tensors) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", dir);
    for (size_t i = 0; i < c->n_files; i++)
        for (size_t j = 0; j < nd_st_count(c->files[i]); j++) c->tensors[c->n_tensors++] = nd_st_at(c->files[i], j);
    qsort(c->tensors, c->n_tensors, sizeof *c->tensors, tv_cmp);
    for (size_t i = 1; i < c->n_tensors; i++)
        if (strcmp(c->tensors[i - 1]->name, c->tensors[i]->name) == 0)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s' is also in %s", c->tensors[i]->file,
                           c->tensors[i]->name, c->tensors[i - 1]->file);
    ND_TRY(nd_ckpt_expand_dense_experts(c, e));
    ND_TRY(nd_ckpt_expand_mx_experts(c, e));
    return find_modules(c, e);
}

int nd_ckpt_open(const char *dir, nd_ckpt **out, nd_err *e) {
    nd_err local;
    if (!e) e = &local;
    *out = NULL;
    nd_ckpt *c = calloc(1, sizeof *c);
    if (!c || !(c->dir = strdup(dir))) { free(c); return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", dir); }
    size_t dl = strlen(c->dir);
    while (dl > 1 && c->dir[dl - 1] == '/') c->dir[--dl] = 0;
    /* no file is read through a link out of the folder (util/infile.h) */
    int rc = nd_dir_links_ok(c->dir, e);
    if (!rc) rc = open_impl(c, c->dir, e);
    if (rc) { nd_ckpt_close(c); return rc; }
    *out = c;
    return 0;
}

const char *nd_ckpt_dir(const nd_ckpt *c) { return c->dir; }
const nd_model_cfg *nd_ckpt_config(const nd_ckpt *c) { return &c->cfg; }
nd_ckpt_fmt nd_ckpt_format(const nd_ckpt *c) { return c->q.fmt; }

const char *nd_ckpt_format_str(const nd_ckpt *c) {
    switch (c->q.fmt) {
    case ND_CKPT_COMPRESSED_TENSORS: return "compressed-tensors";
    case ND_CKPT_MODELOPT: return "modelopt";
    case ND_CKPT_FP8: return "fp8";
    case ND_CKPT_MXFP4: return "mxfp4";
    case ND_CKPT_UNQUANTIZED: break;
    }
    return "unquantized";
}

size_t nd_ckpt_count(const nd_ckpt *c) { return c->n_tensors; }
const nd_tview *nd_ckpt_at(const nd_ckpt *c, size_t i) { return i < c->n_tensors ? c->tensors[i] : NULL; }

size_t nd_views_lower_bound(const nd_tview **v, size_t n, const char *key) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(v[mid]->name, key) < 0) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* First index whose name is >= key. */
static size_t lower_bound(const nd_ckpt *c, const char *key) { return nd_views_lower_bound(c->tensors, c->n_tensors, key); }

const nd_tview *nd_ckpt_find(const nd_ckpt *c, const char *name) {
    size_t i = lower_bound(c, name);
    if (i < c->n_tensors && strcmp(c->tensors[i]->name, name) == 0) return c->tensors[i];
    return c->n_virt ? nd_ckpt_virt_find(c, name) : NULL;
}

int nd_ckpt_has_module(const nd_ckpt *c, const char *path) {
    char key[512];
    int n = snprintf(key, sizeof key, "%s.", path);
    if (n < 0 || (size_t)n >= sizeof key) return 0;
    size_t i = lower_bound(c, key);
    if (i < c->n_tensors && strncmp(c->tensors[i]->name, key, (size_t)n) == 0) return 1;
    return c->n_virt && nd_ckpt_virt_has_prefix(c, key);
}

int nd_ckpt_module_ignored(const nd_ckpt *c, const char *path) { return nd_qcfg_ignored(&c->q, path); }

size_t nd_ckpt_module_count(const nd_ckpt *c) { return c->n_modules; }
const char *nd_ckpt_module_path(const nd_ckpt *c, size_t i) { return i < c->n_modules ? c->modules[i] : NULL; }

/* madvise(DONTNEED) the pages of [d, d + n) widened to `align` (a power of two, >= the page
 * size), clipped to the mapping of the file that holds d. */
static void release_range(const nd_ckpt *c, const unsigned char *d, size_t n, uintptr_t align) {
    for (size_t i = 0; i < c->n_files; i++) {
        const nd_st_file *f = c->files[i];
        if (d < f->map || d + n > f->map + f->size) continue;
        const uintptr_t lo = (uintptr_t)f->map, hi = (uintptr_t)f->map + f->size;
        uintptr_t b = (uintptr_t)d & ~(align - 1);
        uintptr_t en = ((uintptr_t)d + n + align - 1) & ~(align - 1);
        if (b < (lo & ~(uintptr_t)4095)) b = lo & ~(uintptr_t)4095;
        const uintptr_t me = (hi + 4095) & ~(uintptr_t)4095;
        if (en > me) en = me;
        /* a read-only private file mapping: dropped pages are read again from the file if touched */
        if (en > b) (void)madvise((void *)b, en - b, MADV_DONTNEED);
        return;
    }
}

void nd_ckpt_release(const nd_ckpt *c, const nd_tview *t) {
    long pg = sysconf(_SC_PAGESIZE);
    if (!t || !t->nbytes || pg <= 0) return;
    release_range(c, t->data, t->nbytes, (uintptr_t)pg);
}

void nd_ckpt_release_all(const nd_ckpt *c) {
    for (size_t i = 0; c && i < c->n_files; i++) {
        const nd_st_file *f = c->files[i];
        if (f->map && f->size) (void)madvise((void *)f->map, f->size, MADV_DONTNEED);
    }
}

void nd_ckpt_release_near(const nd_ckpt *c, const nd_tview *t) {
    long pg = sysconf(_SC_PAGESIZE);
    if (!t || !t->nbytes || pg <= 0) return;
    const uintptr_t block = (uintptr_t)pg > 65536 ? (uintptr_t)pg : 65536;
    release_range(c, t->data, t->nbytes, block);
}
