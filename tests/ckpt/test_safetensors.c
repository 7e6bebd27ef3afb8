/* safetensors writer -> reader round trip, header layout, dtype names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "ckpt_fixture.h"
#include "nd_test.h"

static void dtype_names(void) {
    static const char *const names[] = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0",
                                        "I64", "I32", "I16", "I8", "U8", "BOOL", "U16", "U32", "U64", "C64"};
    static const size_t sizes[] = {8, 4, 2, 2, 1, 1, 1, 8, 4, 2, 1, 1, 1, 2, 4, 8, 8};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        nd_dtype t = nd_dtype_from_str(names[i]);
        CHECK(t != ND_DT_INVALID, "%s unknown", names[i]);
        CHECK(strcmp(nd_dtype_str(t), names[i]) == 0, "%s -> %s", names[i], nd_dtype_str(t));
        CHECK(nd_dtype_size(t) == sizes[i], "%s: %zu bytes, want %zu", names[i], nd_dtype_size(t), sizes[i]);
    }
    CHECK(nd_dtype_from_str("F4") == ND_DT_INVALID, "F4 accepted");
    CHECK(nd_dtype_from_str("f32") == ND_DT_INVALID, "lower case accepted");
    CHECK(nd_dtype_from_str(NULL) == ND_DT_INVALID, "NULL accepted");
}

static void round_trip(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    nd_st_writer *w;
    nd_err e = {0};
    CHECK(nd_st_writer_open(path, &w, &e) == 0, "%s", e.msg);
    uint8_t u8[3] = {1, 2, 3};                       /* odd size: the F32 after it is unaligned */
    float f32[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 448.0f};
    int64_t i64 = -7;
    int64_t s_u8[1] = {3}, s_f32[2] = {2, 3}, s_empty[2] = {0, 5};
    CHECK(nd_st_writer_add(w, "a.u8", ND_DT_U8, 1, s_u8, u8, &e) == 0, "%s", e.msg);
    CHECK(nd_st_writer_add(w, "b.f32", ND_DT_F32, 2, s_f32, f32, &e) == 0, "%s", e.msg);
    CHECK(nd_st_writer_add(w, "c.scalar", ND_DT_I64, 0, NULL, &i64, &e) == 0, "%s", e.msg);
    CHECK(nd_st_writer_add(w, "d.empty", ND_DT_BF16, 2, s_empty, NULL, &e) == 0, "%s", e.msg);
    CHECK(nd_st_writer_add(w, "b.f32", ND_DT_F32, 2, s_f32, f32, &e) != 0, "duplicate name accepted");
    /* a name JSON cannot hold is refused and writes nothing (the file size below) */
    CHECK(nd_st_writer_add(w, "e.\xff", ND_DT_U8, 1, s_u8, u8, &e) == ND_EXIT_INTERNAL && strstr(e.msg, "UTF-8"),
          "non-UTF-8 name: %s", e.msg);
    CHECK(nd_st_writer_meta(w, "format", "pt", &e) == 0, "%s", e.msg);
    CHECK(nd_st_writer_close(w, &e) == 0, "%s", e.msg);

    /* layout: header length is a multiple of 8 and the padding is spaces */
    FILE *fp = fopen(path, "rb");
    unsigned char len8[8];
    CHECK(fp && fread(len8, 1, 8, fp) == 8, "cannot read back");
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)len8[i] << (8 * i);
    CHECK(hl % 8 == 0, "header length %llu not 8-aligned", (unsigned long long)hl);
    char *h = calloc(1, hl + 1);
    CHECK(fread(h, 1, hl, fp) == hl, "short header");
    CHECK(strncmp(h, "{\"__metadata__\"", 15) == 0, "metadata not first: %.40s", h);
    size_t jl = strlen(h);
    while (jl && h[jl - 1] == ' ') jl--;
    CHECK(h[jl - 1] == '}', "header does not end in }: %s", h);
    free(h);
    fseek(fp, 0, SEEK_END);
    CHECK(ftell(fp) == (long)(8 + hl + 3 + 24 + 8), "file size %ld", ftell(fp));
    fclose(fp);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0, "temp file left behind");

    nd_st_file *f;
    CHECK(nd_st_open(path, &f, &e) == 0, "%s", e.msg);
    if (!f) return;
    CHECK_EQ_INT(nd_st_count(f), 4);
    CHECK(strcmp(nd_st_at(f, 0)->name, "a.u8") == 0, "order: %s", nd_st_at(f, 0)->name);
    const nd_tview *t = nd_st_find(f, "b.f32");
    CHECK(t != NULL, "b.f32 missing");
    if (t) {
        CHECK_EQ_INT(t->dtype, ND_DT_F32);
        CHECK_EQ_INT(t->ndim, 2);
        CHECK_EQ_INT(t->shape[0], 2);
        CHECK_EQ_INT(t->shape[1], 3);
        CHECK_EQ_INT(t->numel, 6);
        CHECK_EQ_INT(t->nbytes, 24);
        CHECK(memcmp(t->data, f32, 24) == 0, "data differs");
        CHECK(nd_tview_get_f32(t, 5) == 448.0f, "element 5 = %g", nd_tview_get_f32(t, 5));
        CHECK(isnan(nd_tview_get_f32(t, 6)), "out of range not NaN");
        CHECK(strcmp(t->file, path) == 0, "file %s", t->file);
    }
    t = nd_st_find(f, "c.scalar");
    CHECK(t && t->ndim == 0 && t->numel == 1 && memcmp(t->data, &i64, 8) == 0, "scalar wrong");
    t = nd_st_find(f, "d.empty");
    CHECK(t && t->numel == 0 && t->nbytes == 0, "empty tensor wrong");
    CHECK(nd_st_find(f, "zzz") == NULL, "found a missing name");
    CHECK(nd_st_find(f, "a") == NULL, "prefix matched");
    const char *m = nd_st_metadata(f, "format");
    CHECK(m && strcmp(m, "pt") == 0, "metadata %s", m ? m : "(null)");
    CHECK(nd_st_metadata(f, "nope") == NULL, "absent metadata found");
    nd_st_close(f);

    /* abort removes the temp file and writes nothing */
    snprintf(path, sizeof path, "%s/aborted.safetensors", dir);
    CHECK(nd_st_writer_open(path, &w, &e) == 0, "%s", e.msg);
    nd_st_writer_abort(w);
    CHECK(access(path, F_OK) != 0, "aborted file exists");

    /* a missing file is bad input naming the path */
    CHECK(nd_st_open("no-such-file.safetensors", &f, &e) == ND_EXIT_BADINPUT, "missing file accepted");
    CHECK(strstr(e.msg, "no-such-file.safetensors") != NULL, "message: %s", e.msg);
}

int main(void) {
    char dir[256];
    if (fx_tmpdir(dir, sizeof dir, "st")) return 1;
    dtype_names();
    round_trip(dir);
    fx_rmrf(dir);
    return nd_test_report("test_safetensors");
}
