/* trace_read_arrays.c — reading /tensors/<stage>/<which> and /routing/<stage>/<which> back. */
#include "trace_h5.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/infile.h"

/* Bound on what one read may allocate: a dump of one stage, not a whole model. */
#define MAX_ELEMS (1ll << 31)

static int read_array(const char *path, const char *grp, const char *stage, const char *which, hid_t mtype,
                      H5T_class_t want, size_t esize, void **data, int *ndim, hsize_t dims[ND_TRACE_MAXDIM],
                      int validated, nd_err *e) {
    *data = NULL;
    nd_h5_quiet();
    /* nd_trace_read validates the file first, so foreign and corrupt files get its messages (a
     * caller that read the trace already says so: reading it whole again per stage is quadratic) */
    if (!validated) {
        nd_trace *t = NULL;
        ND_TRY(nd_trace_read(path, &t, e));
        nd_trace_free(t);
    }
    if (!stage || strchr(stage, '/') || !which || strchr(which, '/'))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: bad stage name", path);
    char name[512];
    snprintf(name, sizeof name, "/%s/%s/%s", grp, stage, which);
    ND_TRY(nd_input_regular(path, e));
    hid_t f = nd_h5_open_read(path);
    if (f < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open");
    hid_t d = -1, s = -1, ty = -1;
    int rc = 0;
    char part[256];
    snprintf(part, sizeof part, "/%s/%s", grp, stage);
    if (H5Lexists(f, grp, H5P_DEFAULT) <= 0 || H5Lexists(f, part, H5P_DEFAULT) <= 0 ||
        H5Lexists(f, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: no %s in the trace (written only with --dump tensors)", path, name);
        goto done;
    }
    /* every step of the path a hard link: an external link would read another file (or block on a FIFO) */
    const char *steps[3] = {grp, part, name};
    for (int i = 0; i < 3; i++) {
#if H5_VERSION_GE(1, 12, 0)
        H5L_info2_t li;
        herr_t got = H5Lget_info2(f, steps[i], &li, H5P_DEFAULT);
#else
        H5L_info_t li;
        herr_t got = H5Lget_info(f, steps[i], &li, H5P_DEFAULT);
#endif
        if (got < 0 || li.type != H5L_TYPE_HARD) {
            H5Eclear2(H5E_DEFAULT);
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %s is not a plain link inside the trace; refusing to follow it", path, steps[i]);
            goto done;
        }
    }
    if ((rc = nd_h5_no_external_data(f, name, path, e))) goto done;
    if ((d = H5Dopen2(f, name, H5P_DEFAULT)) < 0 || (s = H5Dget_space(d)) < 0 || (ty = H5Dget_type(d)) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot open a dataset");
        goto done;
    }
    {
        /* a virtual dataset maps its data from other files: refused like an external link */
        hid_t dcpl = H5Dget_create_plist(d);
        H5D_layout_t lay = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR;
        if (dcpl >= 0) H5Pclose(dcpl);
        if (lay == H5D_VIRTUAL || lay == H5D_LAYOUT_ERROR) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %s is a virtual dataset; refusing to read it", path, name);
            goto done;
        }
    }
    *ndim = H5Sget_simple_extent_ndims(s);
    if (*ndim < 1 || *ndim > ND_TRACE_MAXDIM || H5Tget_class(ty) != want ||
        H5Sget_simple_extent_dims(s, dims, NULL) < 0) {
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %s has an unexpected type or rank", path, name);
        goto done;
    }
    long long total = 1;
    for (int i = 0; i < *ndim; i++) {
        if (dims[i] > (hsize_t)MAX_ELEMS || (total *= (long long)dims[i]) > MAX_ELEMS) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %s is implausibly large", path, name);
            goto done;
        }
    }
    if (!nd_h5_backed(d, (unsigned long long)total, H5Tget_size(ty))) {
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %s declares more data than the file holds", path, name);
        goto done;
    }
    /* a routing decision is [tokens, k]: rows past the trace's /tokens are a lie, read before anything
     * else could say so (a few MB of gzip zeros declaring 2^29 rows cost minutes and gigabytes) */
    if (!strcmp(grp, "routing") && *ndim == 2) {
        hid_t td = H5Dopen2(f, "tokens", H5P_DEFAULT), ts = td >= 0 ? H5Dget_space(td) : -1;
        hsize_t nt = 0;
        if (ts < 0 || H5Sget_simple_extent_ndims(ts) != 1 || H5Sget_simple_extent_dims(ts, &nt, NULL) < 0) nt = 0;
        nd_h5_close(ts);
        nd_h5_close(td);
        H5Eclear2(H5E_DEFAULT);
        if (dims[0] > nt || dims[1] < 1 || dims[1] > 4096) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %s is [%llu, %llu]; a routing decision is [tokens, k] with the trace's %llu tokens "
                         "and k 1..4096", path, name, (unsigned long long)dims[0], (unsigned long long)dims[1], (unsigned long long)nt);
            goto done;
        }
    }
    /* past 1 GiB, data may expand 64:1 at most (what nvfp4dbg writes compresses a few to one) */
    {
        const double declared = (double)total * (double)H5Tget_size(ty), stored = (double)H5Dget_storage_size(d);
        if (declared > (double)(1u << 30) && declared > 64.0 * stored) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %s declares %.0f MiB from %.0f KiB stored: more than a trace's data compresses; "
                         "not expanded", path, name, declared / 1048576.0, stored / 1024.0);
            goto done;
        }
    }
    if (!(*data = malloc((size_t)(total ? total : 1) * esize))) {
        rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory for %s", path, name);
        goto done;
    }
    if (total > 0 && H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, *data) < 0) {
        free(*data);
        *data = NULL;
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read a dataset (corrupt file?)");
    }
done:
    nd_h5_close(ty); nd_h5_close(s); nd_h5_close(d); nd_h5_close(f);
    return rc;
}

int nd_trace_read_tensor(const char *path, const char *stage, const char *which, float **data, int *ndim,
                         int64_t shape[ND_TRACE_MAXDIM], nd_err *e) {
    hsize_t dims[ND_TRACE_MAXDIM];
    void *p = NULL;
    ND_TRY(read_array(path, "tensors", stage, which, H5T_NATIVE_FLOAT, H5T_FLOAT, sizeof(float), &p, ndim, dims, 0, e));
    for (int i = 0; i < *ndim; i++) shape[i] = (int64_t)dims[i];
    *data = p;
    return 0;
}

static int read_routing(const char *path, const char *stage, const char *which, int32_t **idx, int64_t *t, int64_t *k,
                        int validated, nd_err *e) {
    hsize_t dims[ND_TRACE_MAXDIM];
    void *p = NULL;
    int ndim = 0;
    ND_TRY(read_array(path, "routing", stage, which, H5T_NATIVE_INT32, H5T_INTEGER, sizeof(int32_t), &p, &ndim,
                      dims, validated, e));
    if (ndim != 2) {
        free(p);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: /routing/%s/%s is not [t, k]", path, stage, which);
    }
    *t = (int64_t)dims[0];
    *k = (int64_t)dims[1];
    *idx = p;
    return 0;
}

int nd_trace_read_routing(const char *path, const char *stage, const char *which, int32_t **idx,
                          int64_t *t, int64_t *k, nd_err *e) {
    return read_routing(path, stage, which, idx, t, k, 0, e);
}

int nd_trace_has_routing(const char *path, const char *stage, const char *which) {
    if (!stage || strchr(stage, '/') || !which || strchr(which, '/')) return 0;
    nd_h5_quiet();
    hid_t f = nd_h5_open_read(path);
    if (f < 0) return 0;
    char part[256], name[512];
    snprintf(part, sizeof part, "/routing/%s", stage);
    snprintf(name, sizeof name, "/routing/%s/%s", stage, which);
    const int has = H5Lexists(f, "routing", H5P_DEFAULT) > 0 && H5Lexists(f, part, H5P_DEFAULT) > 0 &&
                    H5Lexists(f, name, H5P_DEFAULT) > 0;
    H5Eclear2(H5E_DEFAULT);
    nd_h5_close(f);
    return has;
}

int nd_trace_read_routing_of(const char *path, const nd_trace *read, const char *stage, const char *which, int32_t **idx,
                             int64_t *t, int64_t *k, nd_err *e) {
    return read_routing(path, stage, which, idx, t, k, read != NULL, e);
}
