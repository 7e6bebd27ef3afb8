/* st_dump.c — a test helper for the bash tests of synth (no Python): reads a checkpoint folder
 * (all its shards) with src/ckpt and prints what the tests compare.
 *
 *   st_dump list DIR          one line per tensor, sorted by name:
 *                               NAME DTYPE [d0,d1,...] NBYTES FNV1A64-OF-BYTES [VALUE]
 *                             VALUE (%.9g, or inf/nan) only for single-element F32 tensors
 *   st_dump hex DIR NAME      the tensor's bytes, two hex digits a line
 *   st_dump shard DIR OUT N   OUT (must not exist) gets DIR's files but its safetensors and its
 *                             tensors split round-robin over N shards model-0000i-of-0000N with a
 *                             model.safetensors.index.json, as multi-file writers leave them
 * Exit 0, or 2 with a message. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ckpt/ckpt.h"

static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const nd_tview *const *)a)->name, (*(const nd_tview *const *)b)->name);
}

static int list(const nd_ckpt *c) {
    size_t n = nd_ckpt_count(c);
    const nd_tview **v = calloc(n ? n : 1, sizeof *v);
    if (!v) return 2;
    for (size_t i = 0; i < n; i++) v[i] = nd_ckpt_at(c, i);
    qsort(v, n, sizeof *v, by_name);
    for (size_t i = 0; i < n; i++) {
        const nd_tview *t = v[i];
        printf("%s %s [", t->name, nd_dtype_str(t->dtype));
        for (int d = 0; d < t->ndim; d++) printf("%s%lld", d ? "," : "", (long long)t->shape[d]);
        printf("] %zu %016llx", t->nbytes, (unsigned long long)fnv1a(t->data, t->nbytes));
        if (t->dtype == ND_DT_F32 && t->numel == 1) {
            float x;
            memcpy(&x, t->data, 4);
            if (isnan(x)) printf(" nan");
            else if (isinf(x)) printf(" %sinf", x < 0 ? "-" : "");
            else printf(" %.9g", x);
        }
        printf("\n");
    }
    free(v);
    return 0;
}

static int copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    char buf[1 << 16];
    size_t k;
    int rc = a && b ? 0 : 2;
    while (!rc && (k = fread(buf, 1, sizeof buf, a)) > 0)
        if (fwrite(buf, 1, k, b) != k) rc = 2;
    if (a) fclose(a);
    if (b && fclose(b)) rc = 2;
    return rc;
}

static int shard(const nd_ckpt *c, const char *dir, const char *out, int ns) {
    if (ns < 1 || ns > 99 || mkdir(out, 0777)) { fprintf(stderr, "st_dump: cannot create %s\n", out); return 2; }
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));) {
        size_t l = strlen(de->d_name);
        char a[4096], b[4096];
        struct stat st;
        snprintf(a, sizeof a, "%s/%s", dir, de->d_name);
        if (stat(a, &st) || !S_ISREG(st.st_mode) || (l > 12 && !strcmp(de->d_name + l - 12, ".safetensors")))
            continue;
        snprintf(b, sizeof b, "%s/%s", out, de->d_name);
        if (copy_file(a, b)) { closedir(d); fprintf(stderr, "st_dump: cannot copy %s\n", a); return 2; }
    }
    if (d) closedir(d);
    json_t *map = json_object();
    size_t total = 0;
    nd_err e = {0};
    for (int s = 0; s < ns; s++) {
        char nm[64], path[4200];
        snprintf(nm, sizeof nm, "model-%05d-of-%05d.safetensors", s + 1, ns);
        snprintf(path, sizeof path, "%s/%s", out, nm);
        nd_st_writer *w;
        if (nd_st_writer_open(path, &w, &e)) { fprintf(stderr, "st_dump: %s\n", e.msg); return 2; }
        for (size_t i = (size_t)s; i < nd_ckpt_count(c); i += (size_t)ns) {
            const nd_tview *t = nd_ckpt_at(c, i);
            if (nd_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, &e)) {
                nd_st_writer_abort(w);
                fprintf(stderr, "st_dump: %s\n", e.msg);
                return 2;
            }
            json_object_set_new(map, t->name, json_string(nm));
            total += t->nbytes;
        }
        if (nd_st_writer_close(w, &e)) { fprintf(stderr, "st_dump: %s\n", e.msg); return 2; }
    }
    json_t *idx = json_pack("{s:{s:I},s:o}", "metadata", "total_size", (json_int_t)total, "weight_map", map);
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", out);
    int rc = json_dump_file(idx, path, JSON_INDENT(2) | JSON_SORT_KEYS) ? 2 : 0;
    json_decref(idx);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: st_dump list DIR | hex DIR NAME | shard DIR OUT N\n");
        return 2;
    }
    nd_ckpt *c;
    nd_err e = {0};
    if (nd_ckpt_open(argv[2], &c, &e)) { fprintf(stderr, "st_dump: %s\n", e.msg); return 2; }
    int rc = 2;
    if (!strcmp(argv[1], "list")) {
        rc = list(c);
    } else if (!strcmp(argv[1], "hex") && argc == 4) {
        const nd_tview *t = nd_ckpt_find(c, argv[3]);
        if (!t) fprintf(stderr, "st_dump: %s: no tensor %s\n", argv[2], argv[3]);
        for (size_t i = 0; t && i < t->nbytes; i++) printf("%02x\n", ((const unsigned char *)t->data)[i]);
        rc = t ? 0 : 2;
    } else if (!strcmp(argv[1], "shard") && argc == 5) {
        rc = shard(c, argv[2], argv[3], atoi(argv[4]));
    } else {
        fprintf(stderr, "st_dump: bad arguments\n");
    }
    nd_ckpt_close(c);
    return rc;
}
