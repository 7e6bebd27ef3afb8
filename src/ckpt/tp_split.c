/* tp_split.c — tensor-parallel splits of NVFP4 linears (tp_split.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/tp_split.h"

static const char *last_part(const char *p) {
    const char *d = strrchr(p, '.');
    return d ? d + 1 : p;
}

nd_tp_kind nd_tp_kind_of(const char *path) {
    const char *l = last_part(path);
    static const char *const row[] = {"o_proj", "down_proj", "w2", "wo_b", "out_proj", "wo"};
    static const char *const rep[] = {"q_a_proj", "kv_a_proj_with_mqa", "wq_a", "wkv", "gate", "router"};
    if (strstr(path, "compressor") || strstr(path, "indexer")) return ND_TP_REPLICATED;
    for (size_t i = 0; i < sizeof rep / sizeof rep[0]; i++)
        if (!strcmp(l, rep[i])) return ND_TP_REPLICATED;
    for (size_t i = 0; i < sizeof row / sizeof row[0]; i++)
        if (!strcmp(l, row[i])) return ND_TP_ROW;
    return ND_TP_COLUMN;
}

const char *nd_tp_kind_str(nd_tp_kind k) {
    return k == ND_TP_ROW ? "row-parallel" : k == ND_TP_COLUMN ? "column-parallel" : "replicated";
}

void nd_ckpt_path_pattern(const char *p, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; p[i] && o + 2 < cap; i++) {
        if (p[i] == '.' && p[i + 1] >= '0' && p[i + 1] <= '9') {
            size_t j = i + 1;
            while (p[j] >= '0' && p[j] <= '9') j++;
            if (p[j] == '.' || !p[j]) { out[o++] = '.'; out[o++] = '#'; i = j - 1; continue; }
        }
        out[o++] = p[i];
    }
    out[o] = 0;
}

typedef struct seen { char key[320]; } seen;

int nd_tp_check(const nd_ckpt *c, int tp, nd_findings *f, nd_err *e) {
    if (tp < 1) return nd_fail(e, ND_EXIT_BADINPUT, "--tp must be at least 1");
    size_t n = nd_ckpt_module_count(c), ns = 0;
    seen *sv = calloc(n ? n : 1, sizeof *sv);
    if (!sv) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        nd_module m;
        if ((rc = nd_ckpt_module(c, nd_ckpt_module_path(c, i), &m, e))) break;
        if (m.wfmt != ND_WF_NVFP4) continue;
        nd_tp_kind k = nd_tp_kind_of(m.path);
        if (k == ND_TP_REPLICATED || tp == 1) continue;
        char key[320], col[300];
        nd_ckpt_path_pattern(m.path, col, sizeof col);
        snprintf(key, sizeof key, "%s %lld %lld", col, (long long)m.out_features, (long long)m.in_features);
        size_t j;
        for (j = 0; j < ns; j++)
            if (!strcmp(sv[j].key, key)) break;
        if (j < ns) continue;
        snprintf(sv[ns++].key, sizeof sv[0].key, "%s", key);
        const int64_t N = m.out_features, K = m.in_features;
        const int64_t dim = k == ND_TP_ROW ? K : N;
        const char *dn = k == ND_TP_ROW ? "K" : "N";
        char tn[320];
        snprintf(tn, sizeof tn, "%s", m.weight_scale->name);
        if (dim % tp || (k == ND_TP_ROW && (K / tp) % 16)) {
            if (nd_findings_add(f, ND_BREAKS_ALL, "padding_scale_contamination", m.path, tn,
                                "%s [%lld x %lld] is %s: at --tp %d each rank gets %s = %lld/%d = %.6g, which %s: a 16-block "
                                "and its block scale straddle two ranks, no loader can give each rank whole blocks "
                                "(modules like it: %s)",
                                m.path, (long long)N, (long long)K, nd_tp_kind_str(k), tp, dn, (long long)dim, tp,
                                (double)dim / tp, dim % tp ? "is not an integer" : "is not a multiple of 16", col))
                rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
            /* where rank 1 begins: a block-scale row (column split) or column (row split) */
            nd_findings_set_coord(f, k == ND_TP_ROW ? -1 : N / tp, k == ND_TP_ROW ? (K / tp) / 16 : -1);
            continue;
        }
        const int64_t Nr = k == ND_TP_ROW ? N : N / tp, Kr = k == ND_TP_ROW ? K / tp : K;
        char why[400] = "";
        size_t o = 0;
        if (Nr % 32 || Kr % 32)
            o += (size_t)snprintf(why + o, sizeof why - o, "the CUTLASS/FlashInfer FP4 GEMM needs N and K multiples of 32 "
                                  "(vLLM pads the weight and the activation: pad_nvfp4_weight_for_cutlass)");
        if (o < sizeof why && (Nr % 128 || (Kr / 16) % 4))
            o += (size_t)snprintf(why + o, sizeof why - o, "%sthe swizzled 128x4 block-scale layout (scaled_fp4_quant, "
                                  "swizzle_blockscale) pads %lld scale rows and %lld scale columns that the kernels read: "
                                  "harmless when zeroed, NaN or garbage when left uninitialised",
                                  o ? "; " : "", (long long)((128 - Nr % 128) % 128), (long long)((4 - (Kr / 16) % 4) % 4));
        if (!o) continue;
        if (nd_findings_add(f, ND_BREAKS_NONE, "padding_scale_contamination", m.path, tn,
                            "%s [%lld x %lld] is %s: at --tp %d each rank holds [%lld x %lld]; %s (modules like it: %s)",
                            m.path, (long long)N, (long long)K, nd_tp_kind_str(k), tp, (long long)Nr, (long long)Kr, why, col))
            rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        nd_findings_set_coord(f, k == ND_TP_ROW ? -1 : Nr, k == ND_TP_ROW ? Kr / 16 : -1);
    }
    free(sv);
    return rc;
}
