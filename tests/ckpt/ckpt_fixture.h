/* ckpt_fixture.h — small checkpoints written with nd_st_writer for the ckpt tests. */
#ifndef ND_CKPT_FIXTURE_H
#define ND_CKPT_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt/ckpt.h"

/* A fresh folder under the working directory (meson runs tests in the build folder). */
int fx_tmpdir(char *out, size_t cap, const char *tag);
void fx_rmrf(const char *dir);
int fx_write_text(const char *dir, const char *name, const char *text);
/* config.json of a tiny DeepSeek-V4-like model; quant is the quantization_config JSON text or NULL. */
int fx_config(const char *dir, const char *quant);

/* Tensor data lives in an arena freed by fx_end (after nd_st_writer_close). */
typedef struct fx {
    nd_st_writer *w;
    void **blocks;
    size_t n;
    int failed;
} fx;
int fx_begin(fx *x, const char *dir, const char *file);
int fx_end(fx *x);   /* closes the writer; 0 ok */
void *fx_alloc(fx *x, size_t bytes);
void fx_add(fx *x, const char *name, nd_dtype dt, int ndim, const int64_t *shape, const void *data);
/* one F32 tensor of shape [n] (n = 0: a scalar, shape []) holding vals */
void fx_f32(fx *x, const char *name, int n, const float *vals);

/* NVFP4 block scales: pattern of e4m3 codes 0x30..0x37 (0.5 .. 0.9375) with block 0 set to top
 * (0x7E = 448 for a healthy weight, 0x7F = NaN). */
void fx_nvfp4_ct(fx *x, const char *path, int64_t n, int64_t k, float wg, const float *ig, uint8_t top);
void fx_nvfp4_mo(fx *x, const char *path, int64_t n, int64_t k, float ws2, const float *is, uint8_t top);
void fx_fp8_block(fx *x, const char *path, int64_t n, int64_t k, int bn, int bk, const char *scale_name);
void fx_fp8_e8m0(fx *x, const char *path, int64_t n, int64_t k);
void fx_mxfp4(fx *x, const char *path, int64_t n, int64_t k);
void fx_dense(fx *x, const char *path, int64_t n, int64_t k);

#endif
