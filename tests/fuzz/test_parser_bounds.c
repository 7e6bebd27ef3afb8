/* test_parser_bounds.c — the bounds issue 10 sets on untrusted input, one check each:
 *   safetensors header length <= 100 MB; tensor bytes inside the file, spans disjoint (so their
 *   total is <= the file size); shape products checked for overflow, also for empty tensors;
 *   JSON and YAML nesting depth bounded (a deep document is an error, not a stack overflow);
 *   no allocation sized by an unchecked field: trace datasets that declare more rows, tokens or
 *   elements than the file stores are refused before anything is allocated, and a tokens file
 *   over 64 MB is refused. Every case must be exit class 2 with a message naming the file. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "cli/tokens.h"
#include "pipeline/stack.h"
#include "recipe/recipe.h"
#include "trace/trace.h"
#include "fuzz_common.h"
#include "nd_test.h"

static void expect_bad(int rc, const nd_err *e, const char *path, const char *needle) {
    CHECK(rc == ND_EXIT_BADINPUT, "rc %d (want 2): %s", rc, e->msg);
    CHECK(strncmp(e->msg, path, strlen(path)) == 0, "message does not start with %s: %s", path, e->msg);
    CHECK(strstr(e->msg, needle) != NULL, "message lacks '%s': %s", needle, e->msg);
}

/* The checkpoint folder fz_path(folder) is refused with a message starting with path (its file). */
static void ckpt_expect(const char *folder, const char *path, const char *needle) {
    nd_ckpt *c = NULL;
    nd_err e = {0};
    int rc = nd_ckpt_open(fz_path(folder), &c, &e);
    expect_bad(rc, &e, path, needle);
    nd_ckpt_close(c);
}

/* A safetensors file: u64 length (0: the header's own), the header text, then `data` zero bytes. */
static const char *st_file(uint64_t claimed_len, const char *header, size_t data) {
    size_t hl = strlen(header);
    if (!claimed_len) claimed_len = hl;
    unsigned char *buf = calloc(1, 8 + hl + data);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(claimed_len >> (8 * i));
    memcpy(buf + 8, header, hl);
    const char *p = fz_write("b.safetensors", buf, 8 + hl + data);
    free(buf);
    return p;
}

static void st_expect(uint64_t claimed, const char *header, size_t data, const char *needle) {
    nd_st_file *f = NULL;
    nd_err e = {0};
    const char *p = st_file(claimed, header, data);
    int rc = nd_st_open(p, &f, &e);
    expect_bad(rc, &e, p, needle);
    nd_st_close(f);
}

static void st_expect_ok(const char *header, size_t data) {
    nd_st_file *f = NULL;
    nd_err e = {0};
    int rc = nd_st_open(st_file(strlen(header), header, data), &f, &e);
    CHECK(rc == 0, "valid file refused: %s", e.msg);
    nd_st_close(f);
}

static void test_safetensors(void) {
    /* the header limit is 100 MB: one byte more is refused as too large before anything is read;
     * exactly 100 MB passes that check and fails only because this file is shorter */
    st_expect(100000001ull, "{}", 0, "larger than the 100000000-byte limit");
    st_expect(100000000ull, "{}", 0, "runs past the end of the file");
    st_expect(~0ull, "{}", 0, "larger than the");
    /* tensor bytes inside the data area, and disjoint */
    st_expect(0, "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, "past the end of the data");
    st_expect(0, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap");
    st_expect_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12);
    /* shape products: elements, bytes, and empty tensors with huge other dimensions */
    st_expect(0, "{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967297],\"data_offsets\":[0,0]}}", 0, "overflows");
    st_expect(0, "{\"w\":{\"dtype\":\"F64\",\"shape\":[1152921504606846976,4],\"data_offsets\":[0,0]}}", 0, "overflows");
    st_expect(0, "{\"w\":{\"dtype\":\"U8\",\"shape\":[0,4611686018427387904],\"data_offsets\":[0,0]}}", 0,
              "more than 2^48");
    st_expect(0, "{\"w\":{\"dtype\":\"U8\",\"shape\":[0,9223372036854775807,9223372036854775807],\"data_offsets\":[0,0]}}",
              0, "overflows");
    st_expect_ok("{\"w\":{\"dtype\":\"U8\",\"shape\":[0,4096],\"data_offsets\":[0,0]}}", 0);
    /* JSON depth: jansson stops at 2048 levels, so 100000 levels are an error, not a deep recursion */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 16);
    size_t k = 0;
    deep[k++] = '{';
    memcpy(deep + k, "\"w\":", 4);
    k += 4;
    for (size_t i = 0; i < depth; i++) deep[k++] = '[';
    for (size_t i = 0; i < depth; i++) deep[k++] = ']';
    deep[k++] = '}';
    deep[k] = 0;
    st_expect(0, deep, 0, "not valid JSON");
    free(deep);
}

/* config.json nested 100000 deep: refused as invalid JSON, the folder named. */
static void test_config_depth(void) {
    mkdir(fz_path("ck"), 0700);
    size_t depth = 100000;
    char *deep = malloc(6 * depth + 64);
    size_t k = (size_t)sprintf(deep, "{\"model_type\":\"llama\",\"x\":");
    for (size_t i = 0; i < depth; i++) { memcpy(deep + k, "{\"a\":", 5); k += 5; }
    deep[k++] = '1';
    for (size_t i = 0; i < depth; i++) deep[k++] = '}';
    deep[k++] = '}';
    const char *p = fz_write("ck/config.json", deep, k);
    free(deep);
    ckpt_expect("ck", p, "not valid JSON");
}

/* A quantization-config regex with nested counts (glibc regcomp would take minutes and GBs) is
 * refused; a pattern with small counts still compiles (the folder then lacks its safetensors). */
static void test_regex_size(void) {
    mkdir(fz_path("rx"), 0700);
    char p[1024];
    snprintf(p, sizeof p, "%s", fz_path("rx/config.json"));
    FILE *f = fopen(p, "w");
    fputs("{\"model_type\":\"llama\",\"vocab_size\":8,\"hidden_size\":32,\"num_hidden_layers\":1,"
          "\"num_attention_heads\":2,\"quantization_config\":{\"quant_method\":\"compressed-tensors\","
          "\"ignore\":[\"re:((((a{100}){100}){100}){100})\"]}}", f);
    fclose(f);
    ckpt_expect("rx", p, "is too large");
    f = fopen(p, "w");
    fputs("{\"model_type\":\"llama\",\"vocab_size\":8,\"hidden_size\":32,\"num_hidden_layers\":1,"
          "\"num_attention_heads\":2,\"quantization_config\":{\"quant_method\":\"compressed-tensors\","
          "\"ignore\":[\"re:.*layers\\\\.\\\\d{1,3}\\\\.mlp\\\\.gate\"]}}", f);
    fclose(f);
    nd_ckpt *c = NULL;
    nd_err e = {0};
    int rc = nd_ckpt_open(fz_path("rx"), &c, &e);
    CHECK(rc == ND_EXIT_BADINPUT && strstr(e.msg, "no model.safetensors"), "small counts refused: %s", e.msg);
    nd_ckpt_close(c);
}

/* YAML 100000 levels deep (flow sequences, then block mappings): each loader refuses it. */
static void test_yaml_depth(void) {
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 2);
    for (size_t i = 0; i < depth; i++) { deep[i] = '['; deep[2 * depth - 1 - i] = ']'; }
    deep[2 * depth] = '\n';
    for (int pass = 0; pass < 2; pass++) {
        if (pass) { /* "a:\n b:\n  c: ..." 3000 levels of block mappings */
            free(deep);
            size_t levels = 3000, k = 0;
            deep = malloc(levels * (levels + 4) + 8);
            for (size_t i = 0; i < levels; i++) {
                memset(deep + k, ' ', i);
                k += i;
                memcpy(deep + k, "a:\n", 3);
                k += 3;
            }
            depth = k;
        }
        size_t len = pass ? depth : 2 * depth + 1;
        nd_err e = {0};
        nd_recipe *r = NULL;
        const char *p = fz_write("deep.yaml", deep, len);
        int rc = nd_recipe_load(p, &r, &e);
        CHECK(rc == ND_EXIT_BADINPUT && strncmp(e.msg, p, strlen(p)) == 0, "recipe: rc %d %s", rc, e.msg);
        nd_recipe_free(r);
        nd_stack s;
        nd_err e2 = {0};
        rc = nd_stack_load(p, &s, &e2);
        CHECK(rc == ND_EXIT_BADINPUT && strncmp(e2.msg, p, strlen(p)) == 0, "stack: rc %d %s", rc, e2.msg);
        nd_tolerances t;
        nd_err e3 = {0};
        rc = nd_tolerances_load(p, &t, &e3);
        CHECK(rc == ND_EXIT_BADINPUT && strncmp(e3.msg, p, strlen(p)) == 0, "tolerances: rc %d %s", rc, e3.msg);
    }
    free(deep);
}

/* A finished trace with one row, then a dataset grown by HDF5 to an extent the file does not hold. */
static const char *small_trace(const char *name) {
    const char *p = fz_path(name);
    nd_trace_w *w;
    nd_err e = {0};
    int64_t tok[2] = {1, 2};
    CHECK(nd_trace_create(p, NULL, tok, 2, &w, &e) == 0, "create: %s", e.msg);
    nd_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "embed");
    snprintf(r.mode, sizeof r.mode, "chained");
    snprintf(r.op, sizeof r.op, "embed");
    CHECK(nd_trace_append(w, &r, &e) == 0, "append: %s", e.msg);
    float x[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    CHECK(nd_trace_put_tensor(w, "embed", "ref", x, 1, shape, &e) == 0, "tensor: %s", e.msg);
    nd_trace_summary s;
    memset(&s, 0, sizeof s);
    snprintf(s.status, sizeof s.status, "ok");
    CHECK(nd_trace_finish(w, &s, &e) == 0, "finish: %s", e.msg);
    return p;
}

static void grow(const char *p, const char *dset, hsize_t n) {
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, dset, H5P_DEFAULT) : -1;
    CHECK(d >= 0 && H5Dset_extent(d, &n) >= 0, "cannot grow %s", dset);
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
}

static void test_trace_allocations(void) {
    nd_trace *t = NULL;
    nd_err e = {0};
    const char *p = small_trace("ok.h5");
    CHECK(nd_trace_read(p, &t, &e) == 0 && t->nrows == 1, "small trace: %s", e.msg);
    nd_trace_free(t);
    float *x = NULL;
    int nd = 0;
    int64_t shape[ND_TRACE_MAXDIM];
    CHECK(nd_trace_read_tensor(p, "embed", "ref", &x, &nd, shape, &e) == 0 && nd == 1 && shape[0] == 4 && x[3] == 4,
          "tensor: %s", e.msg);
    free(x);

    /* /stages grown to 1M rows (~700 MB in memory): the file holds one */
    p = small_trace("rows.h5");
    grow(p, "stages", 1u << 20);
    t = NULL;
    int rc = nd_trace_read(p, &t, &e);
    expect_bad(rc, &e, p, "rows that the file does not hold");
    nd_trace_free(t);

    /* a tensor dataset of 2^28 x 4 floats (4 GiB) declared in a file of a few KB */
    p = fz_path("tensor.h5");
    small_trace("tensor.h5");
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hsize_t dims[2] = {1u << 28, 4}, chunk[2] = {1024, 4};
    hid_t sp = H5Screate_simple(2, dims, NULL), pl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(pl, 2, chunk);
    hid_t g = H5Gcreate2(f, "tensors/big", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t d = H5Dcreate2(g, "ref", H5T_IEEE_F32LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    CHECK(f >= 0 && g >= 0 && d >= 0, "cannot add the big dataset");
    H5Dclose(d); H5Gclose(g); H5Pclose(pl); H5Sclose(sp); H5Fclose(f);
    x = NULL;
    rc = nd_trace_read_tensor(p, "big", "ref", &x, &nd, shape, &e);
    expect_bad(rc, &e, p, "declares more data than the file holds");
    free(x);
}

/* A dataset whose data lives in external files (HDF5 "External Data Files"): H5Dread would read
 * another file, or block on a FIFO; the readers refuse it before opening it (F10). */
static void external_dataset(const char *p, const char *grp, const char *name, hid_t type, const char *target,
                             hsize_t n) {
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = f >= 0 ? H5Gopen2(f, grp, H5P_DEFAULT) : -1;
    if (g >= 0 && H5Lexists(g, name, H5P_DEFAULT) > 0) H5Ldelete(g, name, H5P_DEFAULT);
    hid_t sp = H5Screate_simple(1, &n, NULL), pl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_external(pl, target, 0, (hsize_t)(n * H5Tget_size(type)));
    hid_t d = g >= 0 ? H5Dcreate2(g, name, type, sp, H5P_DEFAULT, pl, H5P_DEFAULT) : -1;
    CHECK(d >= 0, "cannot add the external dataset %s/%s", grp, name);
    if (d >= 0) H5Dclose(d);
    H5Pclose(pl); H5Sclose(sp);
    if (g >= 0) H5Gclose(g);
    if (f >= 0) H5Fclose(f);
}

static void test_trace_external_data(void) {
    static const int64_t tok[2] = {1, 2};
    const char *other = fz_write("tokens.bin", tok, sizeof tok);
    const char *p = small_trace("external.h5");
    external_dataset(p, "/", "tokens", H5T_STD_I64LE, other, 2);
    nd_trace *t = NULL;
    nd_err e = {0};
    int rc = nd_trace_read(p, &t, &e);
    expect_bad(rc, &e, p, "dataset tokens keeps its data in external files");
    nd_trace_free(t);

    const char *fifo = fz_path("fifo");
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    p = small_trace("external-fifo.h5");
    external_dataset(p, "/tensors/embed", "ref", H5T_IEEE_F32LE, fifo, 4);
    float *x = NULL;
    int nd = 0;
    int64_t shape[ND_TRACE_MAXDIM];
    rc = nd_trace_read_tensor(p, "embed", "ref", &x, &nd, shape, &e);
    expect_bad(rc, &e, p, "keeps its data in external files");
    free(x);
    unlink(fifo);
}

static void test_tokens_file(void) {
    const char *p = fz_write("tokens.txt", "1,2,3", 5);
    CHECK(truncate(p, (off_t)65 << 20) == 0, "truncate"); /* sparse: 65 MB of NUL bytes */
    int64_t *v = NULL, n = 0;
    nd_err e = {0};
    int rc = nd_tokens_file(p, &v, &n, &e);
    expect_bad(rc, &e, p, "tokens file larger than 64 MiB");
    free(v);
}

int main(void) {
    test_safetensors();
    test_config_depth();
    test_regex_size();
    test_yaml_depth();
    test_trace_allocations();
    test_trace_external_data();
    test_tokens_file();
    return nd_test_report("parser_bounds");
}
