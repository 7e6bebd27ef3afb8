/* test_trace_badfiles.c — the reader on files that are not (whole) traces: not HDF5, empty,
 * truncated at many points, HDF5 without the schema, another schema version, a foreign /stages.
 * Each gives exit 2 with the file named, through nd_trace_read and through compare; none crashes.
 * (This test writes the foreign HDF5 files itself, with the HDF5 API.) */
#include <hdf5.h>
#include <sys/stat.h>
#include "compare_fixture.h"
#include "nd_test.h"

static char golden[640];

static void expect_bad(const char *p, const char *needle) {
    nd_err e = {0};
    nd_trace *t = NULL;
    int rc = nd_trace_read(p, &t, &e);
    CHECK(rc == ND_EXIT_BADINPUT && t == NULL, "%s: rc %d", p, rc);
    CHECK(strstr(e.msg, p) == e.msg, "message must start with the file: %s", e.msg);
    if (needle) CHECK(strstr(e.msg, needle) != NULL, "want '%s' in: %s", needle, e.msg);
    nd_trace_free(t);
    CHECK_EQ_INT(fx_compare(p, golden, NULL), 2);
    CHECK(strstr(fx_err, p) != NULL, "compare names the file: %s", fx_err);
    CHECK_EQ_INT(fx_compare(golden, p, NULL), 2);
}

static void copy_prefix(const char *src, const char *dst, long n) {
    FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
    for (long i = 0; a && b && i < n; i++) {
        int c = fgetc(a);
        if (c == EOF) break;
        fputc(c, b);
    }
    if (a) fclose(a);
    if (b) fclose(b);
}

/* A trace, then one root attribute replaced (or removed when value is NULL). */
static void with_schema(const char *p, const char *value) {
    nd_row r[2] = {fx_row(0), fx_row(1)};
    nd_trace_summary s = fx_summary("ok", "", "", "");
    nd_err e = {0};
    fx_write(p, r, 2, &s, &e);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Adelete(f, "schema");
    if (value) {
        hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
        H5Tset_size(t, strlen(value) + 1);
        hid_t a = H5Acreate2(f, "schema", t, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, t, value);
        H5Aclose(a); H5Sclose(sp); H5Tclose(t);
    }
    H5Fclose(f);
}

int main(void) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    nd_row rows[40];
    for (int i = 0; i < 40; i++) rows[i] = fx_row(i);
    nd_trace_summary s = fx_summary("ok", "", "", "");
    nd_err e = {0};
    snprintf(golden, sizeof golden, "%s", fx_path("golden.h5"));
    CHECK_EQ_INT(fx_write(golden, rows, 40, &s, &e), 0);

    const char *txt = fx_path("notes.txt");
    FILE *f = fopen(txt, "w");
    fputs("stage,cosine\nembed,1.0\n", f);
    fclose(f);
    expect_bad(txt, "not an HDF5 file");
    const char *empty = fx_path("empty.h5");
    fclose(fopen(empty, "w"));
    expect_bad(empty, "not an HDF5 file");
    expect_bad(fx_path("absent.h5"), "No such file");
    expect_bad(fx_dir(), "not a regular file");

    /* truncated copies: every cut must be refused cleanly (or, past the end of all data the
     * reader needs, read back whole) */
    struct stat st;
    stat(golden, &st);
    int refused = 0, cuts = 0;
    for (long n = 1; n < st.st_size; n += n < 64 ? 7 : n / 5 + 1) {
        const char *cut = fx_path("cut.h5");
        copy_prefix(golden, cut, n);
        nd_trace *t = NULL;
        int rc = nd_trace_read(cut, &t, &e);
        cuts++;
        if (rc) {
            refused++;
            CHECK(rc == ND_EXIT_BADINPUT && strstr(e.msg, cut) == e.msg, "cut at %ld: rc %d %s", n, rc, e.msg);
        } else {
            CHECK(t->nrows == 40, "cut at %ld read back %lld rows", n, (long long)t->nrows);
        }
        nd_trace_free(t);
    }
    fprintf(stderr, "%d cuts of a %lld-byte trace, %d refused\n", cuts, (long long)st.st_size, refused);
    CHECK(refused >= cuts - 2, "%d of %d truncated files read as whole", cuts - refused, cuts);
    const char *cut = fx_path("cut_half.h5");
    copy_prefix(golden, cut, (long)st.st_size / 2);
    expect_bad(cut, NULL);

    const char *v2 = fx_path("v2.h5");
    with_schema(v2, "nvfp4dbg-trace/2");
    expect_bad(v2, "trace schema nvfp4dbg-trace/2 is not supported");
    const char *other = fx_path("other.h5");
    with_schema(other, "somebody-else/7");
    expect_bad(other, "not an nvfp4dbg trace (schema 'somebody-else/7'");
    const char *none = fx_path("noschema.h5");
    with_schema(none, NULL);
    expect_bad(none, "not an nvfp4dbg trace (no schema attribute)");

    /* right schema, /stages of some other shape */
    const char *foreign = fx_path("foreign.h5");
    with_schema(foreign, ND_TRACE_SCHEMA);
    hid_t h = H5Fopen(foreign, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(h, "stages", H5P_DEFAULT);
    hid_t ct = H5Tcreate(H5T_COMPOUND, 16);
    H5Tinsert(ct, "name", 0, H5T_NATIVE_DOUBLE);
    H5Tinsert(ct, "cosine", 8, H5T_NATIVE_DOUBLE);
    hsize_t one = 1;
    hid_t sp = H5Screate_simple(1, &one, NULL);
    hid_t d = H5Dcreate2(h, "stages", ct, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d); H5Sclose(sp); H5Tclose(ct); H5Fclose(h);
    expect_bad(foreign, "/stages");

    /* a plain HDF5 file somebody else wrote */
    const char *plain = fx_path("plain.h5");
    h = H5Fcreate(plain, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(h);
    expect_bad(plain, "not an nvfp4dbg trace");
    /* links out of the trace: /stages replaced by an external link to another (valid) trace, and
     * an extra external link at the root; both refused, never followed (issue 21) */
    const char *elink = fx_path("elink.h5");
    with_schema(elink, ND_TRACE_SCHEMA);
    h = H5Fopen(elink, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(h, "stages", H5P_DEFAULT);
    H5Lcreate_external(golden, "/stages", h, "stages", H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(h);
    expect_bad(elink, "external link");
    const char *elink2 = fx_path("elink2.h5");
    with_schema(elink2, ND_TRACE_SCHEMA);
    h = H5Fopen(elink2, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Lcreate_external("/dev/zero", "/x", h, "peek", H5P_DEFAULT, H5P_DEFAULT);
    H5Lcreate_soft("/stages", h, "alias", H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(h);
    expect_bad(elink2, "link");
    /* a FIFO named as a trace is refused without blocking */
    const char *fifo = fx_path("fifo.h5");
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    expect_bad(fifo, "not a regular file");
    unlink(fifo);
    return nd_test_report("test_trace_badfiles");
}
