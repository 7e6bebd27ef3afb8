#ifndef ND_TOKENS_H
#define ND_TOKENS_H
#include <stdint.h>
#include "util/err.h"
int nd_tokens_parse(const char *text, const char *what, int64_t **out, int64_t *n, nd_err *e);
int nd_tokens_file(const char *path, int64_t **out, int64_t *n, nd_err *e);
/* --layers: "all", "N" or "A-B" (inclusive); -1 on malformed text. */
int nd_parse_layers(const char *s, int *lo, int *hi);
/* --max-memory: a byte count with an optional K, M, G or T suffix (powers of 1024; "1.5G" too),
 * at least 1 MiB and at most 2^60; -1 on anything else. */
int nd_parse_size(const char *s, uint64_t *out);
/* An option's number written in decimal ("0.5", "1e-3", "-1"): not empty, no hexadecimal, no
 * inf/nan, not one that overflows or underflows to 0 from a non-zero text; -1 on anything else. */
int nd_parse_decimal(const char *s, double *out);
/* --device: a CUDA device index, 0 or more; -1 on anything else. */
int nd_parse_device(const char *s, int *out);
#endif
