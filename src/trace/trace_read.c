/* trace_read.c — the trace reader: opens a trace (also one left by a killed writer), validates the
 * schema string and the /stages field set, and loads rows, tokens and /summary. Anything foreign,
 * truncated or corrupt is an nd_err of class 2 naming the file, never a crash. */
#include "util/infile.h"
#include "trace_h5.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ROWS (64ll << 20)
#define MAX_TOKENS (64ll << 20)

/* A file that does not even start like HDF5 gets a plainer message than a broken one. The
 * signature sits at 0, 512, 1024, ... (after an optional user block). */
static int looks_like_hdf5(const char *path) {
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    unsigned char buf[8];
    int found = 0;
    for (off_t off = 0; off < (off_t)1 << 20 && !found; off = off ? off * 2 : 512) {
        if (pread(fd, buf, 8, off) != 8) break;
        found = !memcmp(buf, sig, 8);
    }
    close(fd);
    return found;
}

static hid_t open_file(const char *path, nd_err *e) {
    const char *kind;
    int fd = nd_open_regular(path, &kind);
    if (fd < 0) {
        if (kind) nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file (%s)", path, kind);
        else nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    close(fd);
    if (!looks_like_hdf5(path)) {
        nd_fail(e, ND_EXIT_BADINPUT, "%s: not an HDF5 file (so not an nvfp4dbg trace)", path);
        return -1;
    }
    hid_t f = nd_h5_open_read(path);
    if (f < 0) ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "corrupt or truncated HDF5 file");
    return f;
}

typedef struct { const char *name; char *dst; size_t cap; } str_attr;
/* the attribute named as the char array field of *s it is read into */
#define STR_ATTR(s, field) {#field, (s)->field, sizeof (s)->field}

/* Reads the string attributes a[0..n) of obj. A missing one is exit 2 with missing_fmt (given the
 * file and the attribute's name) when missing_fmt is not NULL, else left "" (an optional attribute
 * that older traces lack). */
static int read_str_attrs(hid_t obj, const str_attr *a, size_t n, const char *missing_fmt, const char *path,
                          nd_err *e) {
    for (size_t i = 0; i < n; i++) {
        int rc = nd_h5_get_str_attr(obj, a[i].name, a[i].dst, a[i].cap, path, e);
        if (rc == 1 && missing_fmt) return nd_fail(e, ND_EXIT_BADINPUT, missing_fmt, path, a[i].name);
        if (rc == 1) a[i].dst[0] = 0;
        else if (rc) return rc;
    }
    return 0;
}

static int read_root(hid_t f, nd_trace *t, const char *path, nd_err *e) {
    ND_TRY(nd_h5_hard_links_only(f, "/", path, e));
    int rc = nd_h5_get_str_attr(f, "schema", t->schema, sizeof t->schema, path, e);
    if (rc == 1) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not an nvfp4dbg trace (no schema attribute)", path);
    if (rc) return rc;
    if (strcmp(t->schema, ND_TRACE_SCHEMA)) {
        if (!strncmp(t->schema, "nvfp4dbg-trace/", 15))
            return nd_fail(e, ND_EXIT_BADINPUT,
                           "%s: trace schema %s is not supported (this nvfp4dbg reads %s); regenerate the "
                           "trace with this version", path, t->schema, ND_TRACE_SCHEMA);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: not an nvfp4dbg trace (schema '%s', expected %s)", path,
                       t->schema, ND_TRACE_SCHEMA);
    }
    const str_attr a[] = {STR_ATTR(t, tool_version), STR_ATTR(t, created_utc), STR_ATTR(t, checkpoint),
                          STR_ATTR(t, checkpoint_format), STR_ATTR(t, recipe), STR_ATTR(t, stack),
                          STR_ATTR(t, backend), STR_ATTR(t, device), STR_ATTR(t, modes)};
    ND_TRY(read_str_attrs(f, a, sizeof a / sizeof a[0], "%s: not an nvfp4dbg trace (no %s attribute)", path, e));
    /* optional: traces written before the attribute existed have none */
    const str_attr opt[] = {STR_ATTR(t, overrides), STR_ATTR(t, reference_checkpoint), STR_ATTR(t, ref_numerics),
                            STR_ATTR(t, recipe_file), STR_ATTR(t, recipe_fnv1a), STR_ATTR(t, stack_file),
                            STR_ATTR(t, stack_fnv1a)};
    return read_str_attrs(f, opt, sizeof opt / sizeof opt[0], NULL, path, e);
}

/* Open a 1-D dataset and return its length (bounded by max). */
static hid_t open_1d(hid_t f, const char *name, long long max, hsize_t *n, const char *path, nd_err *e) {
    htri_t ex = H5Lexists(f, name, H5P_DEFAULT);
    if (ex <= 0) {
        if (ex < 0) ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "corrupt root group");
        else nd_fail(e, ND_EXIT_BADINPUT, "%s: not an nvfp4dbg trace (no /%s)", path, name);
        return -1;
    }
    if (nd_h5_no_external_data(f, name, path, e)) return -1;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), s = -1;
    char what[96];
    snprintf(what, sizeof what, "cannot open /%s", name);
    if (d < 0 || (s = H5Dget_space(d)) < 0) {
        ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, what);
        nd_h5_close(d);
        return -1;
    }
    int rank = H5Sget_simple_extent_ndims(s);
    if (rank != 1 || H5Sget_simple_extent_dims(s, n, NULL) < 0 || *n > (hsize_t)max) {
        nd_fail(e, ND_EXIT_BADINPUT, "%s: /%s is not a 1-D dataset of a plausible length", path, name);
        nd_h5_close(s); nd_h5_close(d);
        return -1;
    }
    nd_h5_close(s);
    return d;
}

static int read_tokens(hid_t f, nd_trace *t, const char *path, nd_err *e) {
    hsize_t n = 0;
    hid_t d = open_1d(f, "tokens", MAX_TOKENS, &n, path, e), ty = -1;
    if (d < 0) return e ? e->code : ND_EXIT_BADINPUT;
    int rc = 0;
    if ((ty = H5Dget_type(d)) < 0 || H5Tget_class(ty) != H5T_INTEGER) {
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /tokens is not an integer dataset", path);
    } else if (!nd_h5_backed(d, n, H5Tget_size(ty))) {
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /tokens declares %llu tokens that the file does not hold", path,
                     (unsigned long long)n);
    } else if (n > 0) {
        if (!(t->tokens = malloc(n * sizeof *t->tokens)))
            rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", path);
        else if (H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->tokens) < 0)
            rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read /tokens");
    }
    t->ntokens = (int64_t)n;
    nd_h5_close(ty); nd_h5_close(d);
    return rc;
}

static int field_class_ok(const nd_field *f, hid_t mt) {
    H5T_class_t c = H5Tget_class(mt);
    switch (f->kind) {
    case ND_F_I32: case ND_F_I64: case ND_F_U8: return c == H5T_INTEGER;
    case ND_F_F64: return c == H5T_FLOAT;
    case ND_F_STR: return c == H5T_STRING && H5Tis_variable_str(mt) == 0;
    }
    return 0;
}

static void set_default(nd_row *r, const nd_field *f) {
    char *p = (char *)r + f->offset;
    if (f->kind == ND_F_F64) *(double *)p = NAN;
    else if (f->kind == ND_F_I64) *(int64_t *)p = -1;
    else memset(p, 0, f->size);
}

static int read_stages(hid_t f, nd_trace *t, const char *path, nd_err *e) {
    hsize_t n = 0;
    hid_t d = open_1d(f, "stages", MAX_ROWS, &n, path, e), ft = -1, mt = -1;
    if (d < 0) return e ? e->code : ND_EXIT_BADINPUT;
    int rc = 0;
    unsigned char use[64];
    if ((ft = H5Dget_type(d)) < 0 || H5Tget_class(ft) != H5T_COMPOUND) {
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: not an nvfp4dbg trace (/stages is not a table)", path);
        goto done;
    }
    if ((rc = nd_h5_compound_fits(ft, "/stages", path, e))) goto done;
    for (int i = 0; i < nd_nfields; i++) {
        const nd_field *fd = &nd_fields[i];
        int idx = H5Tget_member_index(ft, fd->name);
        use[i] = idx >= 0;
        if (idx < 0) {
            H5Eclear2(H5E_DEFAULT);
            if (fd->spec) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: not an nvfp4dbg trace (/stages has no field '%s')", path, fd->name);
                goto done;
            }
            continue;
        }
        hid_t m = H5Tget_member_type(ft, (unsigned)idx);
        int ok = m >= 0 && field_class_ok(fd, m);
        nd_h5_close(m);
        if (!ok) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /stages field '%s' has the wrong type", path, fd->name);
            goto done;
        }
    }
    if (!nd_h5_backed(d, n, H5Tget_size(ft))) {
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /stages declares %llu rows that the file does not hold", path,
                     (unsigned long long)n);
        goto done;
    }
    if (!(t->rows = calloc(n ? n : 1, sizeof *t->rows))) {
        rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory for %llu rows", path, (unsigned long long)n);
        goto done;
    }
    if ((mt = nd_h5_row_type(use)) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_INTERNAL, path, "cannot build the row type");
        goto done;
    }
    if (n > 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->rows) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read /stages (corrupt or truncated file)");
        goto done;
    }
    for (hsize_t r = 0; r < n; r++) {
        nd_row *row = &t->rows[r];
        for (int i = 0; i < nd_nfields; i++) {
            if (!use[i]) set_default(row, &nd_fields[i]);
            else if (nd_fields[i].kind == ND_F_STR) ((char *)row + nd_fields[i].offset)[nd_fields[i].size - 1] = 0;
        }
    }
    t->nrows = (int64_t)n;
done:
    nd_h5_close(mt); nd_h5_close(ft); nd_h5_close(d);
    return rc;
}

static int read_summary(hid_t f, nd_trace *t, const char *path, nd_err *e) {
    htri_t ex = H5Lexists(f, "summary", H5P_DEFAULT);
    if (ex < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "corrupt root group");
    if (ex == 0) return 0;
    hid_t g = H5Gopen2(f, "summary", H5P_DEFAULT);
    if (g < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open /summary");
    nd_trace_summary *s = &t->summary;
    const str_attr a[] = {STR_ATTR(s, status), STR_ATTR(s, first_divergence), STR_ATTR(s, first_divergence_mode),
                          STR_ATTR(s, cause), STR_ATTR(s, message)};
    int rc = read_str_attrs(g, a, sizeof a / sizeof a[0], "%s: /summary has no %s attribute", path, e);
    /* the diagnosis's evidence: optional (traces written before it existed lack it) */
    const str_attr o[] = {STR_ATTR(s, repair), STR_ATTR(s, evidence), STR_ATTR(s, next_command),
                          STR_ATTR(s, applied_command), STR_ATTR(s, applied_status),
                          {"applied_first_divergence", s->applied_first, sizeof s->applied_first}};
    if (!rc) rc = read_str_attrs(g, o, sizeof o / sizeof o[0], NULL, path, e);
    struct { const char *name; double *dst; } d[] = {
        {"sqnr_before_db", &s->sqnr_before_db}, {"sqnr_after_db", &s->sqnr_after_db}, {"floor_db", &s->floor_db},
        {"kl_before", &s->kl_before}, {"kl_after", &s->kl_after}, {"top1_before", &s->top1_before},
        {"top1_after", &s->top1_after}};
    for (size_t i = 0; i < sizeof d / sizeof d[0] && !rc; i++) {
        *d[i].dst = NAN;
        rc = nd_h5_get_f64_attr(g, d[i].name, d[i].dst, path, e);
        if (rc == 1) { *d[i].dst = NAN; rc = 0; }
    }
    nd_h5_close(g);
    if (!rc) t->has_summary = 1;
    return rc;
}

/* /prompt (optional: traces from token ids, and older traces, have none) */
#define MAX_PROMPT_BYTES (16ull << 20)
static int read_prompt(hid_t f, nd_trace *t, const char *path, nd_err *e) {
    htri_t ex = H5Lexists(f, "prompt", H5P_DEFAULT);
    if (ex < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "corrupt root group");
    if (!ex) return 0;
    ND_TRY(nd_h5_no_external_data(f, "prompt", path, e));
    hid_t d = H5Dopen2(f, "prompt", H5P_DEFAULT), ft = -1, s = -1, mt = -1;
    int rc = 0;
    size_t size = 0;
    if (d < 0 || (ft = H5Dget_type(d)) < 0 || (s = H5Dget_space(d)) < 0) rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open /prompt");
    else if (H5Tget_class(ft) != H5T_STRING || H5Tis_variable_str(ft) > 0 || H5Sget_simple_extent_type(s) != H5S_SCALAR ||
             (size = H5Tget_size(ft)) == 0 || size > MAX_PROMPT_BYTES + 1 || !nd_h5_backed(d, 1, size))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /prompt is not a scalar fixed-length string of a plausible size", path);
    else if (!(t->prompt = calloc(1, size + 1))) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    /* read as a NUL-terminated string one byte longer than stored: a NULLPAD or SPACEPAD string
     * (h5py's default) that fills its size keeps its last byte */
    else if ((mt = H5Tcopy(ft)) < 0 || H5Tset_size(mt, size + 1) < 0 || H5Tset_strpad(mt, H5T_STR_NULLTERM) < 0 ||
             H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->prompt) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read /prompt");
    nd_h5_close(mt); nd_h5_close(s); nd_h5_close(ft); nd_h5_close(d);
    if (!rc) {
        rc = nd_h5_get_str_attr(f, "prompt_chat", t->prompt_chat, sizeof t->prompt_chat, path, e);
        if (rc == 1) { t->prompt_chat[0] = 0; rc = 0; }
    }
    return rc;
}

int nd_trace_read(const char *path, nd_trace **out, nd_err *e) {
    *out = NULL;
    nd_h5_quiet();
    hid_t f = open_file(path, e);
    if (f < 0) return e ? e->code : ND_EXIT_BADINPUT;
    nd_trace *t = calloc(1, sizeof *t);
    int rc = t ? 0 : nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", path);
    if (!rc) rc = read_root(f, t, path, e);
    if (!rc) rc = read_tokens(f, t, path, e);
    if (!rc) rc = read_prompt(f, t, path, e);
    if (!rc) rc = read_stages(f, t, path, e);
    if (!rc) rc = read_summary(f, t, path, e);
    /* A writer killed between extending /stages and its flush can leave a zero-filled last row;
     * that row was never reported as written, so it is dropped. Elsewhere a nameless row is
     * corruption. */
    if (!rc && (!t->has_summary || !strcmp(t->summary.status, "incomplete")))
        while (t->nrows > 0 && !t->rows[t->nrows - 1].name[0]) t->nrows--;
    for (int64_t i = 0; !rc && i < t->nrows; i++)
        if (!t->rows[i].name[0] || !t->rows[i].mode[0])
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /stages row %lld has no name or mode", path, (long long)i);
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    if (rc) nd_trace_free(t);
    else *out = t;
    return rc;
}

void nd_trace_free(nd_trace *t) {
    if (!t) return;
    free(t->tokens);
    free(t->prompt);
    free(t->rows);
    free(t);
}

/* 1 when path is an HDF5 file whose root attribute "schema" starts with prefix: an earlier
 * output of this tool, which a new one may replace (util/outfile.h). */
int nd_h5_schema_is(const char *path, const char *prefix) {
    nd_h5_quiet();
    if (!looks_like_hdf5(path)) return 0;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return 0;
    char schema[64];
    nd_err e = {0};
    const int ok = nd_h5_get_str_attr(f, "schema", schema, sizeof schema, path, &e) == 0 && !strncmp(schema, prefix, strlen(prefix));
    H5Fclose(f);
    return ok;
}

int nd_trace_is_ours(const char *path) { return nd_h5_schema_is(path, "nvfp4dbg-trace/"); }
int nd_bundle_is_ours(const char *path) { return nd_h5_schema_is(path, "nvfp4dbg-bundle/"); }
