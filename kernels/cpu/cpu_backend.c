/* cpu_backend.c — nd_backend_cpu_create: the reference backend's op table. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cpu_internal.h"
#include "cpu_compressed.h"

static void cpu_destroy(nd_backend *b) { free(b); }

int nd_backend_cpu_create(nd_backend **out, nd_err *e) {
    if (!out) return nd_fail(e, ND_EXIT_INTERNAL, "cpu: create: NULL output pointer");
    *out = NULL;
    nd_backend *b = calloc(1, sizeof *b);
    if (!b) return nd_fail(e, ND_EXIT_INTERNAL, "cpu: create: out of memory");
    b->name = "cpu";
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(b->device, sizeof b->device, "host CPU (%ld cores online)", ncpu > 0 ? ncpu : 1L);
    b->destroy = cpu_destroy;
    b->alloc = nd_cpu_alloc;
    b->release = nd_cpu_release;
    b->host_alloc = nd_cpu_alloc; /* host memory is all the same to this backend */
    b->host_free = nd_cpu_release;
    b->staging_pays = 0;
    b->upload = nd_cpu_upload;
    b->download = nd_cpu_download;
    b->copy = nd_cpu_copy;
    b->copy2d = nd_cpu_copy2d;
    b->sync = nd_cpu_sync;
    b->dequant_nvfp4 = nd_cpu_dequant_nvfp4;
    b->dequant_mxfp4 = nd_cpu_dequant_mxfp4;
    b->dequant_fp8 = nd_cpu_dequant_fp8;
    b->to_f32 = nd_cpu_to_f32;
    b->quant_nvfp4 = nd_cpu_quant_nvfp4;
    b->fake_quant_fp8 = nd_cpu_fake_quant_fp8;
    b->kv_fp8 = nd_cpu_kv_fp8;
    b->swizzle_sf = nd_cpu_swizzle_sf;
    b->unswizzle_sf = nd_cpu_unswizzle_sf;
    b->gemm = nd_cpu_gemm;
    b->gemm_grouped = nd_cpu_gemm_grouped;
    b->round_bf16 = nd_cpu_round_bf16;
    b->cast_f16_scale = nd_cpu_cast_f16_scale;
    b->rmsnorm = nd_cpu_rmsnorm;
    b->add = nd_cpu_add;
    b->add_bias = nd_cpu_add_bias;
    b->swiglu = nd_cpu_swiglu;
    b->rope = nd_cpu_rope;
    b->attention = nd_cpu_attention;
    b->hc_pre = nd_cpu_hc_pre;
    b->hc_post = nd_cpu_hc_post;
    b->hc_head = nd_cpu_hc_head;
    b->router_topk = nd_cpu_router_topk;
    b->gather_rows = nd_cpu_gather_rows;
    b->scatter_add_rows = nd_cpu_scatter_add_rows;
    b->compare = nd_cpu_compare;
    b->compress_pool = nd_cpu_compress_pool;
    b->indexer_topk = nd_cpu_indexer_topk;
    b->attention_compressed = nd_cpu_attention_compressed;
    *out = b;
    return 0;
}

int nd_cpu_check_sizes(nd_err *e, const char *op, int nsizes, const int64_t *sizes) {
    int64_t prod = 1;
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] < 0)
            return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: negative size %lld (argument %d)", op,
                           (long long)sizes[i], i);
        if (sizes[i] != 0 && prod > INT64_MAX / sizes[i])
            return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: sizes overflow a 64-bit element count", op);
        prod *= sizes[i];
    }
    return 0;
}
