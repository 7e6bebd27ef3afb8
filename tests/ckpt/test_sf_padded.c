/* test_sf_padded.c — NVFP4 block scales stored padded like a kernel's buffer (issue 18,
 * scale_layout_mismatch with another row stride): which shapes bind (rows N or round_up(N, 128),
 * columns round_up(K/16, 2^j), j <= 7) and which stay bad input, the audit's finding (code, module,
 * tensor, every stack broken, the first shifted block row), and the stored row length the repair
 * reads with. */
#include <stdio.h>
#include <string.h>
#include "ckpt/audit.h"
#include "ckpt/ckpt.h"
#include "ckpt_fixture.h"
#include "nd_test.h"
#include "pipeline/scale_read.h"
#include "pipeline/scale_repr.h"

static const char *CT_Q =
    "{\"quant_method\": \"compressed-tensors\", \"format\": \"nvfp4-pack-quantized\", \"config_groups\": {"
    " \"g\": {\"targets\": [\"Linear\"],"
    "   \"weights\": {\"num_bits\": 4, \"type\": \"float\", \"strategy\": \"tensor_group\", \"group_size\": 16},"
    "   \"input_activations\": {\"num_bits\": 4, \"type\": \"float\", \"strategy\": \"tensor_group\", \"group_size\": 16}}},"
    " \"ignore\": [\"lm_head\"]}";

#define MOD "model.layers.0.mlp.down_proj"

/* A checkpoint whose one NVFP4 module (N 16, K 32: K/16 = 2) has block scales [rows, cols]: the
 * dense [16, 2] matrix (byte r * 2 + c + 1) stored in rows of `cols` bytes, zero padded. */
static int write_ckpt(const char *dir, int64_t rows, int64_t cols) {
    fx_config(dir, CT_Q);
    fx x;
    if (fx_begin(&x, dir, "model.safetensors")) return -1;
    const int64_t wsh[2] = {16, 16}, ssh[2] = {rows, cols};
    uint8_t *w = fx_alloc(&x, 256), *s = fx_alloc(&x, (size_t)(rows * cols));
    for (int i = 0; i < 256; i++) w[i] = (uint8_t)(i * 37);
    memset(s, 0, (size_t)(rows * cols));
    for (int64_t r = 0; r < 16 && r < rows; r++)
        for (int64_t c = 0; c < 2 && c < cols; c++) s[r * cols + c] = (uint8_t)(0x30 + ((r * 2 + c) & 7));
    fx_add(&x, MOD ".weight_packed", ND_DT_U8, 2, wsh, w);
    fx_add(&x, MOD ".weight_scale", ND_DT_F8_E4M3, 2, ssh, s);
    const float wg = 2000.0f, ig = 1000.0f;
    fx_f32(&x, MOD ".weight_global_scale", 1, &wg);
    fx_f32(&x, MOD ".input_global_scale", 1, &ig);
    return fx_end(&x);
}

static void binds(int64_t rows, int64_t cols, int shifted) {
    char dir[256];
    if (fx_tmpdir(dir, sizeof dir, "sfpad")) { CHECK(0, "tmpdir"); return; }
    CHECK(!write_ckpt(dir, rows, cols), "write [%lld, %lld]", (long long)rows, (long long)cols);
    nd_ckpt *c = NULL;
    nd_err e = {0};
    CHECK(nd_ckpt_open(dir, &c, &e) == 0, "%s", e.msg);
    nd_module m;
    int rc = c ? nd_ckpt_module(c, MOD, &m, &e) : -1;
    CHECK(rc == 0, "[%lld, %lld] scales of a [16, 32] weight bind: %s", (long long)rows, (long long)cols, e.msg);
    if (!rc) {
        CHECK(m.wfmt == ND_WF_NVFP4 && m.out_features == 16 && m.in_features == 32, "NVFP4 [16, 32]");
        CHECK_EQ_INT(nd_sf_stored_stride(m.weight_scale, 2), cols > 2 ? cols : 4);
        /* read in rows of the stored length, the dense matrix comes back */
        uint8_t lin[32];
        nd_sf_read_strided(m.weight_scale->data, (int64_t)m.weight_scale->nbytes, 16, 2, cols, lin);
        int same = 1;
        for (int i = 0; i < 32; i++) same &= lin[i] == (uint8_t)(0x30 + (i & 7));
        CHECK(same, "[%lld, %lld]: rows of %lld bytes read back the dense scales", (long long)rows, (long long)cols,
              (long long)cols);
        nd_findings f;
        nd_findings_init(&f);
        CHECK(nd_ckpt_audit(c, &f, &e) == 0, "%s", e.msg);
        const nd_finding *hit = NULL;
        for (size_t i = 0; i < f.n; i++)
            if (!strcmp(f.v[i].code, "scale_layout_mismatch")) hit = &f.v[i];
        CHECK(hit != NULL, "[%lld, %lld]: the audit names scale_layout_mismatch", (long long)rows, (long long)cols);
        if (hit) {
            char want[64];
            snprintf(want, sizeof want, "stored as [%lld, %lld]", (long long)rows, (long long)cols);
            CHECK(!strcmp(hit->module, MOD) && !strcmp(hit->tensor, MOD ".weight_scale"), "at %s: %s / %s", MOD,
                  hit->module, hit->tensor);
            CHECK(hit->kind == ND_BREAKS_ALL && hit->sev == ND_SEV_ERROR, "an error for every stack");
            CHECK(strstr(hit->msg, want) != NULL, "the message says %s: %s", want, hit->msg);
            CHECK_EQ_INT(hit->row, shifted ? 1 : -1);
            if (shifted) CHECK(strstr(hit->msg, "every row after the first is shifted") != NULL, "%s", hit->msg);
            else CHECK(strstr(hit->msg, "the first 16 rows are right") != NULL, "%s", hit->msg);
        }
        nd_findings_free(&f);
    }
    if (c) nd_ckpt_close(c);
    fx_rmrf(dir);
}

static void refused(int64_t rows, int64_t cols) {
    char dir[256];
    if (fx_tmpdir(dir, sizeof dir, "sfbad")) { CHECK(0, "tmpdir"); return; }
    CHECK(!write_ckpt(dir, rows, cols), "write");
    nd_ckpt *c = NULL;
    nd_err e = {0};
    CHECK(nd_ckpt_open(dir, &c, &e) == 0, "%s", e.msg);
    nd_module m;
    int rc = c ? nd_ckpt_module(c, MOD, &m, &e) : -1;
    CHECK(rc == ND_EXIT_BADINPUT && strstr(e.msg, "block scales do not match the weight") && strstr(e.msg, "weight_scale"),
          "[%lld, %lld] is no padding of [16, 2]: exit 2 naming the tensor (rc %d: %s)", (long long)rows, (long long)cols, rc,
          e.msg);
    if (c) nd_ckpt_close(c);
    fx_rmrf(dir);
}

int main(void) {
    binds(16, 4, 1);    /* K/16 = 2 padded to the 128x4 layouts' 4 columns */
    binds(16, 8, 1);    /* a multiple of 8 (field report C37's stride) */
    binds(16, 128, 1);  /* the largest multiple */
    binds(128, 4, 1);   /* rows to 128 and columns to 4: the swizzled layouts' buffer, unswizzled */
    binds(128, 2, 0);   /* only the rows padded: a dense reading is right */
    refused(16, 3);     /* 3 is no round_up(2, 2^j) */
    refused(8, 2);      /* fewer rows */
    refused(16, 1);     /* fewer columns */
    refused(16, 256);   /* past round_up(2, 128) */
    refused(129, 2);    /* past round_up(16, 128) */
    return nd_test_report("test_sf_padded");
}
