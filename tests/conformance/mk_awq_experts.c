/* mk_awq_experts.c — a ModelOpt NVFP4 checkpoint's tensors with an AWQ pre_quant_scale [K] (BF16)
 * beside every routed expert's linear, as ModelOpt's NVFP4_AWQ export writes one (issue 33 item 2):
 * searched-looking scales (0.5 .. 0.9375, by channel and expert: below 1, so the stored input scale still covers x * scale) for every expert, except that the
 * experts named by ONES get scales of exactly 1 (calibration never reached them). The weights are
 * not rescaled: a fixture of the pre_quant_scale pattern the static check reads, replayed
 * consistently on both paths. The caller writes hf_quant_config.json's quant_algo NVFP4_AWQ.
 * With VALUE, the listed experts get that value instead of 1 (0, nan: a broken scale).
 *   usage: mk_awq_experts SRC_DIR OUT.safetensors [ONES [VALUE]]   (ONES: comma-separated expert ids, or "all") */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "numerics/nd_numerics.h"

static int listed(const char *list, long id) {
    if (!list) return 0;
    if (!strcmp(list, "all")) return 1;
    for (const char *p = list; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) return 0;
        if (v == id) return 1;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5) { fprintf(stderr, "usage: mk_awq_experts SRC_DIR OUT.safetensors [ONES [VALUE]]\n"); return 2; }
    const float listed_value = argc > 4 ? strtof(argv[4], NULL) : 1.0f;
    nd_err e = {0};
    nd_ckpt *ck = NULL;
    nd_st_writer *w = NULL;
    if (nd_ckpt_open(argv[1], &ck, &e) || nd_st_writer_open(argv[2], &w, &e)) {
        fprintf(stderr, "mk_awq_experts: %s\n", e.msg);
        return 2;
    }
    int rc = 0, added = 0;
    /* the writer keeps the data pointers until it closes: the scales live until then */
    uint16_t **bufs = calloc(nd_ckpt_count(ck) + 1, sizeof *bufs);
    if (!bufs) return 2;
    for (size_t i = 0; !rc && i < nd_ckpt_count(ck); i++) {
        const nd_tview *t = nd_ckpt_at(ck, i);
        rc = nd_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, &e);
        /* beside each expert's packed weight [N, K/2]: its pre_quant_scale [K] */
        const char *x = strstr(t->name, ".experts."), *suf = strrchr(t->name, '.');
        if (rc || !x || !suf || strcmp(suf, ".weight") || t->dtype != ND_DT_U8 || t->ndim != 2) continue;
        const long id = strtol(x + 9, NULL, 10);
        const int64_t k = 2 * t->shape[1];
        uint16_t *v = malloc((size_t)k * sizeof *v);
        if (!v) { rc = 1; break; }
        for (int64_t c = 0; c < k; c++)
            v[c] = nd_bf16_from_f32(listed(argc > 3 ? argv[3] : NULL, id) ? listed_value : 0.5f + 0.0625f * (float)((c + id) % 8));
        char name[600];
        snprintf(name, sizeof name, "%.*s.pre_quant_scale", (int)(suf - t->name), t->name);
        const int64_t shape[1] = {k};
        rc = nd_st_writer_add(w, name, ND_DT_BF16, 1, shape, v, &e);
        bufs[added++] = v;
    }
    if (!rc) rc = nd_st_writer_close(w, &e);
    else nd_st_writer_abort(w);
    nd_ckpt_close(ck);
    for (int i = 0; i < added; i++) free(bufs[i]);
    free(bufs);
    if (rc) { fprintf(stderr, "mk_awq_experts: %s\n", e.msg[0] ? e.msg : "out of memory"); return 2; }
    printf("%d pre_quant_scale tensors added\n", added);
    return added ? 0 : 1;
}
