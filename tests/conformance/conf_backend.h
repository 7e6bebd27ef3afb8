/* conf_backend.h — run the NVFP4 ops of every available backend (CPU always, CUDA when a device
 * is visible) on host buffers: upload, op, download. */
#ifndef ND_CONF_BACKEND_H
#define ND_CONF_BACKEND_H

#include <stdint.h>
#include "backend.h"
#include "ckpt/ckpt.h"

/* Fills be[0] = CPU and be[1] = CUDA when available; returns how many (0 on failure). */
int conf_backends(nd_backend *be[2]);
void conf_backends_free(nd_backend *be[2], int n);

/* quant_nvfp4 of host x [rows,k]: codes [rows,k/2], sf [rows,k/16] on the host. */
int conf_quant(nd_backend *b, const float *x, float g, int sem, int64_t rows, int64_t k, uint8_t *codes,
               uint8_t *sf, nd_err *e);
/* dequant_nvfp4 of host packed/sf (may be unaligned checkpoint bytes): out [rows,k] on the host. */
int conf_dequant(nd_backend *b, const uint8_t *packed, const uint8_t *sf, float global_div, int64_t rows,
                 int64_t k, float *out, nd_err *e);
/* dequant_mxfp4 of an MXFP4 module's weight (its checkpoint bytes): out [out_features,in_features] on the host. */
int conf_dequant_mxfp4(nd_backend *b, const nd_module *m, float *out, nd_err *e);

/* For each fixture model, its recording MODEL/REC and its NVFP4 checkpoint: fn once per module
 * recorded there (a tensor name ending in suffix, less the suffix), in file order, on backend b.
 * Returns the modules visited; *missing counts the models whose recording or checkpoint did not
 * open (the reason printed). */
typedef void (*conf_module_fn)(nd_backend *b, const nd_st_file *f, const nd_ckpt *ck, const char *model,
                               const char *module);
int conf_each_module(nd_backend *b, const char *rec, const char *suffix, conf_module_fn fn, int *missing);

#endif
