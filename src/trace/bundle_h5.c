/* bundle_h5.c — the repro bundle as a small HDF5 file (schema "nvfp4dbg-bundle/1").
 *
 * Layout (every name readable with h5py):
 *   /            attrs schema, tool_version, stage, op, layer, checkpoint, checkpoint_format, recipe,
 *                stack, backend, overrides, inputs (comma-separated input names, in stage order),
 *                min_cosine, min_sqnr_db, floor_margin_db, chained_min_cosine
 *   /text/<k>    scalar strings: stage_yaml, stack_yaml, recipe_yaml, config_json, hf_quant_config_json
 *   /tokens      int64 [t]
 *   /inputs/<n>  float32 [rows, cols], the stage's reference inputs
 *   /routing/<n> (only for an input carrying a routing decision: a router's or an indexer's
 *                output) ids int32 [rows, k], weights float32 [rows, k] (optional), logits
 *                float32 [rows, cols] (optional); attr route_scaling (float32)
 *   /tensors/<canonical name>  uint8 [nbytes], attrs dtype (string) and shape (int64 [ndim])
 *   /rows        the stage's rows of the original trace (the /stages compound type)
 * Written at PATH.tmp and renamed into place. The reader treats the file as untrusted. */
#include "util/outfile.h"
#include "trace_h5.h"
#include "trace/bundle_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/infile.h"

#define MAX_TEXT (16u << 20)
#define MAX_BYTES (1ull << 32)

static const char *const text_keys[] = {"stage_yaml", "stack_yaml", "recipe_yaml", "config_json", "hf_quant_config_json"};
static char **text_slot(nd_bundle *b, int i) {
    char **s[] = {&b->stage_yaml, &b->stack_yaml, &b->recipe_yaml, &b->config_json, &b->hf_quant_config_json};
    return s[i];
}

/* ---- writing ---- */
static int put_text(hid_t g, const char *name, const char *text, const char *path, nd_err *e) {
    size_t len = strlen(text);
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR), d = -1;
    int rc = 0;
    if (t < 0 || s < 0 || H5Tset_size(t, len + 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0 ||
        H5Tset_cset(t, H5T_CSET_UTF8) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_INTERNAL, path, "cannot make a string type");
    else if ((d = H5Dcreate2(g, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
             H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, text) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot write a text");
    nd_h5_close(d); nd_h5_close(s); nd_h5_close(t);
    return rc;
}

static int put_array(hid_t g, const char *name, hid_t type, int ndim, const hsize_t *dims, const void *data,
                     const char *path, nd_err *e) {
    hid_t s = H5Screate_simple(ndim, dims, NULL), d = -1;
    int rc = 0;
    if (s < 0 || (d = H5Dcreate2(g, name, type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create a dataset");
    else if (H5Sget_simple_extent_npoints(s) > 0 && H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot write a dataset");
    nd_h5_close(d); nd_h5_close(s);
    return rc;
}

static int put_num_attr(hid_t obj, const char *name, hid_t type, int n, const void *v, const char *path, nd_err *e) {
    hsize_t dim = (hsize_t)n;
    hid_t s = n == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dim, NULL), a = -1;
    int rc = 0;
    if (s < 0 || (a = H5Acreate2(obj, name, type, s, H5P_DEFAULT, H5P_DEFAULT)) < 0 || H5Awrite(a, type, v) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot write an attribute");
    nd_h5_close(a); nd_h5_close(s);
    return rc;
}

/* /routing/<input>: the routing decisions the inputs carry (none: no /routing group) */
static int write_routing(hid_t f, const nd_bundle *b, const char *path, nd_err *e) {
    int any = 0;
    for (int i = 0; i < b->n_in; i++) any |= b->in[i].k > 0;
    if (!any) return 0;
    hid_t g = H5Gcreate2(f, "routing", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create /routing");
    int rc = 0;
    for (int i = 0; i < b->n_in && !rc; i++) {
        const nd_bundle_input *in = &b->in[i];
        if (in->k <= 0) continue;
        hid_t h = H5Gcreate2(g, in->name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (h < 0) { rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create a /routing group"); break; }
        hsize_t kd[2] = {(hsize_t)in->rows, (hsize_t)in->k}, ld[2] = {(hsize_t)in->rows, (hsize_t)in->cols};
        rc = put_array(h, "ids", H5T_NATIVE_INT32, 2, kd, in->idx, path, e);
        if (!rc && in->w) rc = put_array(h, "weights", H5T_NATIVE_FLOAT, 2, kd, in->w, path, e);
        if (!rc && in->logits) rc = put_array(h, "logits", H5T_NATIVE_FLOAT, 2, ld, in->logits, path, e);
        if (!rc) rc = put_num_attr(h, "route_scaling", H5T_NATIVE_FLOAT, 1, &in->route_scaling, path, e);
        nd_h5_close(h);
    }
    nd_h5_close(g);
    return rc;
}

static int write_all(hid_t f, const nd_bundle *b, const char *path, nd_err *e) {
    char inputs[ND_BUNDLE_MAX_IN * 34] = "", layer[16];
    size_t o = 0;
    for (int i = 0; i < b->n_in; i++) o += (size_t)snprintf(inputs + o, sizeof inputs - o, "%s%s", i ? "," : "", b->in[i].name);
    snprintf(layer, sizeof layer, "%d", b->layer);
    const char *names[] = {"schema", "tool_version", "stage", "op", "checkpoint", "checkpoint_format", "recipe",
                           "stack", "backend", "overrides", "inputs"};
    const char *vals[] = {ND_BUNDLE_SCHEMA, b->tool_version, b->stage, b->op, b->checkpoint, b->checkpoint_format,
                          b->recipe, b->stack, b->backend, b->overrides, inputs};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) ND_TRY(nd_h5_put_str_attr(f, names[i], vals[i], 0, path, e));
    int32_t ly = b->layer;
    ND_TRY(put_num_attr(f, "layer", H5T_NATIVE_INT32, 1, &ly, path, e));
    const char *th[] = {"min_cosine", "min_sqnr_db", "floor_margin_db", "chained_min_cosine"};
    const double thv[] = {b->th_min_cosine, b->th_min_sqnr_db, b->th_floor_margin_db, b->th_chained_min_cosine};
    for (int i = 0; i < 4; i++) ND_TRY(put_num_attr(f, th[i], H5T_NATIVE_DOUBLE, 1, &thv[i], path, e));

    hid_t g = H5Gcreate2(f, "text", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create /text");
    int rc = 0;
    for (int i = 0; i < 5 && !rc; i++) {
        const char *t = *text_slot((nd_bundle *)b, i);
        if (t) rc = put_text(g, text_keys[i], t, path, e);
    }
    nd_h5_close(g);
    ND_TRY(rc);

    hsize_t nt = (hsize_t)b->ntok;
    ND_TRY(put_array(f, "tokens", H5T_NATIVE_INT64, 1, &nt, b->tokens, path, e));

    if ((g = H5Gcreate2(f, "inputs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create /inputs");
    for (int i = 0; i < b->n_in && !rc; i++) {
        hsize_t dims[2] = {(hsize_t)b->in[i].rows, (hsize_t)b->in[i].cols};
        rc = put_array(g, b->in[i].name, H5T_NATIVE_FLOAT, 2, dims, b->in[i].data, path, e);
    }
    nd_h5_close(g);
    ND_TRY(rc);
    ND_TRY(write_routing(f, b, path, e));

    if ((g = H5Gcreate2(f, "tensors", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create /tensors");
    for (int i = 0; i < b->n_tensors && !rc; i++) {
        const nd_bundle_tensor *t = &b->tensors[i];
        hsize_t n = (hsize_t)t->nbytes;
        rc = put_array(g, t->name, H5T_NATIVE_UINT8, 1, &n, t->data, path, e);
        hid_t d = rc ? -1 : H5Dopen2(g, t->name, H5P_DEFAULT);
        if (!rc && d < 0) rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot reopen a tensor");
        if (!rc) rc = nd_h5_put_str_attr(d, "dtype", t->dtype, 0, path, e);
        if (!rc) rc = put_num_attr(d, "shape", H5T_NATIVE_INT64, t->ndim > 0 ? t->ndim : 1, t->shape, path, e);
        int32_t nd = t->ndim;
        if (!rc) rc = put_num_attr(d, "ndim", H5T_NATIVE_INT32, 1, &nd, path, e);
        nd_h5_close(d);
    }
    nd_h5_close(g);
    ND_TRY(rc);

    hid_t rt = nd_h5_row_type(NULL);
    if (rt < 0) return ND_H5_FAIL(e, ND_EXIT_INTERNAL, path, "cannot make the row type");
    hsize_t nr = (hsize_t)b->n_rows;
    rc = put_array(f, "rows", rt, 1, &nr, b->rows, path, e);
    nd_h5_close(rt);
    return rc;
}

int nd_bundle_write(const char *path, const nd_bundle *b, nd_err *e) {
    nd_h5_quiet();
    nd_outtmp ot; /* the name is reserved beside the target; HDF5 creates it exclusively */
    ND_TRY(nd_out_begin(&ot, path, NULL, e));
    hid_t f = H5Fcreate(ot.tmp, H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) {
        const int rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create the bundle");
        nd_out_abort(&ot);
        return rc;
    }
    int rc = write_all(f, b, path, e);
    if (H5Fclose(f) < 0 && !rc) rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot write the bundle (is the disk full?)");
    if (rc) nd_out_abort(&ot);
    else rc = nd_out_commit(&ot, e);
    return rc;
}

/* ---- reading ---- */
static int get_num_attr(hid_t obj, const char *name, hid_t mtype, int n, void *v, const char *path, nd_err *e) {
    htri_t ex = H5Aexists(obj, name);
    if (ex <= 0) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not an nvfp4dbg bundle (no attribute %s)", path, name);
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), s = a >= 0 ? H5Aget_space(a) : -1, t = a >= 0 ? H5Aget_type(a) : -1;
    int rc = 0;
    if (a < 0 || s < 0 || t < 0) rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open an attribute");
    else if (H5Sget_simple_extent_npoints(s) != n || (H5Tget_class(t) != H5T_INTEGER && H5Tget_class(t) != H5T_FLOAT))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: attribute %s has an unexpected type or size", path, name);
    else if (H5Aread(a, mtype, v) < 0) rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read an attribute");
    nd_h5_close(t); nd_h5_close(s); nd_h5_close(a);
    return rc;
}

static int get_str(hid_t obj, const char *name, char *dst, size_t cap, const char *path, nd_err *e) {
    int rc = nd_h5_get_str_attr(obj, name, dst, cap, path, e);
    if (rc == 1) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not an nvfp4dbg bundle (no attribute %s)", path, name);
    return rc;
}

/* Open dataset `name` of g and check its class, rank, extent (against `maxn` elements) and that
 * the file holds its data. n gets the element count, dims the extent. */
static int open_ds(hid_t g, const char *name, H5T_class_t cls, int rank, unsigned long long maxn, hid_t *d,
                   hsize_t *dims, unsigned long long *n, const char *path, nd_err *e) {
    *d = -1;
    ND_TRY(nd_h5_no_external_data(g, name, path, e));
    *d = H5Dopen2(g, name, H5P_DEFAULT);
    if (*d < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open a dataset");
    hid_t s = H5Dget_space(*d), t = H5Dget_type(*d);
    int rc = 0;
    if (s < 0 || t < 0) rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot query a dataset");
    else if (H5Tget_class(t) != cls || H5Sget_simple_extent_ndims(s) != rank)
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %s has an unexpected type or rank", path, name);
    else {
        hsize_t dd[8] = {0};
        if (rank > 0) H5Sget_simple_extent_dims(s, dd, NULL);
        unsigned long long tot = 1;
        for (int i = 0; i < rank; i++) {
            if (dd[i] > maxn || (tot *= dd[i]) > maxn) { rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %s is implausibly large", path, name); break; }
            dims[i] = dd[i];
        }
        if (!rc && !nd_h5_backed(*d, tot, H5Tget_size(t)))
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %s declares more data than the file holds (truncated?)", path, name);
        /* a bundle is a shared file: a few MB of compressed zeros must not expand to gigabytes before
         * the stage can say the shape is wrong. Past 256 MiB a dataset may expand 64:1 at most (what
         * nvfp4dbg writes compresses a few to one; a NaN-filled input that large is refused too). */
        const double declared = (double)tot * (double)H5Tget_size(t), stored = (double)H5Dget_storage_size(*d);
        if (!rc && declared > (double)(256u << 20) && declared > 64.0 * stored)
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %s declares %.0f MiB from %.0f KiB stored (%.0f:1): more than a bundle's data "
                         "compresses; not expanded", path, name, declared / 1048576.0, stored / 1024.0, declared / (stored > 0 ? stored : 1));
        *n = tot;
    }
    nd_h5_close(t); nd_h5_close(s);
    if (rc) { nd_h5_close(*d); *d = -1; }
    return rc;
}

static int read_text(hid_t g, const char *name, char **out, const char *path, nd_err *e) {
    *out = NULL;
    ND_TRY(nd_h5_no_external_data(g, name, path, e));
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT), t = -1, mt = -1, s = -1;
    if (d < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open a text");
    int rc = 0;
    size_t sz = 0;
    if ((t = H5Dget_type(d)) < 0 || (s = H5Dget_space(d)) < 0) rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot query a text");
    else if (H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t) != 0 || H5Sget_simple_extent_npoints(s) != 1 ||
             (sz = H5Tget_size(t)) == 0 || sz > MAX_TEXT)
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /text/%s is not a fixed-length string of plausible size", path, name);
    else if (!nd_h5_backed(d, 1, sz))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /text/%s declares more data than the file holds (truncated?)", path, name);
    else if (!(*out = calloc(1, sz + 1))) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    else if ((mt = H5Tcopy(t)) < 0 || H5Tset_size(mt, sz + 1) < 0 || H5Tset_strpad(mt, H5T_STR_NULLTERM) < 0 ||
             H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read a text (corrupt file?)");
    if (rc) { free(*out); *out = NULL; }
    nd_h5_close(mt); nd_h5_close(s); nd_h5_close(t); nd_h5_close(d);
    return rc;
}

/* Names of the links of group g (at most max), in name order. */
static int list_group(hid_t g, char (*names)[200], int max, int *n, const char *path, nd_err *e) {
    H5G_info_t gi;
    if (H5Gget_info(g, &gi) < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot list a group");
    if (gi.nlinks > (hsize_t)max) return nd_fail(e, ND_EXIT_BADINPUT, "%s: a group holds %llu entries (at most %d)", path, (unsigned long long)gi.nlinks, max);
    *n = (int)gi.nlinks;
    for (int i = 0; i < *n; i++) {
        ssize_t len = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, (hsize_t)i, names[i], 200, H5P_DEFAULT);
        if (len < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read a link name");
        if (len >= 200) return nd_fail(e, ND_EXIT_BADINPUT, "%s: a name is longer than 199 bytes", path);
    }
    return 0;
}

/* 1 when s is valid UTF-8: a tensor name goes into the JSON header of the replay's safetensors file. */
static int utf8_valid(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p < 0x80) { p++; continue; }
        const int n = (*p & 0xE0) == 0xC0 ? 1 : (*p & 0xF0) == 0xE0 ? 2 : (*p & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0) return 0;
        unsigned cp = *p & (0x3Fu >> n);
        for (int i = 1; i <= n; i++) {
            if ((p[i] & 0xC0) != 0x80) return 0; /* also stops at the terminating NUL */
            cp = (cp << 6) | (p[i] & 0x3Fu);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0; /* overlong, out of range or a surrogate */
        p += n + 1;
    }
    return 1;
}

static int read_tensor(hid_t g, const char *name, nd_bundle_tensor *t, const char *path, nd_err *e) {
    hid_t d;
    hsize_t dims[1];
    unsigned long long n;
    /* the replay checkpoint holds the tensor under this name, next to its own nvfp4dbg.* entries */
    if (!utf8_valid(name) || !strcmp(name, "__metadata__") || !strncmp(name, "nvfp4dbg.", 9))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor name '%s' is not valid UTF-8 or is reserved (__metadata__, nvfp4dbg.*)",
                       path, name);
    ND_TRY(open_ds(g, name, H5T_INTEGER, 1, MAX_BYTES, &d, dims, &n, path, e));
    int32_t nd = 0;
    int rc = get_str(d, "dtype", t->dtype, sizeof t->dtype, path, e);
    if (!rc) rc = get_num_attr(d, "ndim", H5T_NATIVE_INT32, 1, &nd, path, e);
    if (!rc && (nd < 0 || nd > ND_MAX_DIMS)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor %s has rank %d", path, name, (int)nd);
    if (!rc) rc = get_num_attr(d, "shape", H5T_NATIVE_INT64, nd > 0 ? nd : 1, t->shape, path, e);
    if (!rc) {
        snprintf(t->name, sizeof t->name, "%s", name);
        t->ndim = nd;
        nd_dtype dt = nd_dtype_from_str(t->dtype);
        long double want = 1;
        for (int i = 0; i < nd; i++) {
            if (t->shape[i] < 0) want = -1;
            want *= t->shape[i];
        }
        if (dt == ND_DT_INVALID || want < 0 || (long double)n != want * (long double)nd_dtype_size(dt))
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor %s: %llu bytes do not match dtype %s and its shape", path, name, n, t->dtype);
    }
    if (!rc && !(t->data = malloc(n ? n : 1))) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (!rc && n && H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read a tensor (corrupt file?)");
    t->nbytes = (size_t)n;
    nd_h5_close(d);
    return rc;
}

/* dataset `name` of g, class cls, exactly [d0, d1], into a malloc'd *out */
static int read_exact(hid_t g, const char *name, H5T_class_t cls, hid_t mtype, size_t esize, hsize_t d0, hsize_t d1, void **out,
                      const char *where, const char *path, nd_err *e) {
    hid_t d;
    hsize_t dims[2];
    unsigned long long n;
    ND_TRY(open_ds(g, name, cls, 2, 1ull << 31, &d, dims, &n, path, e));
    int rc = 0;
    if (dims[0] != d0 || dims[1] != d1)
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /routing/%s/%s is [%llu, %llu], the input needs [%llu, %llu]", path, where, name,
                     (unsigned long long)dims[0], (unsigned long long)dims[1], (unsigned long long)d0, (unsigned long long)d1);
    else if (!(*out = malloc(esize * (n ? n : 1)))) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    else if (n && H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read a routing dataset (corrupt file?)");
    nd_h5_close(d);
    return rc;
}

/* /routing/<input> of the inputs that carry one (the group is optional) */
static int read_routing(hid_t f, nd_bundle *b, const char *path, nd_err *e) {
    if (H5Lexists(f, "routing", H5P_DEFAULT) <= 0) return 0;
    hid_t g = H5Gopen2(f, "routing", H5P_DEFAULT);
    if (g < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open /routing");
    int rc = 0;
    for (int i = 0; i < b->n_in && !rc; i++) {
        nd_bundle_input *in = &b->in[i];
        if (H5Lexists(g, in->name, H5P_DEFAULT) <= 0) continue;
        hid_t h = H5Gopen2(g, in->name, H5P_DEFAULT);
        if (h < 0) { rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open a /routing group"); break; }
        hid_t d;
        hsize_t dims[2];
        unsigned long long n;
        /* the ids' extent gives k; every id is checked where the stage uses it (an id no expert
         * has picks no expert) but it must be one an int32 holds, and k a plausible top-k */
        if (!(rc = open_ds(h, "ids", H5T_INTEGER, 2, 1ull << 31, &d, dims, &n, path, e))) {
            nd_h5_close(d);
            if (dims[0] != (hsize_t)in->rows || dims[1] < 1 || dims[1] > 4096)
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /routing/%s/ids is [%llu, %llu], the input has %lld rows and k must be 1..4096",
                             path, in->name, (unsigned long long)dims[0], (unsigned long long)dims[1], (long long)in->rows);
        }
        if (!rc) {
            in->k = (int)dims[1];
            rc = read_exact(h, "ids", H5T_INTEGER, H5T_NATIVE_INT32, sizeof(int32_t), dims[0], dims[1], (void **)&in->idx, in->name, path, e);
        }
        /* a token routes to k distinct experts (a negative id is an empty slot: the compressed
         * attention's selection pads with -1) */
        for (hsize_t r = 0; !rc && r < dims[0]; r++)
            for (hsize_t s = 1; !rc && s < dims[1]; s++)
                for (hsize_t u = 0; u < s && in->idx[r * dims[1] + s] >= 0; u++)
                    if (in->idx[r * dims[1] + s] == in->idx[r * dims[1] + u]) {
                        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /routing/%s/ids: row %llu names expert %d twice (a token routes "
                                     "to distinct experts)", path, in->name, (unsigned long long)r, (int)in->idx[r * dims[1] + s]);
                        break;
                    }
        if (!rc && H5Lexists(h, "weights", H5P_DEFAULT) > 0)
            rc = read_exact(h, "weights", H5T_FLOAT, H5T_NATIVE_FLOAT, sizeof(float), dims[0], dims[1], (void **)&in->w, in->name, path, e);
        if (!rc && H5Lexists(h, "logits", H5P_DEFAULT) > 0)
            rc = read_exact(h, "logits", H5T_FLOAT, H5T_NATIVE_FLOAT, sizeof(float), (hsize_t)in->rows, (hsize_t)in->cols, (void **)&in->logits,
                            in->name, path, e);
        if (!rc) rc = get_num_attr(h, "route_scaling", H5T_NATIVE_FLOAT, 1, &in->route_scaling, path, e);
        if (!rc && !isfinite(in->route_scaling)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /routing/%s route_scaling is not finite", path, in->name);
        nd_h5_close(h);
    }
    nd_h5_close(g);
    return rc;
}

static int read_all(hid_t f, nd_bundle *b, const char *path, nd_err *e) {
    char schema[64];
    int rc = nd_h5_get_str_attr(f, "schema", schema, sizeof schema, path, e);
    if (rc == 1 || (!rc && strcmp(schema, ND_BUNDLE_SCHEMA)))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: not an nvfp4dbg bundle (schema '%s', expected %s)", path, rc ? "" : schema, ND_BUNDLE_SCHEMA);
    ND_TRY(rc);
    char inputs[ND_BUNDLE_MAX_IN * 34 + 32];
    struct { const char *k; char *dst; size_t cap; } s[] = {
        {"tool_version", b->tool_version, sizeof b->tool_version}, {"stage", b->stage, sizeof b->stage},
        {"op", b->op, sizeof b->op}, {"checkpoint", b->checkpoint, sizeof b->checkpoint},
        {"checkpoint_format", b->checkpoint_format, sizeof b->checkpoint_format}, {"recipe", b->recipe, sizeof b->recipe},
        {"stack", b->stack, sizeof b->stack}, {"backend", b->backend, sizeof b->backend},
        {"overrides", b->overrides, sizeof b->overrides}, {"inputs", inputs, sizeof inputs}};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) ND_TRY(get_str(f, s[i].k, s[i].dst, s[i].cap, path, e));
    int32_t ly;
    ND_TRY(get_num_attr(f, "layer", H5T_NATIVE_INT32, 1, &ly, path, e));
    b->layer = ly;
    const char *th[] = {"min_cosine", "min_sqnr_db", "floor_margin_db", "chained_min_cosine"};
    double *thv[] = {&b->th_min_cosine, &b->th_min_sqnr_db, &b->th_floor_margin_db, &b->th_chained_min_cosine};
    for (int i = 0; i < 4; i++) ND_TRY(get_num_attr(f, th[i], H5T_NATIVE_DOUBLE, 1, thv[i], path, e));

    if (H5Lexists(f, "text", H5P_DEFAULT) <= 0 || H5Lexists(f, "inputs", H5P_DEFAULT) <= 0 ||
        H5Lexists(f, "tensors", H5P_DEFAULT) <= 0 || H5Lexists(f, "tokens", H5P_DEFAULT) <= 0 ||
        H5Lexists(f, "rows", H5P_DEFAULT) <= 0)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: bundle lacks /text, /inputs, /tensors, /tokens or /rows", path);
    hid_t g = H5Gopen2(f, "text", H5P_DEFAULT);
    if (g < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open /text");
    for (int i = 0; i < 5 && !rc; i++) {
        htri_t ex = H5Lexists(g, text_keys[i], H5P_DEFAULT);
        if (ex > 0) rc = read_text(g, text_keys[i], text_slot(b, i), path, e);
    }
    nd_h5_close(g);
    ND_TRY(rc);
    if (!b->stage_yaml || !b->config_json || !b->stack_yaml)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: bundle lacks /text/stage_yaml, config_json or stack_yaml", path);

    hid_t d;
    hsize_t dims[2];
    unsigned long long n;
    ND_TRY(open_ds(f, "tokens", H5T_INTEGER, 1, 1ull << 24, &d, dims, &n, path, e));
    b->ntok = (int64_t)n;
    if (!(b->tokens = malloc(sizeof(int64_t) * (n ? n : 1)))) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    else if (n && H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, b->tokens) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read /tokens");
    nd_h5_close(d);
    ND_TRY(rc);

    /* inputs, in the order the root attribute gives */
    if ((g = H5Gopen2(f, "inputs", H5P_DEFAULT)) < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open /inputs");
    for (char *tok = inputs[0] ? strtok(inputs, ",") : NULL; tok && !rc; tok = strtok(NULL, ",")) {
        if (b->n_in == ND_BUNDLE_MAX_IN) { rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: more than %d inputs", path, ND_BUNDLE_MAX_IN); break; }
        nd_bundle_input *in = &b->in[b->n_in];
        /* the name becomes a tensor name and a quoted YAML string of the replay recipe */
        if (strspn(tok, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != strlen(tok)) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: input name '%s' holds characters other than letters, digits, '_', '.', '-'", path, tok);
            break;
        }
        if (strlen(tok) >= sizeof in->name || H5Lexists(g, tok, H5P_DEFAULT) <= 0) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: input '%s' named by the root attribute is missing", path, tok);
            break;
        }
        if ((rc = open_ds(g, tok, H5T_FLOAT, 2, 1ull << 31, &d, dims, &n, path, e))) break;
        b->n_in++;
        snprintf(in->name, sizeof in->name, "%s", tok);
        in->rows = (int64_t)dims[0];
        in->cols = (int64_t)dims[1];
        /* a stage replayed on nothing compares nothing and would pass */
        if (in->rows < 1 || in->cols < 1) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: input '%s' holds %lld x %lld values: a stage replayed on no rows tests nothing",
                         path, tok, (long long)in->rows, (long long)in->cols);
            nd_h5_close(d);
            break;
        }
        if (!(in->data = malloc(sizeof(float) * (n ? n : 1)))) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        else if (n && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, in->data) < 0)
            rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read an input (corrupt file?)");
        nd_h5_close(d);
    }
    nd_h5_close(g);
    ND_TRY(rc);
    ND_TRY(read_routing(f, b, path, e));

    if ((g = H5Gopen2(f, "tensors", H5P_DEFAULT)) < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open /tensors");
    char (*names)[200] = calloc(ND_BUNDLE_MAX_TENSORS, 200);
    int nt = 0;
    rc = names ? list_group(g, names, ND_BUNDLE_MAX_TENSORS, &nt, path, e) : nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    for (int i = 0; i < nt && !rc; i++) {
        rc = read_tensor(g, names[i], &b->tensors[i], path, e);
        b->n_tensors = i + 1;
    }
    free(names);
    nd_h5_close(g);
    ND_TRY(rc);

    hid_t rt = nd_h5_row_type(NULL), ft = -1;
    if (rt < 0) return ND_H5_FAIL(e, ND_EXIT_INTERNAL, path, "cannot make the row type");
    rc = open_ds(f, "rows", H5T_COMPOUND, 1, ND_BUNDLE_MAX_ROWS, &d, dims, &n, path, e);
    if (!rc && (ft = H5Dget_type(d)) >= 0 && H5Tget_nmembers(ft) != H5Tget_nmembers(rt))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /rows has %d fields, this tool writes %d", path, H5Tget_nmembers(ft), H5Tget_nmembers(rt));
    if (!rc && ft >= 0) rc = nd_h5_compound_fits(ft, "/rows", path, e);
    if (!rc) {
        b->n_rows = (int)n;
        if (n && H5Dread(d, rt, H5S_ALL, H5S_ALL, H5P_DEFAULT, b->rows) < 0) rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read /rows");
        for (int i = 0; i < b->n_rows; i++) {
            /* fixed-size strings from the file: keep them terminated */
            nd_row *r = &b->rows[i];
            r->name[ND_NAME_LEN - 1] = r->op[ND_OP_LEN - 1] = r->mode[ND_MODE_LEN - 1] = r->verdict[ND_VERDICT_LEN - 1] = 0;
            /* the original rows are the stage's own: another stage's would be compared with a replay
             * of something else (their op may differ from the stage's: an expert's linear rows come
             * from a moe_experts stage) */
            if (!rc && strncmp(r->name, b->stage, strlen(b->stage)))
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: /rows holds a row of stage %.200s, but the bundle is of stage %.200s", path,
                             r->name, b->stage);
        }
    }
    nd_h5_close(ft);
    if (!rc || d >= 0) nd_h5_close(d);
    nd_h5_close(rt);
    return rc;
}

int nd_bundle_read(const char *path, nd_bundle **out, nd_err *e) {
    *out = NULL;
    nd_h5_quiet();
    ND_TRY(nd_input_regular(path, e));
    FILE *probe = fopen(path, "rb");
    if (!probe) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot open: %s", path, strerror(errno));
    fclose(probe);
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0) { H5Eclear2(H5E_DEFAULT); return nd_fail(e, ND_EXIT_BADINPUT, "%s: not an HDF5 file (or truncated)", path); }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open the bundle (truncated or corrupt?)");
    nd_bundle *b = calloc(1, sizeof *b);
    /* a bundle comes with a bug report: nothing in it may point at another file */
    int rc = b ? nd_h5_hard_links_only(f, "/", path, e) : nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (!rc) rc = read_all(f, b, path, e);
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    if (rc) { nd_bundle_free(b); return rc; }
    *out = b;
    return 0;
}

void nd_bundle_free_data(nd_bundle *b) {
    for (int i = 0; i < b->n_in; i++) {
        free(b->in[i].data);
        free(b->in[i].idx);
        free(b->in[i].w);
        free(b->in[i].logits);
    }
    memset(b->in, 0, sizeof b->in);
    b->n_in = 0;
    for (int i = 0; i < b->n_tensors; i++) free(b->tensors[i].data);
    b->n_tensors = 0;
}

void nd_bundle_free(nd_bundle *b) {
    if (!b) return;
    for (int i = 0; i < 5; i++) free(*text_slot(b, i));
    free(b->tokens);
    nd_bundle_free_data(b);
    free(b);
}
