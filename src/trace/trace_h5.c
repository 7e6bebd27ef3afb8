/* trace_h5.c — HDF5 plumbing shared by the writer and the reader. */
#include "trace_h5.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

/* H5dont_atexit: when a write fails with the disk full, H5Fclose fails too and leaves the file
 * half closed; HDF5 1.10's own exit handler then crashes closing it again (SIGSEGV in
 * H5F__close_cb after the exit-2 message). Every trace is closed explicitly and flushed per row,
 * so the handler has nothing to do. It only works as the first HDF5 call, which this is. */
void nd_h5_quiet(void) {
    static int once;
    if (!once) { once = 1; H5dont_atexit(); }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void nd_h5_close(hid_t id) {
    if (id < 0 || H5Iis_valid(id) <= 0) return;
    switch (H5Iget_type(id)) {
    case H5I_FILE: H5Fclose(id); break;
    case H5I_GROUP: H5Gclose(id); break;
    case H5I_DATATYPE: H5Tclose(id); break;
    case H5I_DATASPACE: H5Sclose(id); break;
    case H5I_DATASET: H5Dclose(id); break;
    case H5I_ATTR: H5Aclose(id); break;
    case H5I_GENPROP_LST: H5Pclose(id); break;
    default: break;
    }
}

int nd_h5_backed(hid_t d, unsigned long long nelem, size_t esize) {
    hid_t p = H5Dget_create_plist(d);
    if (p < 0) return 0;
    int nf = H5Pget_nfilters(p);
    double chunk = 0;
    if (H5Pget_layout(p) == H5D_CHUNKED) {
        hsize_t cd[H5S_MAX_RANK];
        int r = H5Pget_chunk(p, H5S_MAX_RANK, cd);
        chunk = r > 0 ? (double)esize : 0;
        for (int i = 0; i < r; i++) chunk *= (double)cd[i];
        if (chunk > (double)(16u << 20)) chunk = (double)(16u << 20); /* a declared chunk is no storage */
    }
    H5Pclose(p);
    if (nf < 0) return 0;
    double stored = (double)H5Dget_storage_size(d);
    return (double)nelem * (double)esize <= stored * (nf > 0 ? 1032.0 : 1.0) + chunk;
}

/* Keep the innermost (deepest) message of the error stack: that is the one that says why
 * (e.g. "No space left on device"), the outer ones only name the API call. */
static herr_t keep_innermost(unsigned n, const H5E_error2_t *err, void *data) {
    char *out = data;
    if (n != 0 || !err->desc || !err->desc[0]) return 0;
    /* the file drivers report a failed system call as a long record with the errno text in it;
     * the errno text is what a person needs ("No space left on device") */
    const char *m = strstr(err->desc, "error message = '");
    if (m) {
        m += strlen("error message = '");
        const char *end = strchr(m, '\'');
        int len = end ? (int)(end - m) : (int)strlen(m);
        snprintf(out, 320, "%s: %.*s", err->func_name, len, m);
    } else {
        snprintf(out, 320, "%s: %s", err->func_name, err->desc);
    }
    for (char *c = out; *c; c++)
        if (*c == '\n') *c = ' ';
    return 0;
}

int nd_h5_fail(nd_err *e, int code, const char *path, const char *src, int line, const char *what) {
    char inner[320] = "";
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, inner);
    H5Eclear2(H5E_DEFAULT);
    const char *base = strrchr(src, '/');
    base = base ? base + 1 : src;
    if (inner[0])
        return nd_fail(e, code, "%s: %s (%s:%d: %s)", path, what, base, line, inner);
    return nd_fail(e, code, "%s: %s (%s:%d)", path, what, base, line);
}

static hid_t str_type(size_t size) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return t;
    if (H5Tset_size(t, size) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0 ||
        H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

int nd_h5_put_str_attr(hid_t obj, const char *name, const char *value, size_t cap, const char *path,
                       nd_err *e) {
    if (!value) value = "";
    size_t len = strlen(value);
    if (cap == 0) cap = len + 1;
    if (len >= cap) return nd_fail(e, ND_EXIT_INTERNAL, "%s: attribute %s is longer than %zu bytes", path, name, cap - 1);
    char *buf = calloc(1, cap);
    if (!buf) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", path);
    memcpy(buf, value, len);
    hid_t t = str_type(cap), s = H5Screate(H5S_SCALAR), a = -1;
    int rc = 0;
    if (t < 0 || s < 0) rc = ND_H5_FAIL(e, ND_EXIT_INTERNAL, path, "cannot make a string type");
    else if ((a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create an attribute");
    else if (H5Awrite(a, t, buf) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot write an attribute");
    nd_h5_close(a); nd_h5_close(s); nd_h5_close(t);
    free(buf);
    return rc;
}

typedef struct link_probe { char name[128]; int bad; } link_probe;
/* the link-info type and the iteration call were renamed in HDF5 1.12 */
#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t nd_link_info;
#define ND_LVISIT H5Lvisit2
#define ND_LITERATE H5Literate2
#else
typedef H5L_info_t nd_link_info;
#define ND_LVISIT H5Lvisit
#define ND_LITERATE H5Literate
#endif
static herr_t link_cb(hid_t g, const char *name, const nd_link_info *info, void *op) {
    (void)g;
    link_probe *lp = op;
    if (info->type != H5L_TYPE_HARD) {
        snprintf(lp->name, sizeof lp->name, "%s", name);
        lp->bad = info->type == H5L_TYPE_EXTERNAL ? 1 : 2;
        return 1; /* stop */
    }
    return 0;
}

int nd_h5_hard_links_only(hid_t g, const char *where, const char *path, nd_err *e) {
    link_probe lp = {"", 0};
    /* every link below g, recursively (/tensors/<stage>/... too): a visit lists an external or soft
     * link without following it */
    if (ND_LVISIT(g, H5_INDEX_NAME, H5_ITER_NATIVE, link_cb, &lp) < 0 && !lp.bad) {
        /* a group below the root that cannot be listed (a trace killed while a group was being
         * created): the root's own links must be listable and hard; what lies below is checked
         * again on every path a reader opens (trace_read_arrays.c) */
        H5Eclear2(H5E_DEFAULT);
        hsize_t idx = 0;
        if (ND_LITERATE(g, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, link_cb, &lp) < 0 && !lp.bad)
            return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot list the links of a group");
    }
    if (lp.bad)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s%s is %s link; refusing to follow it", path, where, lp.name,
                       lp.bad == 1 ? "an external" : "a soft or user-defined");
    return 0;
}

int nd_h5_compound_fits(hid_t ft, const char *what, const char *path, nd_err *e) {
    const size_t rec = H5Tget_size(ft);
    const int n = H5Tget_nmembers(ft);
    if (rec == 0 || n < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot query a table's record type");
    for (int i = 0; i < n; i++) {
        hid_t m = H5Tget_member_type(ft, (unsigned)i);
        const size_t off = H5Tget_member_offset(ft, (unsigned)i), sz = m >= 0 ? H5Tget_size(m) : 0;
        nd_h5_close(m);
        size_t end;
        if (sz == 0 || __builtin_add_overflow(off, sz, &end) || end > rec)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s: field %d (%zu bytes at offset %zu) lies outside its %zu-byte record "
                           "(corrupt file)", path, what, i, sz, off, rec);
    }
    return 0;
}

/* Object header message 0x0007, "External Data Files" (HDF5 file format, IV.A.2.h). */
#define ND_H5_MSG_EFL 7

int nd_h5_no_external_data(hid_t loc, const char *name, const char *path, nd_err *e) {
    /* the header's message-type summary, read without decoding any message */
#if H5_VERSION_GE(1, 12, 0)
    H5O_native_info_t oi;
    herr_t got = H5Oget_native_info_by_name(loc, name, &oi, H5O_NATIVE_INFO_HDR, H5P_DEFAULT);
#else
    H5O_info_t oi;
    herr_t got = H5Oget_info_by_name2(loc, name, &oi, H5O_INFO_HDR, H5P_DEFAULT);
#endif
    if (got < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read an object header (corrupt file?)");
    if (oi.hdr.mesg.present & ((uint64_t)1 << ND_H5_MSG_EFL))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: dataset %s keeps its data in external files; refusing to read it",
                       path, name);
    return 0;
}

int nd_h5_put_f64_attr(hid_t obj, const char *name, double value, const char *path, nd_err *e) {
    hid_t s = H5Screate(H5S_SCALAR), a = -1;
    int rc = 0;
    if (s < 0) rc = ND_H5_FAIL(e, ND_EXIT_INTERNAL, path, "cannot make a dataspace");
    else if ((a = H5Acreate2(obj, name, H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create an attribute");
    else if (H5Awrite(a, H5T_NATIVE_DOUBLE, &value) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot write an attribute");
    nd_h5_close(a); nd_h5_close(s);
    return rc;
}

int nd_h5_set_f64_attr(hid_t obj, const char *name, double value, const char *path, nd_err *e) {
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    int rc = 0;
    if (a < 0) rc = ND_H5_FAIL(e, ND_EXIT_INTERNAL, path, "cannot open an attribute");
    else if (H5Awrite(a, H5T_NATIVE_DOUBLE, &value) < 0) rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot write an attribute");
    nd_h5_close(a);
    return rc;
}

int nd_h5_get_f64_attr(hid_t obj, const char *name, double *out, const char *path, nd_err *e) {
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot query an attribute");
    if (ex == 0) return 1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), sp = -1;
    int rc = 0;
    if (a < 0 || (sp = H5Aget_space(a)) < 0 || H5Sget_simple_extent_npoints(sp) != 1)
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: attribute %s is not a scalar", path, name);
    else if (H5Aread(a, H5T_NATIVE_DOUBLE, out) < 0) rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot read an attribute");
    nd_h5_close(sp); nd_h5_close(a);
    return rc;
}

int nd_h5_set_str_attr(hid_t obj, const char *name, const char *value, const char *path, nd_err *e) {
    if (!value) value = "";
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), t = -1;
    int rc = 0;
    char *buf = NULL;
    size_t cap = 0;
    if (a < 0) { rc = ND_H5_FAIL(e, ND_EXIT_INTERNAL, path, "cannot open an attribute"); goto done; }
    if ((t = H5Aget_type(a)) < 0 || (cap = H5Tget_size(t)) == 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_INTERNAL, path, "cannot query an attribute");
        goto done;
    }
    if (!(buf = calloc(1, cap))) { rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", path); goto done; }
    /* a value longer than the space reserved at create time is cut (kept terminated) */
    size_t len = strlen(value);
    if (len > cap - 1) len = cap - 1;
    memcpy(buf, value, len);
    if (H5Awrite(a, t, buf) < 0) rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot write an attribute");
done:
    free(buf);
    nd_h5_close(t); nd_h5_close(a);
    return rc;
}

int nd_h5_get_str_attr(hid_t obj, const char *name, char *dst, size_t cap, const char *path,
                       nd_err *e) {
    dst[0] = 0;
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0) return ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot look up an attribute");
    if (ex == 0) return 1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), ft = -1, mt = -1, sp = -1;
    int rc = 0;
    char msg[160];
    snprintf(msg, sizeof msg, "cannot read attribute %s", name);
    if (a < 0 || (ft = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, msg);
        goto done;
    }
    if (H5Tget_class(ft) != H5T_STRING || H5Sget_simple_extent_npoints(sp) != 1) {
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: attribute %s is not a string", path, name);
        goto done;
    }
    htri_t vl = H5Tis_variable_str(ft);
    if (vl > 0) {
        char *p = NULL;
        mt = H5Tcopy(ft); /* same character set: HDF5 does not convert between them */
        if (mt < 0 || H5Aread(a, mt, &p) < 0) {
            rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, msg);
            goto done;
        }
        if (p) {
            snprintf(dst, cap, "%s", p);
            H5free_memory(p);
        }
    } else {
        size_t fsz = H5Tget_size(ft);
        if (fsz == 0 || fsz > (1u << 20)) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: attribute %s has an implausible size", path, name);
            goto done;
        }
        char *buf = calloc(1, fsz + 1);
        mt = H5Tcopy(ft);
        if (!buf || mt < 0 || H5Tset_size(mt, fsz + 1) < 0 || H5Tset_strpad(mt, H5T_STR_NULLTERM) < 0 ||
            H5Aread(a, mt, buf) < 0) {
            free(buf);
            rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, msg);
            goto done;
        }
        snprintf(dst, cap, "%s", buf);
        free(buf);
    }
done:
    nd_h5_close(mt); nd_h5_close(ft); nd_h5_close(sp); nd_h5_close(a);
    return rc;
}

void nd_row_init(nd_row *f) {
    memset(f, 0, sizeof *f);
    f->sat_frac = f->zero_block_frac = f->scale_ratio = f->weight_rel_l2 = NAN;
    f->floor_sqnr_db = f->scale_mult = f->alpha = f->weight_rel_l2_swap = NAN;
    f->topk_agree = f->kl_div = f->top1_agree = f->worst_block_rel = NAN;
    f->nll_ref = f->nll_prod = NAN;
    f->worst_block = -1;
}

#define F(n, k, s) { #n, offsetof(nd_row, n), sizeof(((nd_row *)0)->n), k, s }
const nd_field nd_fields[] = {
    F(index, ND_F_I32, 1), F(layer, ND_F_I32, 1), F(name, ND_F_STR, 1), F(op, ND_F_STR, 1),
    F(mode, ND_F_STR, 1), F(quantized, ND_F_U8, 1), F(numel, ND_F_I64, 1),
    F(ref_amax, ND_F_F64, 1), F(prod_amax, ND_F_F64, 1),
    F(ref_nan, ND_F_I64, 1), F(prod_nan, ND_F_I64, 1), F(ref_inf, ND_F_I64, 1), F(prod_inf, ND_F_I64, 1),
    F(cosine, ND_F_F64, 1), F(rel_l2, ND_F_F64, 1), F(sqnr_db, ND_F_F64, 1), F(max_abs_err, ND_F_F64, 1),
    F(sat_frac, ND_F_F64, 1), F(zero_block_frac, ND_F_F64, 1), F(scale_ratio, ND_F_F64, 1),
    F(weight_rel_l2, ND_F_F64, 1), F(verdict, ND_F_STR, 1),
    F(floor_sqnr_db, ND_F_F64, 0), F(scale_mult, ND_F_F64, 0), F(alpha, ND_F_F64, 0),
    F(worst_block, ND_F_I64, 0), F(worst_block_rel, ND_F_F64, 0), F(topk_agree, ND_F_F64, 0),
    F(kl_div, ND_F_F64, 0), F(top1_agree, ND_F_F64, 0), F(nll_ref, ND_F_F64, 0), F(nll_prod, ND_F_F64, 0),
};
#undef F
const int nd_nfields = (int)(sizeof nd_fields / sizeof nd_fields[0]);

static hid_t field_type(const nd_field *f) {
    switch (f->kind) {
    case ND_F_I32: return H5Tcopy(H5T_NATIVE_INT32);
    case ND_F_I64: return H5Tcopy(H5T_NATIVE_INT64);
    case ND_F_U8: return H5Tcopy(H5T_NATIVE_UINT8);
    case ND_F_F64: return H5Tcopy(H5T_NATIVE_DOUBLE);
    case ND_F_STR: {
        /* fixed-length, null-terminated: numpy reads these as 'S<n>' columns and h5dump prints
         * them without trailing NULs */
        hid_t t = H5Tcopy(H5T_C_S1);
        if (t >= 0 && (H5Tset_size(t, f->size) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0)) {
            H5Tclose(t);
            return -1;
        }
        return t;
    }
    }
    return -1;
}

hid_t nd_h5_row_type(const unsigned char *use) {
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(nd_row));
    if (t < 0) return -1;
    for (int i = 0; i < nd_nfields; i++) {
        if (use && !use[i]) continue;
        hid_t ft = field_type(&nd_fields[i]);
        herr_t r = ft < 0 ? -1 : H5Tinsert(t, nd_fields[i].name, nd_fields[i].offset, ft);
        nd_h5_close(ft);
        if (r < 0) {
            H5Tclose(t);
            return -1;
        }
    }
    return t;
}

hid_t nd_h5_open_read(const char *path) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0) H5Pset_metadata_read_attempts(fapl, 3);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl >= 0 ? fapl : H5P_DEFAULT);
    if (fapl >= 0) H5Pclose(fapl);
    if (f < 0) {
        H5Eclear2(H5E_DEFAULT);
        f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    }
    return f;
}
