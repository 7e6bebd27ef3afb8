/* module.c — bind a linear module to its tensors by the names present, and normalise its scales.
 *
 *   P.weight_packed U8 + P.weight_scale E4M3 (+ P.weight_global_scale, P.input_global_scale)
 *        -> NVFP4, compressed-tensors (globals are divisors: 2688/amax)
 *   P.weight U8 + P.weight_scale E4M3 (+ P.weight_scale_2, P.input_scale)
 *        -> NVFP4, ModelOpt (globals are multipliers amax/2688: normalised as 1/value)
 *   P.weight U8/I8 + P.scale (or P.weight_scale) E8M0 [N, K/32]         -> MXFP4 (DeepSeek; gpt-oss's
 *        fused experts as views, mx_experts.c)
 *   P.weight_packed U8 + P.weight_scale U8/E8M0 [N, K/32]               -> MXFP4, compressed-tensors
 *        (mxfp4-pack-quantized: E8M0 exponents stored as uint8)
 *   P.weight E4M3 + P.weight_scale F32 | P.weight_scale_inv F32 | P.scale E8M0 -> FP8
 *   P.weight BF16/F16/F32 [N, K]                                        -> dense
 * A missing weight or block scale, and scales of the wrong dtype or shape, are bad input. A
 * block-scale tensor padded like a kernel's buffer ([N or round_up(N, 128), round_up(K/16, 2^j)],
 * j <= 7) binds: its bytes are read as the [N, K/16] a loader expects (the audit names it
 * scale_layout_mismatch; the repair reads rows of its own length). A
 * missing global or input scale is not: its normalised value is NaN, and inspect reports it.
 * Global scales with one value per fused shard ([s]) set n_shards; the normalised value is the
 * largest divisor over the shards (a NaN in any shard gives NaN), the raw tensor keeps them all.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "ckpt/ckpt_internal.h"
#include "numerics/nd_numerics.h"

float nd_tview_get_f32(const nd_tview *t, int64_t i) {
    if (!t || i < 0 || i >= t->numel) return NAN;
    const unsigned char *p = (const unsigned char *)t->data + (size_t)i * nd_dtype_size(t->dtype);
    switch (t->dtype) {
    case ND_DT_F32: { float f; memcpy(&f, p, 4); return f; }
    case ND_DT_F64: { double d; memcpy(&d, p, 8); return (float)d; }
    case ND_DT_BF16: { uint16_t h; memcpy(&h, p, 2); return nd_bf16_to_f32(h); }
    case ND_DT_F16: { uint16_t h; memcpy(&h, p, 2); return nd_f16_to_f32(h); }
    case ND_DT_F8_E4M3: return nd_e4m3_to_f32(*p);
    case ND_DT_F8_E8M0: return nd_e8m0_to_f32(*p);
    default: return NAN;
    }
}

typedef struct bind { const nd_ckpt *c; const char *path; nd_err *e; } bind;

static const nd_tview *tens(const bind *b, const char *suffix) {
    char name[600];
    snprintf(name, sizeof name, "%s.%s", b->path, suffix);
    return nd_ckpt_find(b->c, name);
}

static char *shape_str(const nd_tview *t, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < t->ndim && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

static int bad(const bind *b, const nd_tview *t, const char *fmt_what, const char *expect) {
    char s[96];
    return nd_fail(b->e, ND_EXIT_BADINPUT, "%s: tensor '%s': %s %s, %s (expected %s)", t->file, t->name,
                   nd_dtype_str(t->dtype), shape_str(t, s, sizeof s), fmt_what, expect);
}

static int missing(const bind *b, const char *suffix, const char *why) {
    return nd_fail(b->e, ND_EXIT_BADINPUT, "%s: module '%s': missing tensor '%s.%s' (%s)", nd_ckpt_dir(b->c),
                   b->path, b->path, suffix, why);
}

static int is2d(const nd_tview *t, int64_t r, int64_t c) { return t->ndim == 2 && t->shape[0] == r && t->shape[1] == c; }

/* Per-tensor global or input scale: a float scalar, [1], or one value per fused shard [s]. */
static int global_ok(const bind *b, const nd_tview *t, int *shards) {
    if (t->dtype != ND_DT_F32 && t->dtype != ND_DT_BF16 && t->dtype != ND_DT_F16 && t->dtype != ND_DT_F64)
        return bad(b, t, "not a float type", "F32 scalar or [shards]");
    if (t->ndim > 1 || t->numel < 1) return bad(b, t, "wrong shape", "F32 scalar or [shards]");
    if (*shards > 1 && t->numel > 1 && t->numel != *shards) return bad(b, t, "shard count differs from the other global scale", "the same number of shards");
    if (t->numel > *shards) *shards = (int)t->numel;
    return 0;
}

/* Largest divisor over shards; NaN if any shard is NaN. invert: stored value is a multiplier. */
static float normalise(const nd_tview *t, int invert) {
    if (!t) return NAN;
    float best = -INFINITY;
    for (int64_t i = 0; i < t->numel; i++) {
        float v = nd_tview_get_f32(t, i);
        if (invert) v = 1.0f / v;
        if (isnan(v)) return NAN;
        if (v > best) best = v;
    }
    return best;
}

int nd_sf_padded_shape(const nd_tview *s, int64_t n, int64_t nb) {
    if (!s || s->ndim != 2 || s->shape[0] < n || s->shape[0] > (n + 127) / 128 * 128 || s->shape[1] < nb) return 0;
    if (s->shape[0] == n && s->shape[1] == nb) return 0;
    for (int64_t mult = 1; mult <= 128; mult *= 2)
        if (s->shape[1] == (nb + mult - 1) / mult * mult) return 1;
    return 0;
}

static int bind_nvfp4(const bind *b, nd_module *m, const nd_tview *w, int modelopt) {
    const nd_tview *s = tens(b, "weight_scale");
    if (w->dtype != ND_DT_U8 || w->ndim != 2) return bad(b, w, "not packed FP4 codes", "U8 [N, K/2]");
    m->out_features = w->shape[0];
    m->in_features = 2 * w->shape[1];
    const int blk = modelopt ? nd_qcfg_nvfp4_block(&b->c->q, b->path) : ND_NVFP4_BLOCK;
    char exp[96];
    snprintf(exp, sizeof exp, "F8_E4M3 [N, K/%d]", blk);
    if (!s) return missing(b, "weight_scale", "NVFP4 block scales");
    if (s->dtype != ND_DT_F8_E4M3) return bad(b, s, "wrong dtype for NVFP4 block scales", exp);
    snprintf(exp, sizeof exp, "U8 [N, K/2] with K %% %d == 0", blk);
    if (m->in_features % blk) return bad(b, w, blk == 16 ? "K is not a multiple of 16" : "K is not a multiple of 32", exp);
    if (!is2d(s, m->out_features, m->in_features / blk) &&
        (blk != ND_NVFP4_BLOCK || !nd_sf_padded_shape(s, m->out_features, m->in_features / ND_NVFP4_BLOCK))) {
        snprintf(exp, sizeof exp, "F8_E4M3 [%lld, %lld] for packed weight [%lld, %lld]", (long long)m->out_features,
                 (long long)(m->in_features / blk), (long long)w->shape[0], (long long)w->shape[1]);
        return bad(b, s, "block scales do not match the weight", exp);
    }
    m->block = blk;
    m->act_fp8 = modelopt && nd_qcfg_act_fp8_static(&b->c->q, b->path);
    /* pre_quant_scale is applied where the config's algorithm is NVFP4_AWQ, as a loader does; elsewhere
     * it is a tensor no loader reads (audit: quant_config_mismatch) */
    if (modelopt && nd_qcfg_awq(&b->c->q, b->path) && (m->pre_quant_scale = tens(b, "pre_quant_scale"))) {
        const nd_tview *p = m->pre_quant_scale;
        snprintf(exp, sizeof exp, "BF16/F16/F32 [%lld]", (long long)m->in_features);
        if ((p->dtype != ND_DT_BF16 && p->dtype != ND_DT_F16 && p->dtype != ND_DT_F32) || p->ndim != 1 || p->shape[0] != m->in_features)
            return bad(b, p, "AWQ pre_quant_scale does not match the weight's input features", exp);
    }
    m->global_num = blk == 32 ? 448.0f : ND_NVFP4_GLOBAL_NUM;
    m->wfmt = ND_WF_NVFP4;
    m->conv = modelopt ? ND_CONV_MODELOPT : ND_CONV_CT;
    m->weight = w;
    m->weight_scale = s;
    m->weight_global = tens(b, modelopt ? "weight_scale_2" : "weight_global_scale");
    m->input_global = tens(b, modelopt ? "input_scale" : "input_global_scale");
    int shards = 1;
    if (m->weight_global) ND_TRY(global_ok(b, m->weight_global, &shards));
    if (m->input_global) ND_TRY(global_ok(b, m->input_global, &shards));
    m->n_shards = shards;
    m->weight_global_div = normalise(m->weight_global, modelopt);
    m->input_global_mult = normalise(m->input_global, modelopt);
    return 0;
}

static int bind_mxfp4(const bind *b, nd_module *m, const nd_tview *w, const nd_tview *s, nd_conv conv) {
    if (w->ndim != 2 || (conv == ND_CONV_CT && w->dtype != ND_DT_U8)) return bad(b, w, "not packed FP4 codes", "U8 [N, K/2]");
    m->out_features = w->shape[0];
    m->in_features = 2 * w->shape[1];
    if (m->in_features % 32) return bad(b, w, "K is not a multiple of 32", "U8 [N, K/2] with K % 32 == 0");
    if (!is2d(s, m->out_features, m->in_features / 32)) return bad(b, s, "block scales do not match the weight", "F8_E8M0 [N, K/32]");
    m->wfmt = ND_WF_MXFP4;
    m->conv = conv;
    m->weight = w;
    m->weight_scale = s;
    return 0;
}

/* FP8 block size: the compressed-tensors group's block_structure, DeepSeek's weight_block_size, 128. */
static void fp8_block(const bind *b, int *bn, int *bk) {
    const nd_qcfg *q = &b->c->q;
    const nd_ct_group *g = nd_qcfg_ct_group(q, b->path);
    *bn = *bk = 128;
    if (g && g->block_n > 0) { *bn = g->block_n; *bk = g->block_k; }
    else if (q->fp8_block_n > 0) { *bn = q->fp8_block_n; *bk = q->fp8_block_k; }
}

static int bind_fp8(const bind *b, nd_module *m, const nd_tview *w) {
    if (w->ndim != 2) return bad(b, w, "FP8 weight is not 2-D", "F8_E4M3 [N, K]");
    int64_t N = w->shape[0], K = w->shape[1];
    m->out_features = N;
    m->in_features = K;
    m->wfmt = ND_WF_FP8;
    m->weight = w;
    const nd_tview *s = tens(b, "weight_scale");
    const char *sname = "weight_scale";
    m->conv = b->c->q.fmt == ND_CKPT_MODELOPT ? ND_CONV_MODELOPT : b->c->q.fmt == ND_CKPT_FP8 ? ND_CONV_DEEPSEEK : ND_CONV_CT;
    if (!s) { s = tens(b, "weight_scale_inv"); sname = "weight_scale_inv"; m->conv = ND_CONV_DEEPSEEK; }
    if (!s) { s = tens(b, "scale"); sname = "scale"; m->conv = ND_CONV_DEEPSEEK; }
    if (!s) return missing(b, "weight_scale", "FP8 weight needs weight_scale, weight_scale_inv or scale");
    m->weight_scale = s;
    fp8_block(b, &m->bn, &m->bk);
    int64_t gn = (N + m->bn - 1) / m->bn, gk = (K + m->bk - 1) / m->bk;
    char exp[160];
    snprintf(exp, sizeof exp, "[] or [1] per tensor, [%lld] or [%lld, 1] per channel, or [%lld, %lld] blocks of %dx%d",
             (long long)N, (long long)N, (long long)gn, (long long)gk, m->bn, m->bk);
    if (s->dtype == ND_DT_F8_E8M0) {
        if (!is2d(s, gn, gk)) return bad(b, s, "E8M0 block scales do not match the weight", exp);
        m->fp8_scale_kind = ND_FP8_SCALE_BLOCK_E8M0;
        return 0;
    }
    if (s->dtype != ND_DT_F32) return bad(b, s, "FP8 weight scales must be F32 (or E8M0 blocks)", exp);
    int ws = strcmp(sname, "weight_scale") == 0;
    /* DeepSeek's weight_scale_inv / scale are always 128x128 blocks; weight_scale may be any kind */
    if (is2d(s, gn, gk) && !(ws && s->numel == 1)) m->fp8_scale_kind = ND_FP8_SCALE_BLOCK_F32;
    else if (!ws) return bad(b, s, "FP8 block scales do not match the weight", exp);
    else if (s->numel == 1 && s->ndim <= 2) m->fp8_scale_kind = ND_FP8_SCALE_TENSOR;
    else if ((s->ndim == 1 && s->shape[0] == N) || is2d(s, N, 1)) m->fp8_scale_kind = ND_FP8_SCALE_CHANNEL;
    else return bad(b, s, "FP8 scales do not match the weight", exp);
    return 0;
}

static int module_bind(const nd_ckpt *c, const char *path, nd_module *m, nd_err *e) {
    memset(m, 0, sizeof *m);
    m->weight_global_div = NAN;
    m->input_global_mult = NAN;
    m->n_shards = 1;
    m->block = ND_NVFP4_BLOCK;
    m->global_num = ND_NVFP4_GLOBAL_NUM;
    if (strlen(path) >= sizeof m->path)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: module path '%.64s...' is too long", nd_ckpt_dir(c), path);
    snprintf(m->path, sizeof m->path, "%s", path);
    bind b = { c, path, e };
    const nd_tview *wp = tens(&b, "weight_packed"), *w = tens(&b, "weight");
    int rc;
    /* ModelOpt's microscaling algorithms (E8M0 scales per 32 in U8 tensors): refused by name rather than
     * read as NVFP4 or FP8 and refused for a dtype (issue 33 lists them; not replayed yet) */
    const char *algo = "";
    if (w && c->q.fmt == ND_CKPT_MODELOPT && nd_qcfg_nvfp4_algo_conflict(&c->q, path, &algo) &&
        (!strncmp(algo, "MX", 2) || !strcmp(algo, "W4A8_MXFP4_FP8")))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s is quantized with ModelOpt's %s (%s config), a microscaling scheme (E8M0 "
                       "block scales per 32) this version does not replay yet", nd_ckpt_dir(c), path, algo,
                       c->q.source[0] ? c->q.source : "config.json");
    if (wp) {
        /* compressed-tensors mxfp4-pack-quantized: weight_packed + U8 E8M0 exponents per 32 */
        const nd_tview *ws = tens(&b, "weight_scale");
        if (ws && (ws->dtype == ND_DT_U8 || ws->dtype == ND_DT_F8_E8M0)) rc = bind_mxfp4(&b, m, wp, ws, ND_CONV_CT);
        else rc = bind_nvfp4(&b, m, wp, 0);
    }
    else if (!w) return missing(&b, "weight", "no weight or weight_packed tensor");
    else if (w->dtype == ND_DT_U8 || w->dtype == ND_DT_I8) {
        const nd_tview *ws = tens(&b, "weight_scale"), *sc = tens(&b, "scale");
        if (sc && sc->dtype == ND_DT_F8_E8M0) rc = bind_mxfp4(&b, m, w, sc, ND_CONV_DEEPSEEK);
        else if (ws && ws->dtype == ND_DT_F8_E8M0) rc = bind_mxfp4(&b, m, w, ws, ND_CONV_DEEPSEEK);
        else if (w->dtype == ND_DT_U8) rc = bind_nvfp4(&b, m, w, 1);
        else if (sc || ws) return bad(&b, sc ? sc : ws, "wrong dtype for MXFP4 block scales", "F8_E8M0 [N, K/32]");
        else return missing(&b, "scale", "packed FP4 weight without block scales");
    } else if (w->dtype == ND_DT_F8_E4M3) rc = bind_fp8(&b, m, w);
    else if (w->dtype == ND_DT_BF16 || w->dtype == ND_DT_F16 || w->dtype == ND_DT_F32) {
        if (w->ndim != 2) return bad(&b, w, "not a 2-D linear weight", "[N, K]");
        m->wfmt = ND_WF_DENSE;
        m->weight = w;
        m->out_features = w->shape[0];
        m->in_features = w->shape[1];
        rc = 0;
    } else return bad(&b, w, "unsupported weight dtype", "BF16/F16/F32, F8_E4M3, or U8 packed FP4");
    if (rc) return rc;
    const nd_tview *bias = tens(&b, "bias");
    if (bias) {
        if ((bias->dtype != ND_DT_BF16 && bias->dtype != ND_DT_F16 && bias->dtype != ND_DT_F32) || bias->ndim != 1 ||
            bias->shape[0] != m->out_features)
            return bad(&b, bias, "bias does not match the weight", "BF16/F16/F32 [N]");
        m->bias = bias;
    }
    if (m->wfmt == ND_WF_MXFP4) {
        /* MXFP4 activations only where the config says so (compressed-tensors MXFP4 with 4-bit inputs) */
        int known;
        int aq = nd_qcfg_act_quant(&c->q, path, &known);
        m->act_quant = known && aq;
    }
    if (m->wfmt == ND_WF_NVFP4) {
        /* NVFP4 tensors under a ModelOpt algorithm of another scheme (FP8, INT4 AWQ, W4A8 AWQ):
         * which activations the engine quantizes is not known, so nothing is guessed */
        const char *algo;
        if (nd_qcfg_nvfp4_algo_conflict(&c->q, path, &algo))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s holds NVFP4 tensors, but the ModelOpt config (%s) gives it quant_algo "
                           "%s, which is not an NVFP4 scheme (NVFP4, NVFP4_AWQ, W4A16_NVFP4, W4A8_NVFP4_FP8, NVFP4_SVD)",
                           nd_ckpt_dir(c), path, c->q.source[0] ? c->q.source : "config.json", algo);
        int known;
        int aq = nd_qcfg_act_quant(&c->q, path, &known);
        m->act_quant = known ? aq : (m->conv == ND_CONV_MODELOPT ? 1 : m->input_global != NULL);
    }
    return 0;
}

int nd_ckpt_module(const nd_ckpt *c, const char *path, nd_module *m, nd_err *e) {
    nd_err local;
    if (!e) e = &local;
    ND_TRY(module_bind(c, path, m, e));
    /* a config regex that ran past its match limit on this name decided nothing: refused */
    return nd_qcfg_pattern_error(&c->q, nd_ckpt_dir(c), e);
}

const char *nd_gate_up_sibling(const char *path, const char **self) {
    static const char *const pair[][2] = {{"gate_proj", "up_proj"}, {"w1", "w3"}};
    const char *dot = strrchr(path, '.'), *leaf = dot ? dot + 1 : path;
    for (size_t i = 0; i < sizeof pair / sizeof pair[0]; i++)
        for (int j = 0; j < 2; j++)
            if (!strcmp(leaf, pair[i][j])) {
                if (self) *self = pair[i][j];
                return pair[i][!j];
            }
    return NULL;
}
