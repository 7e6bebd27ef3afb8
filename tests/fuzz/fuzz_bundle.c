/* fuzz_bundle.c — a repro bundle (HDF5, nd_bundle_read) and what `replay` does with an accepted one:
 * materialise its checkpoint folder and recipe (nd_bundle_materialise), open that folder as a
 * checkpoint (nd_ckpt_open), remove it (nd_bundle_cleanup).
 *
 * Oracle: a refused bundle gives exit class 2 naming the file (fz_check_err). An accepted bundle
 * keeps its counts within their arrays, holds the texts replay needs, its tensors' byte counts
 * match their dtype and shape and its inputs have data; it materialises (a refusal would belong
 * in the reader, which names the bundle); the materialised checkpoint opens or is refused with
 * exit class 2 naming its folder; cleanup leaves nothing behind. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "bundle/bundle.h"
#include "fuzz_common.h"

static void check_accepted(const nd_bundle *b) {
    FZ_ASSERT(b->n_in >= 0 && b->n_in <= ND_BUNDLE_MAX_IN, "n_in %d", b->n_in);
    FZ_ASSERT(b->n_tensors >= 0 && b->n_tensors <= ND_BUNDLE_MAX_TENSORS, "n_tensors %d", b->n_tensors);
    FZ_ASSERT(b->n_rows >= 0 && b->n_rows <= ND_BUNDLE_MAX_ROWS, "n_rows %d", b->n_rows);
    FZ_ASSERT(b->ntok >= 0 && b->tokens, "ntok %lld", (long long)b->ntok);
    FZ_ASSERT(b->stage_yaml && b->config_json && b->stack_yaml, "a text replay needs is missing");
    FZ_ASSERT(memchr(b->stage, 0, sizeof b->stage) && memchr(b->op, 0, sizeof b->op), "unterminated names");
    for (int i = 0; i < b->n_in; i++) {
        const nd_bundle_input *in = &b->in[i];
        FZ_ASSERT(in->name[0] && in->rows >= 0 && in->cols >= 0 && in->data, "input %d (%s)", i, in->name);
    }
    for (int i = 0; i < b->n_tensors; i++) {
        const nd_bundle_tensor *t = &b->tensors[i];
        nd_dtype dt = nd_dtype_from_str(t->dtype);
        FZ_ASSERT(t->name[0] && dt != ND_DT_INVALID && t->ndim >= 0 && t->ndim <= ND_MAX_DIMS && t->data,
                  "tensor %d (%s, %s, rank %d)", i, t->name, t->dtype, t->ndim);
        unsigned long long n = (unsigned long long)nd_dtype_size(dt);
        for (int d = 0; d < t->ndim; d++) {
            FZ_ASSERT(t->shape[d] >= 0, "tensor %s: dimension %d is %lld", t->name, d, (long long)t->shape[d]);
            FZ_ASSERT(!__builtin_mul_overflow(n, (unsigned long long)t->shape[d], &n), "tensor %s: size overflows", t->name);
        }
        FZ_ASSERT(n == t->nbytes, "tensor %s: %zu bytes for %llu expected", t->name, t->nbytes, n);
    }
    for (int i = 0; i < b->n_rows; i++)
        FZ_ASSERT(memchr(b->rows[i].name, 0, sizeof b->rows[i].name) && memchr(b->rows[i].mode, 0, sizeof b->rows[i].mode),
                  "row %d: unterminated strings", i);
}

static int load(const char *path, void *out, nd_err *e) { return nd_bundle_read(path, out, e); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nd_bundle *b = NULL;
    if (!fz_parse("bundle.h5", data, size, load, &b)) return 0;
    nd_err e = {0};
    check_accepted(b);
    char dir[1024];
    int rc = nd_bundle_materialise(b, dir, sizeof dir, &e);
    FZ_ASSERT(rc == 0, "an accepted bundle does not materialise (exit %d): %s", rc, e.msg);
    nd_ckpt *c = NULL;
    rc = nd_ckpt_open(dir, &c, &e);
    fz_check_err(rc, &e, dir);
    if (!rc) {
        for (int i = 0; i < b->n_tensors; i++)
            FZ_ASSERT(nd_ckpt_find(c, b->tensors[i].name), "bundled tensor %s is not in the materialised checkpoint",
                      b->tensors[i].name);
        nd_ckpt_close(c);
    }
    nd_bundle_cleanup(dir);
    struct stat st;
    FZ_ASSERT(stat(dir, &st) != 0, "%s is left behind after cleanup", dir);
    nd_bundle_free(b);
    return 0;
}
