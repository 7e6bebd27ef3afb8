#define _GNU_SOURCE
#include "ckpt_fixture.h"
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "numerics/nd_numerics.h"

int fx_tmpdir(char *out, size_t cap, const char *tag) {
    snprintf(out, cap, "nd-test-%s-XXXXXX", tag);
    return mkdtemp(out) ? 0 : -1;
}

static int rm_one(const char *p, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb; (void)type; (void)ftw;
    return remove(p);
}
void fx_rmrf(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

int fx_write_text(const char *dir, const char *name, const char *text) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

int fx_config(const char *dir, const char *quant) {
    char buf[8192];
    snprintf(buf, sizeof buf,
             "{\"model_type\": \"deepseek_v4\", \"architectures\": [\"DeepseekV4ForCausalLM\"],\n"
             " \"vocab_size\": 64, \"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,\n"
             " \"num_key_value_heads\": 1, \"head_dim\": 32, \"q_lora_rank\": 32, \"o_groups\": 2,\n"
             " \"o_lora_rank\": 16, \"hc_mult\": 2, \"n_routed_experts\": 2, \"num_experts_per_tok\": 1,\n"
             " \"moe_intermediate_size\": 32, \"rms_norm_eps\": 1e-6%s%s}\n",
             quant ? ", \"quantization_config\": " : "", quant ? quant : "");
    return fx_write_text(dir, "config.json", buf);
}

int fx_begin(fx *x, const char *dir, const char *file) {
    memset(x, 0, sizeof *x);
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    nd_err e = {0};
    if (nd_st_writer_open(p, &x->w, &e)) { fprintf(stderr, "%s\n", e.msg); return -1; }
    return 0;
}

void *fx_alloc(fx *x, size_t bytes) {
    void **nb = realloc(x->blocks, (x->n + 1) * sizeof *nb);
    if (!nb) abort();
    x->blocks = nb;
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) abort();
    x->blocks[x->n++] = p;
    return p;
}

int fx_end(fx *x) {
    nd_err e = {0};
    int rc = x->failed ? -1 : 0;
    if (rc) nd_st_writer_abort(x->w);
    else if (nd_st_writer_close(x->w, &e)) { fprintf(stderr, "%s\n", e.msg); rc = -1; }
    for (size_t i = 0; i < x->n; i++) free(x->blocks[i]);
    free(x->blocks);
    return rc;
}

void fx_add(fx *x, const char *name, nd_dtype dt, int ndim, const int64_t *shape, const void *data) {
    nd_err e = {0};
    if (nd_st_writer_add(x->w, name, dt, ndim, shape, data, &e)) { fprintf(stderr, "%s\n", e.msg); x->failed = 1; }
}

void fx_f32(fx *x, const char *name, int n, const float *vals) {
    int64_t sh[1] = {n};
    float *d = fx_alloc(x, sizeof(float) * (size_t)(n ? n : 1));
    memcpy(d, vals, sizeof(float) * (size_t)(n ? n : 1));
    fx_add(x, name, ND_DT_F32, n ? 1 : 0, sh, d);
}

static void name2(char *o, size_t cap, const char *path, const char *suf) { snprintf(o, cap, "%s.%s", path, suf); }

/* packed codes: a fixed pattern of nibbles */
static uint8_t *codes(fx *x, int64_t n, int64_t k) {
    uint8_t *c = fx_alloc(x, (size_t)(n * k / 2));
    for (int64_t i = 0; i < n * k / 2; i++) c[i] = (uint8_t)((i * 37 + 11) & 0xff);
    return c;
}

static uint8_t *e4m3_scales(fx *x, int64_t n, int64_t k, uint8_t top) {
    uint8_t *s = fx_alloc(x, (size_t)(n * k / 16));
    for (int64_t i = 0; i < n * k / 16; i++) s[i] = (uint8_t)(0x30 + (i % 8));
    s[0] = top;
    return s;
}

/* An NVFP4 module under a format's names: names[0] the packed codes, weight_scale the block scales,
 * names[1] the global scale wg and, when ig is given, names[2] the input scale *ig (both of shape [1]
 * when gdim is 1, scalars when 0). */
static void nvfp4(fx *x, const char *path, int64_t n, int64_t k, uint8_t top, const char *const names[3], int gdim,
                  float wg, const float *ig) {
    char nm[512];
    int64_t sh[2] = {n, k / 2}, ss[2] = {n, k / 16};
    name2(nm, sizeof nm, path, names[0]);
    fx_add(x, nm, ND_DT_U8, 2, sh, codes(x, n, k));
    name2(nm, sizeof nm, path, "weight_scale");
    fx_add(x, nm, ND_DT_F8_E4M3, 2, ss, e4m3_scales(x, n, k, top));
    name2(nm, sizeof nm, path, names[1]);
    fx_f32(x, nm, gdim, &wg);
    if (ig) { name2(nm, sizeof nm, path, names[2]); fx_f32(x, nm, gdim, ig); }
}

void fx_nvfp4_ct(fx *x, const char *path, int64_t n, int64_t k, float wg, const float *ig, uint8_t top) {
    static const char *const names[3] = {"weight_packed", "weight_global_scale", "input_global_scale"};
    nvfp4(x, path, n, k, top, names, 1, wg, ig);
}

void fx_nvfp4_mo(fx *x, const char *path, int64_t n, int64_t k, float ws2, const float *is, uint8_t top) {
    static const char *const names[3] = {"weight", "weight_scale_2", "input_scale"};
    nvfp4(x, path, n, k, top, names, 0, ws2, is);
}

static void fp8_weight(fx *x, const char *path, int64_t n, int64_t k) {
    char nm[512];
    int64_t sh[2] = {n, k};
    uint8_t *w = fx_alloc(x, (size_t)(n * k));
    for (int64_t i = 0; i < n * k; i++) w[i] = (uint8_t)(0x30 + (i % 13));
    name2(nm, sizeof nm, path, "weight");
    fx_add(x, nm, ND_DT_F8_E4M3, 2, sh, w);
}

void fx_fp8_block(fx *x, const char *path, int64_t n, int64_t k, int bn, int bk, const char *scale_name) {
    char nm[512];
    fp8_weight(x, path, n, k);
    int64_t sh[2] = {(n + bn - 1) / bn, (k + bk - 1) / bk};
    float *s = fx_alloc(x, sizeof(float) * (size_t)(sh[0] * sh[1]));
    for (int64_t i = 0; i < sh[0] * sh[1]; i++) s[i] = 0.001f * (float)(i + 1);
    name2(nm, sizeof nm, path, scale_name);
    fx_add(x, nm, ND_DT_F32, 2, sh, s);
}

void fx_fp8_e8m0(fx *x, const char *path, int64_t n, int64_t k) {
    char nm[512];
    fp8_weight(x, path, n, k);
    int64_t sh[2] = {(n + 127) / 128, (k + 127) / 128};
    uint8_t *s = fx_alloc(x, (size_t)(sh[0] * sh[1]));
    for (int64_t i = 0; i < sh[0] * sh[1]; i++) s[i] = (uint8_t)(120 + i % 4);
    name2(nm, sizeof nm, path, "scale");
    fx_add(x, nm, ND_DT_F8_E8M0, 2, sh, s);
}

void fx_mxfp4(fx *x, const char *path, int64_t n, int64_t k) {
    char nm[512];
    int64_t sh[2] = {n, k / 2}, ss[2] = {n, k / 32};
    name2(nm, sizeof nm, path, "weight");
    fx_add(x, nm, ND_DT_I8, 2, sh, codes(x, n, k));
    uint8_t *s = fx_alloc(x, (size_t)(n * k / 32));
    for (int64_t i = 0; i < n * k / 32; i++) s[i] = (uint8_t)(125 + i % 3);
    name2(nm, sizeof nm, path, "scale");
    fx_add(x, nm, ND_DT_F8_E8M0, 2, ss, s);
}

void fx_dense(fx *x, const char *path, int64_t n, int64_t k) {
    char nm[512];
    int64_t sh[2] = {n, k};
    uint16_t *w = fx_alloc(x, sizeof(uint16_t) * (size_t)(n * k));
    for (int64_t i = 0; i < n * k; i++) w[i] = nd_bf16_from_f32(0.01f * (float)(i % 7) - 0.03f);
    name2(nm, sizeof nm, path, "weight");
    fx_add(x, nm, ND_DT_BF16, 2, sh, w);
}
