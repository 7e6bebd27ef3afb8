/* test_backend_dtypes.c — the dtype capability of the backend op table (kernels/backend_dtype.h):
 * the flags' names and checkpoint dtypes, the declared table's shape, and the two ways an
 * undeclared dtype fails: exit 3 from an op (a caller's bug), exit 2 naming the file and the tensor
 * where the dtype comes from a checkpoint (src/pipeline/weights.c). CPU only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "nd_test.h"
#include "pipeline/run.h"

static void test_flags(void) {
    char buf[64];
    CHECK(!strcmp(nd_op_dtypes_str(ND_ODT_F32 | ND_ODT_NVFP4 | ND_ODT_E8M0, ", ", buf, sizeof buf), "f32, ue8m0, nvfp4"),
          "%s", buf);
    CHECK(!strcmp(nd_op_dtypes_str(0, ",", buf, sizeof buf), ""), "empty set: '%s'", buf);
    CHECK(!strcmp(nd_op_dtypes_str(ND_ODT_F32 | ND_ODT_BF16, ",", buf, 6), "f32"), "truncated: '%s'", buf);
    CHECK_EQ_INT(nd_op_dtype_of(ND_DT_BF16), ND_ODT_BF16);
    CHECK_EQ_INT(nd_op_dtype_of(ND_DT_F8_E4M3), ND_ODT_E4M3);
    CHECK_EQ_INT(nd_op_dtype_of(ND_DT_F8_E8M0), ND_ODT_E8M0);
    CHECK_EQ_INT(nd_op_dtype_of(ND_DT_F8_E5M2), 0);
    CHECK_EQ_INT(nd_op_dtype_of(ND_DT_INVALID), 0);
    CHECK(nd_op_dtype_name(ND_ODT_BIT_COUNT) == NULL && nd_op_dtype_name(-1) == NULL, "names out of range");
}

/* generic and family ops: the family ones name their recipes, every op declares f32 or a block format */
static void test_table(void) {
    int fam = 0;
    for (int i = 0; i < nd_backend_op_count(); i++) {
        const unsigned d = nd_backend_op_declared(i);
        CHECK(d != 0 && !(d >> ND_ODT_BIT_COUNT), "op %s declares 0x%x", nd_backend_op_name(i), d);
        CHECK_EQ_INT(nd_backend_op_index(nd_backend_op_name(i)), i);
        if (nd_backend_op_family(i)) fam++;
    }
    CHECK_EQ_INT(fam, 9);
    CHECK(nd_backend_op_family(nd_backend_op_index("gemm")) == NULL, "gemm is generic");
    const char *hc = nd_backend_op_family(ND_OP_hc_pre), *gd = nd_backend_op_family(ND_OP_gated_delta_rule);
    CHECK(hc && !strcmp(hc, "deepseek_v4"), "hc_pre: %s", hc ? hc : "(generic)");
    CHECK(gd && strstr(gd, "qwen3_next"), "gated_delta_rule: %s", gd ? gd : "(generic)");
    /* the recipes a family op names are recipes/<stem>.yaml files */
    const char *dir = getenv("NVFP4DBG_RECIPES");
    for (int i = 0; dir && i < nd_backend_op_count(); i++)
        for (const char *f = nd_backend_op_family(i); f && *f; f += strcspn(f, " "), f += *f == ' ') {
            char path[512];
            snprintf(path, sizeof path, "%s/%.*s.yaml", dir, (int)strcspn(f, " "), f);
            FILE *fp = fopen(path, "r");
            CHECK(fp != NULL, "op %s names recipe %s, which does not exist", nd_backend_op_name(i), path);
            if (fp) fclose(fp);
        }
    CHECK_EQ_INT(nd_backend_op_index("no_such_op"), -1);
    CHECK_EQ_INT(nd_backend_op_declared(ND_OP_COUNT), 0);
}

/* a checkpoint tensor of a dtype the backend's to_f32 does not read: exit 2 naming file and tensor */
static void test_checkpoint_dtype(nd_backend *be) {
    nd_run *r = calloc(1, sizeof *r);
    r->be = be;
    uint16_t raw[4] = {0x3f80, 0x4000, 0x4040, 0x4080}; /* BF16 1, 2, 3, 4 */
    nd_tview t = {.name = "model.norm.weight", .dtype = ND_DT_I16, .ndim = 1, .shape = {4}, .numel = 4,
                  .data = raw, .nbytes = sizeof raw, .file = "ckpt/model.safetensors"};
    float *out = NULL;
    nd_err e = {0};
    /* (the accepted dtypes are read by every golden trace; a bare run has no checkpoint to upload from) */
    t.dtype = ND_DT_I16; /* two bytes a value, but no op reads it */
    CHECK_EQ_INT(nd_tensor_f32(r, &t, &out, &e), ND_EXIT_BADINPUT);
    CHECK(!strcmp(e.msg, "ckpt/model.safetensors: tensor model.norm.weight has dtype I16; the cpu backend reads f32, bf16, f16"),
          "%s", e.msg);
    CHECK(out == NULL, "no buffer left on failure");
    /* a backend that does not declare bf16 for to_f32 refuses the tensor up front, by name */
    const unsigned keep = be->op_dtypes[ND_OP_to_f32];
    be->op_dtypes[ND_OP_to_f32] &= ~(unsigned)ND_ODT_BF16;
    t.dtype = ND_DT_BF16;
    CHECK_EQ_INT(nd_tensor_f32(r, &t, &out, &e), ND_EXIT_BADINPUT);
    CHECK(!strcmp(e.msg, "ckpt/model.safetensors: tensor model.norm.weight has dtype BF16; the cpu backend reads f32, f16"),
          "%s", e.msg);
    /* the op itself, called anyway: exit 3 (internal) */
    float o[4];
    CHECK_EQ_INT(be->to_f32(be, raw, ND_DT_BF16, 4, o, &e), ND_EXIT_INTERNAL);
    CHECK(!strcmp(e.msg, "cpu: op to_f32 does not support bf16"), "%s", e.msg);
    be->op_dtypes[ND_OP_to_f32] = keep;
    /* a quantized weight whose format the backend's dequant op does not declare: exit 2 naming file and
     * module, before anything is uploaded */
    nd_module m;
    memset(&m, 0, sizeof m);
    snprintf(m.path, sizeof m.path, "model.layers.0.mlp.down_proj");
    m.wfmt = ND_WF_FP8;
    m.fp8_scale_kind = ND_FP8_SCALE_BLOCK_E8M0;
    m.bn = m.bk = 128;
    m.out_features = m.in_features = 4;
    m.weight = &t;
    const unsigned keep_fp8 = be->op_dtypes[ND_OP_dequant_fp8], keep_nv = be->op_dtypes[ND_OP_dequant_nvfp4];
    be->op_dtypes[ND_OP_dequant_fp8] &= ~(unsigned)ND_ODT_E8M0;
    CHECK_EQ_INT(nd_weight_f32(r, &m, &out, &e), ND_EXIT_BADINPUT);
    CHECK(!strcmp(e.msg, "ckpt/model.safetensors: module model.layers.0.mlp.down_proj: the cpu backend's dequant_fp8 does "
                         "not support ue8m0"), "%s", e.msg);
    be->op_dtypes[ND_OP_dequant_nvfp4] = 0;
    m.wfmt = ND_WF_NVFP4;
    CHECK_EQ_INT(nd_weight_f32(r, &m, &out, &e), ND_EXIT_BADINPUT);
    CHECK(strstr(e.msg, "the cpu backend's dequant_nvfp4 does not support nvfp4") != NULL, "%s", e.msg);
    CHECK(out == NULL, "no buffer left on failure");
    be->op_dtypes[ND_OP_dequant_fp8] = keep_fp8;
    be->op_dtypes[ND_OP_dequant_nvfp4] = keep_nv;
    free(r);
}

int main(void) {
    nd_backend *be = NULL;
    nd_err e = {0};
    if (nd_backend_cpu_create(&be, &e)) { fprintf(stderr, "cpu backend: %s\n", e.msg); return 1; }
    test_flags();
    test_table();
    test_checkpoint_dtype(be);
    be->destroy(be);
    return nd_test_report("test_backend_dtypes");
}
