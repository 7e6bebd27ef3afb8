/* fuzz_safetensors.c — the safetensors header and file parser (nd_st_open) on arbitrary bytes.
 * Beyond "no crash", every accepted file must satisfy what the parser promises its callers: each
 * tensor lies inside the data area, nbytes == numel * dtype size == the shape product, and the
 * by-name lookup finds every tensor. Every element of small tensors is read through
 * nd_tview_get_f32, so a view that points past the mapping faults here. */
#include <string.h>
#include "ckpt/ckpt_internal.h"
#include "fuzz_common.h"

static int load(const char *path, void *out, nd_err *e) { return nd_st_open(path, out, e); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nd_st_file *f = NULL;
    if (!fz_parse("model.safetensors", data, size, load, &f)) return 0;
    const unsigned char *lo = f->map + f->data_start, *hi = f->map + f->size;
    FZ_ASSERT(f->data_start >= 8 && f->data_start <= f->size, "data_start %zu, size %zu", f->data_start, f->size);
    for (size_t i = 0; i < nd_st_count(f); i++) {
        const nd_tview *t = nd_st_at(f, i);
        FZ_ASSERT(t->ndim >= 0 && t->ndim <= ND_MAX_DIMS, "ndim %d", t->ndim);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            FZ_ASSERT(t->shape[d] >= 0, "negative dim");
            FZ_ASSERT(!__builtin_mul_overflow(numel, t->shape[d], &numel), "shape product overflows");
        }
        FZ_ASSERT(numel == t->numel, "numel %lld != shape product %lld", (long long)t->numel, (long long)numel);
        FZ_ASSERT((uint64_t)t->nbytes == (uint64_t)numel * nd_dtype_size(t->dtype), "nbytes");
        const unsigned char *b = t->data;
        FZ_ASSERT(b >= lo && b <= hi && t->nbytes <= (size_t)(hi - b), "tensor '%s' outside the data area", t->name);
        FZ_ASSERT(nd_st_find(f, t->name) == t, "lookup of '%s'", t->name);
        volatile float sink = 0;
        for (int64_t k = 0; k < t->numel && k < 4096; k++) sink += nd_tview_get_f32(t, k);
        (void)sink;
    }
    (void)nd_st_metadata(f, "format");
    nd_st_close(f);
    return 0;
}
