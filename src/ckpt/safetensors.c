/* safetensors.c — map one .safetensors file and validate its header as untrusted input.
 *
 * Layout: u64 little-endian header length N, N bytes of JSON, then the data area. Every check
 * happens before any tensor byte is touched: N bounded and inside the file, JSON well formed,
 * every entry an object with a known dtype, an integer shape (ndim <= 8, dims >= 0), offsets
 * inside the data area, numel * dtype size == span without overflow, spans disjoint, unique
 * names, and "__metadata__" a map of strings.
 */
#include "util/mapguard.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "ckpt/ckpt_internal.h"
#include "util/infile.h"

#define ND_ST_MAX_HEADER (100u * 1000u * 1000u)
/* a tensor's entry is 6 to 9 values (dtype, shape dims, two offsets): 4M values are 500k tensors,
 * ten times the largest single shard on the Hub; parsing that many takes ~0.5 GB */
#define ND_ST_MAX_VALUES (4u * 1000u * 1000u)
#define ND_ST_MAX_EXTENT (1ull << 48)

static const char *const dtype_names[ND_DT_COUNT] = {
    [ND_DT_F64] = "F64", [ND_DT_F32] = "F32", [ND_DT_F16] = "F16", [ND_DT_BF16] = "BF16",
    [ND_DT_F8_E4M3] = "F8_E4M3", [ND_DT_F8_E5M2] = "F8_E5M2", [ND_DT_F8_E8M0] = "F8_E8M0",
    [ND_DT_I64] = "I64", [ND_DT_I32] = "I32", [ND_DT_I16] = "I16", [ND_DT_I8] = "I8",
    [ND_DT_U8] = "U8", [ND_DT_BOOL] = "BOOL", [ND_DT_U16] = "U16", [ND_DT_U32] = "U32", [ND_DT_U64] = "U64",
    [ND_DT_C64] = "C64",
};

nd_dtype nd_dtype_from_str(const char *s) {
    if (!s) return ND_DT_INVALID;
    for (int i = 1; i < ND_DT_COUNT; i++)
        if (strcmp(s, dtype_names[i]) == 0) return (nd_dtype)i;
    return ND_DT_INVALID;
}

const char *nd_dtype_str(nd_dtype t) {
    return (t > ND_DT_INVALID && t < ND_DT_COUNT) ? dtype_names[t] : "INVALID";
}

typedef struct span { uint64_t begin, end; size_t idx; } span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int name_cmp(const void *a, const void *b) {
    return strcmp((*(const nd_tview *const *)a)->name, (*(const nd_tview *const *)b)->name);
}

void nd_st_close(nd_st_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) free((char *)f->t[i].name);
    for (size_t i = 0; i < f->n_meta; i++) { free(f->meta_k[i]); free(f->meta_v[i]); }
    free(f->meta_k); free(f->meta_v);
    free(f->t); free(f->by_name);
    nd_mapguard_drop(f->guard);
    if (f->map && f->size) munmap((void *)f->map, f->size);
    free(f->path);
    free(f);
}

/* Read one JSON integer into *out; 0 ok. */
static int json_i64(const json_t *v, int64_t *out) {
    if (!json_is_integer(v)) return -1;
    *out = (int64_t)json_integer_value(v);
    return 0;
}

static int parse_entry(nd_st_file *f, const char *name, json_t *v, uint64_t data_size,
                       nd_tview *t, span *sp, nd_err *e) {
    const char *P = f->path;
    if (!name[0]) return nd_fail(e, ND_EXIT_BADINPUT, "%s: header has a tensor with an empty name", P);
    if (!json_is_object(v))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': header entry is not an object", P, name);
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': missing or non-string \"dtype\"", P, name);
    nd_dtype dt = nd_dtype_from_str(json_string_value(jd));
    if (dt == ND_DT_INVALID)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': unknown dtype \"%s\"", P, name,
                       json_string_value(jd));
    if (!json_is_array(js))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': missing or non-array \"shape\"", P, name);
    size_t nd = json_array_size(js);
    if (nd > ND_MAX_DIMS)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': %zu dimensions (at most %d)", P, name,
                       nd, ND_MAX_DIMS);
    /* extent: the product with zeros left out. An empty tensor such as [0, 2^62] has numel 0 and
     * passes the byte checks, but its other dimensions reach the binding (2 * K for packed FP4,
     * N * K) and overflow there: bound them. */
    uint64_t numel = 1, extent = 1;
    int overflow = 0;
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < nd; i++) {
        int64_t d;
        if (json_i64(json_array_get(js, i), &d))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': shape[%zu] is not an integer", P,
                           name, i);
        if (d < 0)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': shape[%zu] = %lld is negative", P,
                           name, i, (long long)d);
        t->shape[i] = d;
        if (__builtin_mul_overflow(numel, (uint64_t)d, &numel)) overflow = 1;
        if (d && __builtin_mul_overflow(extent, (uint64_t)d, &extent)) overflow = 1;
    }
    uint64_t nbytes = 0;
    if (overflow || numel > (uint64_t)INT64_MAX ||
        __builtin_mul_overflow(numel, (uint64_t)nd_dtype_size(dt), &nbytes))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': shape product overflows 64 bits", P, name);
    if (extent > ND_ST_MAX_EXTENT)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': its non-zero dimensions multiply to %llu "
                       "(more than 2^48 elements)", P, name, (unsigned long long)extent);
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': \"data_offsets\" must be [begin, end]", P,
                       name);
    int64_t b, en;
    if (json_i64(json_array_get(jo, 0), &b) || json_i64(json_array_get(jo, 1), &en))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': data_offsets are not integers", P, name);
    if (b < 0 || en < 0)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': negative data_offsets [%lld, %lld]", P,
                       name, (long long)b, (long long)en);
    if (b > en)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': data_offsets begin %lld > end %lld", P,
                       name, (long long)b, (long long)en);
    if ((uint64_t)en > data_size)
        return nd_fail(e, ND_EXIT_BADINPUT,
                       "%s: tensor '%s': data_offsets end %lld is past the end of the data (%llu bytes)",
                       P, name, (long long)en, (unsigned long long)data_size);
    if ((uint64_t)(en - b) != nbytes)
        return nd_fail(e, ND_EXIT_BADINPUT,
                       "%s: tensor '%s': shape and dtype %s need %llu bytes but data_offsets span %lld",
                       P, name, nd_dtype_str(dt), (unsigned long long)nbytes, (long long)(en - b));
    t->name = strdup(name);
    if (!t->name) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", P);
    t->dtype = dt;
    t->ndim = (int)nd;
    t->numel = (int64_t)numel;
    t->nbytes = (size_t)nbytes;
    t->data = f->map + f->data_start + b;
    t->file = f->path;
    sp->begin = (uint64_t)b;
    sp->end = (uint64_t)en;
    return 0;
}

static int parse_metadata(nd_st_file *f, json_t *m, nd_err *e) {
    if (!json_is_object(m))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: \"__metadata__\" is not an object", f->path);
    size_t n = json_object_size(m);
    f->meta_k = calloc(n ? n : 1, sizeof *f->meta_k);
    f->meta_v = calloc(n ? n : 1, sizeof *f->meta_v);
    if (!f->meta_k || !f->meta_v) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", f->path);
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        if (!json_is_string(v))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: \"__metadata__\" value of '%s' is not a string",
                           f->path, k);
        f->meta_k[f->n_meta] = strdup(k);
        f->meta_v[f->n_meta] = strdup(json_string_value(v));
        f->n_meta++;
        if (!f->meta_k[f->n_meta - 1] || !f->meta_v[f->n_meta - 1])
            return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", f->path);
    }
    return 0;
}

static int parse_header(nd_st_file *f, nd_err *e) {
    const char *P = f->path;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)f->map[i] << (8 * i);
    /* the value is not printed when it cannot be one: its 8 bytes would be the start of whatever
     * file this is (a link to a private file must not show its first bytes in a message) */
    if (hlen + 8 > f->size) {
        char lim[64] = "";
        if (hlen > ND_ST_MAX_HEADER) snprintf(lim, sizeof lim, ", and larger than the %u-byte limit", ND_ST_MAX_HEADER);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a safetensors file: the header length its first 8 bytes give runs past the "
                       "end of the file (%zu bytes)%s", P, f->size, lim);
    }
    if (hlen > ND_ST_MAX_HEADER)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: header length %llu is larger than the %u-byte limit",
                       P, (unsigned long long)hlen, ND_ST_MAX_HEADER);
    f->data_start = 8 + (size_t)hlen;
    uint64_t data_size = f->size - f->data_start;
    /* jansson spends ~100 bytes a value: a header that is one long list of numbers would take
     * gigabytes. Memory stays proportional to what real headers hold: count the values first
     * (an upper bound: separators and openers, strings included) */
    uint64_t values = 1;
    for (uint64_t i = 0; i < hlen; i++) {
        const unsigned char c = f->map[8 + i];
        values += c == ',' || c == '[' || c == '{';
    }
    if (values > ND_ST_MAX_VALUES)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: header holds about %llu JSON values, more than the %u a header of %u tensors "
                       "needs at most; refusing to parse it", P, (unsigned long long)values, ND_ST_MAX_VALUES, ND_ST_MAX_VALUES / 8);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)f->map + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (strstr(jerr.text, "memory"))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: header too large to parse in the memory available (%llu bytes)", P,
                           (unsigned long long)hlen);
        if (strstr(jerr.text, "duplicate"))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: duplicate tensor name in header (%s)", P, jerr.text);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: header is not valid JSON (column %d: %s)", P,
                       jerr.column, jerr.text);
    }
    int rc = 0;
    span *sp = NULL;
    if (!json_is_object(root)) {
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: header is not a JSON object", P);
        goto out;
    }
    size_t cap = json_object_size(root);
    f->t = calloc(cap ? cap : 1, sizeof *f->t);
    sp = calloc(cap ? cap : 1, sizeof *sp);
    if (!f->t || !sp) { rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", P); goto out; }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (strcmp(k, "__metadata__") == 0) {
            if ((rc = parse_metadata(f, v, e))) goto out;
            continue;
        }
        if ((rc = parse_entry(f, k, v, data_size, &f->t[f->n], &sp[f->n], e))) goto out;
        sp[f->n].idx = f->n;
        f->n++;
    }
    qsort(sp, f->n, sizeof *sp, span_cmp);
    for (size_t i = 1; i < f->n; i++)
        if (sp[i].begin < sp[i - 1].end) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
                         P, f->t[sp[i - 1].idx].name, (unsigned long long)sp[i - 1].begin,
                         (unsigned long long)sp[i - 1].end, f->t[sp[i].idx].name,
                         (unsigned long long)sp[i].begin, (unsigned long long)sp[i].end);
            goto out;
        }
    /* the tensors cover the data area exactly, from its first byte to its last, as the safetensors
     * library requires before any loader (transformers, vLLM, llmcompressor) reads the file: a gap
     * or trailing bytes are a file those refuse ("file not fully covered") */
    {
        uint64_t at = 0;
        for (size_t i = 0; i < f->n; i++) {
            if (sp[i].begin != at) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: bytes [%llu, %llu) of the data area belong to no tensor (before '%s'): "
                             "the safetensors library refuses such a file", P, (unsigned long long)at,
                             (unsigned long long)sp[i].begin, f->t[sp[i].idx].name);
                goto out;
            }
            at = sp[i].end;
        }
        if (at != data_size) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: bytes [%llu, %llu) at the end of the data area belong to no tensor: the "
                         "safetensors library refuses such a file", P, (unsigned long long)at, (unsigned long long)data_size);
            goto out;
        }
    }
    f->by_name = malloc((f->n ? f->n : 1) * sizeof *f->by_name);
    if (!f->by_name) { rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", P); goto out; }
    for (size_t i = 0; i < f->n; i++) f->by_name[i] = &f->t[i];
    qsort(f->by_name, f->n, sizeof *f->by_name, name_cmp);
out:
    free(sp);
    json_decref(root);
    return rc;
}

int nd_st_open(const char *path, nd_st_file **out, nd_err *e) {
    *out = NULL;
    ND_TRY(nd_input_regular(path, e));
    nd_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) { free(f); return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", path); }
    f->guard = -1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* fstat below refuses a FIFO put here after the check */
    if (fd < 0) {
        int err = errno;
        nd_st_close(f);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot open: %s", path, strerror(err));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        nd_st_close(f);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file", path);
    }
    if (st.st_size < 8) {
        close(fd);
        nd_st_close(f);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: truncated: %lld bytes, shorter than the 8-byte header length",
                       path, (long long)st.st_size);
    }
    f->size = (size_t)st.st_size;
    void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (m == MAP_FAILED) {
        f->size = 0;
        nd_st_close(f);
        /* no address space (ulimit -v) or memory is the machine's limit, not a fault of ours */
        return nd_fail(e, err == ENOMEM ? ND_EXIT_BADINPUT : ND_EXIT_INTERNAL, "%s: mmap failed: %s", path, strerror(err));
    }
    f->map = m;
    f->guard = nd_mapguard_add(m, f->size, f->path);
    int rc = parse_header(f, e);
    if (rc) { nd_st_close(f); return rc; }
    *out = f;
    return 0;
}

size_t nd_st_count(const nd_st_file *f) { return f->n; }

const nd_tview *nd_st_at(const nd_st_file *f, size_t i) { return i < f->n ? &f->t[i] : NULL; }

const nd_tview *nd_st_find(const nd_st_file *f, const char *name) {
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return NULL;
}

const char *nd_st_metadata(const nd_st_file *f, const char *key) {
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_k[i], key) == 0) return f->meta_v[i];
    return NULL;
}
