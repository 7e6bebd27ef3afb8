/* conf_fixture.h — access to golden/conformance (fixtures written by transformers, llmcompressor,
 * compressed-tensors and ModelOpt; golden/conformance/README.md describes every tensor). */
#ifndef ND_CONF_FIXTURE_H
#define ND_CONF_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt/ckpt.h"

/* The three fixture models (folder names under golden/conformance). */
extern const char *const conf_models[3];

/* ND_SOURCE_ROOT/golden/conformance/MODEL/REL into buf. */
void conf_path(char *buf, size_t cap, const char *model, const char *rel);

/* Open one fixture safetensors file (MODEL/REL); prints the error and returns NULL on failure. */
nd_st_file *conf_open(const char *model, const char *rel);
/* Open one fixture checkpoint folder (MODEL/REL); prints the error and returns NULL on failure. */
nd_ckpt *conf_ckpt(const char *model, const char *rel);

/* The named tensor of f as a malloc'd float array (any float dtype; BF16 decodes exactly).
 * NULL (and a message) when the tensor is absent; *n gets the element count. */
float *conf_floats(const nd_st_file *f, const char *name, int64_t *n);

/* The I64 prompt of reference.safetensors (`input_ids` [1,T]) as "a,b,c" into buf; returns T
 * (0 on failure). */
int64_t conf_tokens(const char *model, char *buf, size_t cap);

/* Cosine similarity and relative L2 error ||a-b|| / ||b|| in double. */
void conf_metrics(const float *a, const float *b, int64_t n, double *cosine, double *rel_l2);

/* Run a shell command line; returns its exit status (-1 when it did not exit normally). */
int conf_system(const char *cmd);

#endif
