/* conf_backend.h — run the NVFP4 ops of every available backend (CPU always, CUDA when a device
 * is visible) on host buffers: upload, op, download. */
#ifndef ND_CONF_BACKEND_H
#define ND_CONF_BACKEND_H

#include <stdint.h>
#include "backend.h"

/* Fills be[0] = CPU and be[1] = CUDA when available; returns how many (0 on failure). */
int conf_backends(nd_backend *be[2]);
void conf_backends_free(nd_backend *be[2], int n);

/* quant_nvfp4 of host x [rows,k]: codes [rows,k/2], sf [rows,k/16] on the host. */
int conf_quant(nd_backend *b, const float *x, float g, int sem, int64_t rows, int64_t k, uint8_t *codes,
               uint8_t *sf, nd_err *e);
/* dequant_nvfp4 of host packed/sf (may be unaligned checkpoint bytes): out [rows,k] on the host. */
int conf_dequant(nd_backend *b, const uint8_t *packed, const uint8_t *sf, float global_div, int64_t rows,
                 int64_t k, float *out, nd_err *e);

#endif
