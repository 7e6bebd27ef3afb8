/* audit.c — the static audit of inspect (audit.h): config against tensors, roles, orphans,
 * block-scale health with coordinates. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/audit.h"
#include "ckpt/ckpt_internal.h"
#include "ckpt/tp_split.h"
#include "numerics/nd_numerics.h"

typedef enum { ROLE_LINEAR = 0, ROLE_LM_HEAD, ROLE_EMBED, ROLE_ROUTER, ROLE_NORM, ROLE_HC } role_t;
static const char *const ROLE_NAME[] = {"linear", "lm_head", "embedding", "router gate", "norm", "hyper-connection"};

static const char *last_part(const char *p) {
    const char *d = strrchr(p, '.');
    return d ? d + 1 : p;
}

static role_t role_of(const char *path) {
    const char *l = last_part(path);
    if (!strcmp(l, "lm_head") || !strcmp(path, "head") || !strcmp(path, "model.head")) return ROLE_LM_HEAD;
    if (!strcmp(l, "embed_tokens") || !strcmp(l, "embed") || !strcmp(l, "wte") || !strcmp(l, "tok_embeddings") ||
        !strcmp(l, "word_embeddings"))
        return ROLE_EMBED;
    if (!strcmp(l, "gate") || !strcmp(l, "router")) return ROLE_ROUTER;
    if (strstr(l, "norm")) return ROLE_NORM;
    if (!strncmp(l, "hc_", 3) || strstr(path, ".hc_")) return ROLE_HC;
    return ROLE_LINEAR;
}

/* ---- names a loader of the module's format reads, and the other format's ---- */
static const char *own_name(const nd_module *m, int weight) {
    if (m->conv == ND_CONV_MODELOPT) return weight ? "weight_scale_2" : "input_scale";
    return weight ? "weight_global_scale" : "input_global_scale";
}
static const char *other_name(const nd_module *m, int weight) {
    if (m->conv == ND_CONV_MODELOPT) return weight ? "weight_global_scale" : "input_global_scale";
    return weight ? "weight_scale_2" : "input_scale";
}

static const nd_tview *find2(const nd_ckpt *c, const char *path, const char *suffix) {
    char n[600];
    snprintf(n, sizeof n, "%s.%s", path, suffix);
    return nd_ckpt_find(c, n);
}

const nd_tview *nd_module_orphan_scale(const nd_ckpt *c, const nd_module *m, int weight) {
    if (m->wfmt != ND_WF_NVFP4) return NULL;
    if (weight ? m->weight_global != NULL : m->input_global != NULL) return NULL;
    return find2(c, m->path, other_name(m, weight));
}

/* "P.experts.N.S" -> prefix "P.experts." and suffix "S"; 0 when not a routed expert. */
static int expert_split(const char *path, size_t *pre, const char **suf, long *idx) {
    const char *x = strstr(path, ".experts.");
    if (!x) return 0;
    const char *d = x + 9;
    char *end;
    long n = strtol(d, &end, 10);
    if (end == d || *end != '.') return 0;
    *pre = (size_t)(d - path);
    *suf = end + 1;
    *idx = n;
    return 1;
}

/* How many of the first sibling experts (other than m, at most 8 looked at) hold tensor `t`. */
static int siblings_with(const nd_ckpt *c, const char *path, const char *t, int *looked) {
    size_t pre;
    const char *suf;
    long self;
    *looked = 0;
    if (!expert_split(path, &pre, &suf, &self)) return 0;
    int have = 0;
    for (long j = 0; j < 64 && *looked < 8; j++) {
        if (j == self) continue;
        char n[700];
        snprintf(n, sizeof n, "%.*s%ld.%s", (int)pre, path, j, suf);
        if (!nd_ckpt_has_module(c, n)) continue;
        (*looked)++;
        have += find2(c, n, t) != NULL;
    }
    return have;
}

/* A routed expert without the scale its siblings have. */
static int expert_missing(const nd_ckpt *c, const nd_module *m, int weight) {
    if (m->wfmt != ND_WF_NVFP4) return 0;
    if (weight ? m->weight_global != NULL : (m->input_global != NULL || !m->act_quant)) return 0;
    int looked, have = siblings_with(c, m->path, own_name(m, weight), &looked);
    return looked > 0 && have > 0;
}

int nd_module_scale_unloaded(const nd_ckpt *c, const nd_module *m, int weight) {
    return nd_module_orphan_scale(c, m, weight) != NULL || expert_missing(c, m, weight);
}

/* ---- the quantization config of one module ---- */
typedef struct scheme {
    int quantized;            /* the config quantizes it */
    int explicit_target;      /* by exact name or regex (CT), or a MIXED_PRECISION entry (ModelOpt) */
    const char *ignored_by;   /* the ignore / exclude pattern that matches it, or NULL */
    const nd_ct_group *group; /* compressed-tensors group */
    const char *algo;         /* ModelOpt quant_algo */
} scheme;

static const char *match_any(const nd_pat *p, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (nd_pat_match(&p[i], name)) return p[i].text;
    return NULL;
}

static scheme scheme_of(const nd_ckpt *c, const char *path) {
    scheme s = {0};
    const nd_qcfg *q = &c->q;
    s.quantized = !nd_qcfg_ignored(q, path) && q->fmt != ND_CKPT_UNQUANTIZED && q->fmt != ND_CKPT_FP8 &&
                  q->fmt != ND_CKPT_MXFP4;
    if (q->fmt == ND_CKPT_COMPRESSED_TENSORS) {
        s.ignored_by = match_any(q->ignore, q->n_ignore, path);
        s.group = nd_qcfg_ct_group(q, path);
        if (s.group)
            for (size_t t = 0; t < s.group->n_targets; t++)
                if (s.group->targets[t].kind != ND_PAT_CLASS && nd_pat_match(&s.group->targets[t], path)) s.explicit_target = 1;
    } else if (q->fmt == ND_CKPT_MODELOPT) {
        s.ignored_by = match_any(q->exclude, q->n_exclude, path);
        s.algo = s.quantized ? q->mo_algo : NULL;
        s.explicit_target = s.quantized && !strcmp(q->mo_algo, "MIXED_PRECISION");
    }
    return s;
}


/* ---- block-scale health of one NVFP4 module ---- */
typedef struct health {
    int64_t count, nonzero, subnormal, negative, pow2, nan;
    int64_t sub_r, sub_c, neg_r, neg_c, nan_r, nan_c;
} health;

static void health_of(const nd_module *m, health *h) {
    memset(h, 0, sizeof *h);
    h->sub_r = h->sub_c = h->neg_r = h->neg_c = h->nan_r = h->nan_c = -1;
    const nd_tview *s = m->weight_scale;
    if (m->wfmt != ND_WF_NVFP4 || !s || s->dtype != ND_DT_F8_E4M3 || s->ndim != 2) return;
    const unsigned char *p = s->data;
    const int64_t cols = s->shape[1];
    for (int64_t i = 0; i < s->numel; i++) {
        unsigned b = p[i], mag = b & 0x7f;
        h->count++;
        if (mag == 0x7f) {
            if (!h->nan++) { h->nan_r = i / cols; h->nan_c = i % cols; }
            continue;
        }
        if (mag == 0) continue;
        if (b & 0x80) {
            if (!h->negative++) { h->neg_r = i / cols; h->neg_c = i % cols; }
            continue;
        }
        h->nonzero++;
        unsigned ex = mag >> 3, man = mag & 7;
        if (ex == 0) {
            if (!h->subnormal++) { h->sub_r = i / cols; h->sub_c = i % cols; }
            if ((man & (man - 1)) == 0) h->pow2++;
        } else if (man == 0) {
            h->pow2++;
        }
    }
}

static float global_div_of(const nd_ckpt *c, const char *path, int modelopt) {
    const nd_tview *t = find2(c, path, modelopt ? "weight_scale_2" : "weight_global_scale");
    if (!t || t->numel < 1) return NAN;
    float v = nd_tview_get_f32(t, 0);
    return modelopt ? 1.0f / v : v;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The median weight divisor of up to 16 sibling experts of m (NaN when none). */
static float sibling_median_div(const nd_ckpt *c, const nd_module *m) {
    size_t pre;
    const char *suf;
    long self;
    if (!expert_split(m->path, &pre, &suf, &self)) return NAN;
    float v[16];
    int n = 0;
    for (long j = 0; j < 256 && n < 16; j++) {
        if (j == self) continue;
        char nm[700];
        snprintf(nm, sizeof nm, "%.*s%ld.%s", (int)pre, m->path, j, suf);
        float d = global_div_of(c, nm, m->conv == ND_CONV_MODELOPT);
        if (isfinite(d) && d > 0) v[n++] = d;
    }
    if (!n) return NAN;
    qsort(v, (size_t)n, sizeof v[0], cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

static const char *fmt_word(const nd_module *m) {
    switch (m->wfmt) {
    case ND_WF_NVFP4: return "NVFP4";
    case ND_WF_MXFP4: return "MXFP4";
    case ND_WF_FP8: return "FP8";
    case ND_WF_DENSE: break;
    }
    return m->weight && m->weight->dtype == ND_DT_F32 ? "F32" : m->weight && m->weight->dtype == ND_DT_F16 ? "F16" : "BF16";
}

static int known_ct_format(const char *f) {
    static const char *const k[] = {"nvfp4-pack-quantized", "mxfp4-pack-quantized", "float-quantized", "pack-quantized",
                                    "int-quantized", "naive-quantized", "mixed-precision", "dense", "marlin-24",
                                    "sparse-24-bitmask", "sparse-bitmask", "mxfp8-quantized"};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(f, k[i])) return 1;
    return 0;
}

/* A compressed-tensors group whose fields contradict the NVFP4 tensors it covers (once per group). */
static int check_group(const nd_ckpt *c, const nd_module *m, const nd_ct_group *g, nd_findings *f) {
    /* a weight-only group over tensors calibrated for activations: the loader builds W4A16 and leaves
     * the input scales unread; the model serves, but not as it was calibrated */
    if (!g->a_bits && m->input_global)
        ND_TRY(nd_findings_add(f, ND_BREAKS_NONE, "quant_config_mismatch", m->path, m->input_global->name,
                               "%s quantization_config.config_groups.%s has no input_activations (weights only, W4A16), "
                               "but %s holds an input scale (%s) as a W4A4 export does: a loader that follows the config "
                               "serves W4A16 and never reads it (the replay does the same)",
                               c->q.source, g->name, m->path, m->input_global->name));
    char bad[512] = "";
    size_t o = 0;
#define BAD(...) do { if (o < sizeof bad) o += (size_t)snprintf(bad + o, sizeof bad - o, __VA_ARGS__); } while (0)
    if (g->w_bits && g->w_bits != 4) BAD("%sweights.num_bits %d (NVFP4 codes are 4 bits)", o ? ", " : "", g->w_bits);
    if (g->w_type[0] && strcmp(g->w_type, "float")) BAD("%sweights.type %s (NVFP4 is float)", o ? ", " : "", g->w_type);
    if (g->w_group_size && g->w_group_size != ND_NVFP4_BLOCK)
        BAD("%sweights.group_size %d (the block scales are one per 16)", o ? ", " : "", g->w_group_size);
    if (g->w_strategy[0] && strcmp(g->w_strategy, "tensor_group"))
        BAD("%sweights.strategy %s (NVFP4 is tensor_group)", o ? ", " : "", g->w_strategy);
    /* 4-bit float activations in another strategy (token, tensor) are no NVFP4 W4A4 scheme: vLLM
     * finds no compressed-tensors scheme for them */
    if (g->a_bits == 4 && g->a_strategy[0] && strcmp(g->a_strategy, "tensor_group"))
        BAD("%sinput_activations.strategy %s (NVFP4 activations are tensor_group)", o ? ", " : "", g->a_strategy);
    /* the format picks the decompressor (compressed-tensors, transformers) and the scheme (vLLM): the
     * group's own, else the top-level one ("mixed-precision" defers to the groups) */
    const char *fmt = g->format[0] ? g->format : c->q.ct_format;
    const char *fmt_key = g->format[0] ? "its format" : "quantization_config.format";
    if (fmt[0] && strcmp(fmt, "nvfp4-pack-quantized") && (g->format[0] || (strcmp(fmt, "mixed-precision") && known_ct_format(fmt))))
        BAD("%s%s %s (%s; the tensors are nvfp4-pack-quantized)", o ? ", " : "", fmt_key, fmt,
            known_ct_format(fmt) ? "another packing" : "not a compressed-tensors format");
#undef BAD
    if (!o) return 0;
    char tn[320];
    snprintf(tn, sizeof tn, "%s.weight_scale", m->path);
    return nd_findings_add(f, ND_BREAKS_ALL, "quant_config_mismatch", m->path, tn,
                           "%s quantization_config.config_groups.%s says %s, but %s holds NVFP4 tensors (weight "
                           "%s, block scales %s [%lld, %lld]): a loader that follows the config builds another scheme "
                           "for every module of the group",
                           c->q.source, g->name, bad, m->path, nd_dtype_str(m->weight->dtype),
                           nd_dtype_str(m->weight_scale->dtype), (long long)m->weight_scale->shape[0],
                           (long long)m->weight_scale->shape[1]);
}

/* The config against the tensors of one bound module. */
static int check_config(const nd_ckpt *c, const nd_module *m, const char *const *norm, const unsigned char *quant,
                        size_t nmod, const nd_ct_group **seen, size_t *nseen, nd_findings *f) {
    const nd_qcfg *q = &c->q;
    /* DeepSeek-V4's native release declares FP8 for every linear and marks its FP4 routed experts
     * only by config.json's expert_dtype (field report N15: a runtime that missed it allocated
     * block-FP8 experts, another read the E8M0 scales as E4M3): the side field against the experts'
     * tensors, said once */
    if (q->fmt == ND_CKPT_FP8 && strstr(m->path, ".experts.") && (m->wfmt == ND_WF_MXFP4 || m->wfmt == ND_WF_FP8)) {
        const char *ed = nd_cfg_string(nd_ckpt_config(c), "expert_dtype");
        const int fp4 = m->wfmt == ND_WF_MXFP4, says_fp4 = ed && !strcmp(ed, "fp4");
        int said = 0;
        for (size_t i = 0; i < f->n && !said; i++) said = strstr(f->v[i].msg, "expert_dtype") != NULL;
        if (fp4 != says_fp4 && !said) {
            char was[80];
            if (ed) snprintf(was, sizeof was, "expert_dtype \"%.40s\"", ed);
            else snprintf(was, sizeof was, "no expert_dtype");
            return nd_findings_add(f, ND_BREAKS_ALL, "quant_config_mismatch", m->path, m->weight->name,
                                   "config.json declares FP8 (quant_method fp8) with %s, but routed expert %s holds %s "
                                   "tensors%s: a runtime that follows the config builds %s experts (field report N15) "
                                   "and reads the other format's bytes", was, m->path, fp4 ? "MXFP4" : "FP8",
                                   fp4 ? " (packed E2M1 codes, E8M0 scales per 32)" : "",
                                   says_fp4 ? "FP4" : "block-FP8");
        }
    }
    /* FP8 block scales ([ceil(N/bn), ceil(K/bk)] with more than one block) under a config without
     * weight_block_size: a loader builds per-tensor FP8 and cannot take them; FP8 tensors under
     * gpt-oss's quant_method mxfp4, which quantizes only the experts: a loader builds the module BF16 */
    if (m->wfmt == ND_WF_FP8 && (q->fmt == ND_CKPT_FP8 || q->fmt == ND_CKPT_MXFP4) && m->weight_scale &&
        (q->fmt == ND_CKPT_MXFP4 || (!q->fp8_block_n && m->weight_scale->ndim == 2 && m->weight_scale->numel > 1 &&
                                     m->weight_scale->shape[0] != m->out_features))) {
        int said = 0;
        for (size_t i = 0; i < f->n && !said; i++) said = strstr(f->v[i].msg, q->fmt == ND_CKPT_MXFP4 ? "quant_method mxfp4" : "weight_block_size") != NULL;
        if (!said)
            return nd_findings_add(f, ND_BREAKS_ALL, "quant_config_mismatch", m->path, m->weight_scale->name,
                                   q->fmt == ND_CKPT_MXFP4
                                       ? "config.json says quant_method mxfp4 (MXFP4 experts, everything else unquantized), but %s "
                                         "holds FP8 tensors: a loader that follows the config builds it BF16 and cannot load them"
                                       : "config.json's FP8 quantization_config has no weight_block_size, but %s holds FP8 block "
                                         "scales: a loader that follows the config builds per-tensor FP8 and cannot load them",
                                   m->path);
    }
    /* native releases (DeepSeek FP8, gpt-oss MXFP4) keep their own mixed precision: nothing else to check */
    if (q->fmt == ND_CKPT_UNQUANTIZED || q->fmt == ND_CKPT_FP8 || q->fmt == ND_CKPT_MXFP4) return 0;
    const role_t role = role_of(m->path);
    const scheme s = scheme_of(c, m->path);
    const int stored_q = m->wfmt != ND_WF_DENSE;
    const char *src = q->source[0] ? q->source : "config.json";
    /* one rule for a high-precision role stored quantized (issue 33): where the config names it in
     * its ignore list, config and tensors contradict each other (quant_config_mismatch, the role
     * said); where the config quantizes it or says nothing, the role's policy is broken */
    if (stored_q && role != ROLE_LINEAR && s.ignored_by && (m->wfmt == ND_WF_NVFP4 || m->wfmt == ND_WF_MXFP4))
        return nd_findings_add(f, ND_BREAKS_ALL, "quant_config_mismatch", m->path, m->weight->name,
                               "%s %s holds %s tensors but the %s quantization config ignores it (entry \"%s\"): a loader "
                               "that follows the config builds it unquantized and cannot load them (and serving stacks "
                               "keep this role in high precision anyway)",
                               ROLE_NAME[role], m->path, fmt_word(m), src, s.ignored_by);
    if (stored_q && role != ROLE_LINEAR)
        return nd_findings_add(f, ND_BREAKS_ALL, "precision_policy_violation", m->path, m->weight->name,
                               "%s %s is stored as %s%s: serving stacks keep this role in high precision and build it "
                               "without a quantization method (vLLM/SGLang: %s), so the packed tensors have no parameter "
                               "to load into",
                               ROLE_NAME[role], m->path, fmt_word(m),
                               s.quantized ? " and the config quantizes it too" : ", which the quantization config does not say",
                               role == ROLE_ROUTER ? "ReplicatedLinear(quant_config=None)" :
                               role == ROLE_LM_HEAD ? "ParallelLMHead is not a LinearBase" :
                               role == ROLE_EMBED ? "VocabParallelEmbedding" : "a plain parameter");
    /* an NVFP4 config that excludes a module kept in FP8 is the mixed precision of native-FP8 releases
     * (DeepSeek-V4's o_a_proj): only packed FP4 codes contradict an exclusion */
    if (stored_q && !s.quantized && (m->wfmt == ND_WF_NVFP4 || m->wfmt == ND_WF_MXFP4)) {
        char why[400];
        if (s.ignored_by) snprintf(why, sizeof why, "the %s quantization config ignores it (entry \"%s\")", src, s.ignored_by);
        else snprintf(why, sizeof why, "no group of the %s quantization config targets it", src);
        return nd_findings_add(f, ND_BREAKS_ALL, "quant_config_mismatch", m->path, m->weight->name,
                               "%s holds %s tensors but %s: a loader that follows the config builds an unquantized "
                               "linear and cannot load them (vLLM: unexpected key or shape mismatch)",
                               m->path, fmt_word(m), why);
    }
    if (!stored_q && s.quantized && role == ROLE_LINEAR) {
        char np[300];
        nd_ckpt_path_pattern(m->path, np, sizeof np);
        int sib = 0;
        for (size_t i = 0; i < nmod && !sib; i++) sib = quant[i] && !strcmp(norm[i], np);
        if (s.explicit_target || sib) {
            char by[200];
            if (s.group) snprintf(by, sizeof by, "group %s%s", s.group->name, s.explicit_target ? " names it" : " covers it by class");
            else snprintf(by, sizeof by, "quant_algo %s applies to it", s.algo ? s.algo : "?");
            return nd_findings_add(f, ND_BREAKS_ALL, "quant_config_mismatch", m->path, m->weight->name,
                                   "%s is stored as %s but the %s quantization config quantizes it (%s%s): a loader "
                                   "that follows the config allocates quantized parameters that no tensor fills (vLLM: "
                                   "'weights were not initialized from checkpoint')",
                                   m->path, fmt_word(m), src, by, sib ? "; the same module in other layers is quantized" : "");
        }
    }
    /* ModelOpt's weight-only NVFP4 over a module that holds an input scale (once per checkpoint): as
     * a compressed-tensors group without input_activations (check_group) */
    if (stored_q && m->wfmt == ND_WF_NVFP4 && s.algo && !strcmp(s.algo, "W4A16_NVFP4") && m->input_global) {
        int said = 0;
        for (size_t i = 0; i < f->n && !said; i++)
            said = f->v[i].kind == ND_BREAKS_NONE && !strcmp(f->v[i].code, "quant_config_mismatch") && strstr(f->v[i].msg, "W4A16");
        if (!said)
            ND_TRY(nd_findings_add(f, ND_BREAKS_NONE, "quant_config_mismatch", m->path, m->input_global->name,
                                   "%s says quant_algo W4A16_NVFP4 (weights only), but %s holds an input scale (%s) as a "
                                   "W4A4 export does (and maybe other modules): a loader that follows the config serves "
                                   "W4A16 and never reads it (the replay does the same)", src, m->path, m->input_global->name));
    }
    if (stored_q && s.group && m->wfmt == ND_WF_NVFP4) {
        for (size_t i = 0; i < *nseen; i++)
            if (seen[i] == s.group) return 0;
        seen[(*nseen)++] = s.group;
        return check_group(c, m, s.group, f);
    }
    return 0;
}

static int check_scales(const nd_ckpt *c, const nd_module *m, nd_findings *f) {
    if (m->wfmt != ND_WF_NVFP4) return 0;
    for (int w = 1; w >= 0; w--) {
        const nd_tview *o = nd_module_orphan_scale(c, m, w);
        char exp[320];
        snprintf(exp, sizeof exp, "%s.%s", m->path, own_name(m, w));
        if (o) {
            ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "scale_not_loaded", m->path, o->name,
                                   "%s = %.6g is stored under the %s name; the %s loader reads %s, which is absent, so "
                                   "the %s keeps its initial value (vLLM: torch.empty, undefined; the replay: NaN). "
                                   "The orphan's value loaded as %s restores it",
                                   o->name, nd_tview_get_f32(o, 0), m->conv == ND_CONV_MODELOPT ? "compressed-tensors" : "ModelOpt",
                                   m->conv == ND_CONV_MODELOPT ? "ModelOpt" : "compressed-tensors", exp,
                                   w ? "weight global scale" : "activation quantizer's scale", exp));
        } else if (expert_missing(c, m, w)) {
            int looked, have = siblings_with(c, m->path, own_name(m, w), &looked);
            ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "scale_not_loaded", m->path, exp,
                                   "routed expert without %s while its siblings have it (%d of %d looked at): a fused-MoE "
                                   "loader fills one slot per expert and leaves this one at its initial value (vLLM: "
                                   "torch.empty, undefined; the replay: NaN)",
                                   own_name(m, w), have, looked));
        }
    }
    return 0;
}

static int check_health(const nd_module *m, nd_findings *f) {
    health h;
    health_of(m, &h);
    if (!h.count) return 0;
    const char *tn = m->weight_scale->name;
    /* coordinates of the first NaN block on the nan_weight_scale finding findings.c made */
    if (h.nan)
        for (size_t i = 0; i < f->n; i++)
            if (!strcmp(f->v[i].code, "nan_weight_scale") && !strcmp(f->v[i].module, m->path) && f->v[i].row < 0) {
                f->v[i].row = h.nan_r;
                f->v[i].col = h.nan_c;
                size_t l = strlen(f->v[i].msg);
                snprintf(f->v[i].msg + l, sizeof f->v[i].msg - l, " (first at block row %lld, col %lld)", (long long)h.nan_r,
                         (long long)h.nan_c);
            }
    if (h.negative) {
        ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "scale_encoding_mismatch", m->path, tn,
                               "%lld of %lld block scales are negative E4M3 values (sign bit set; first at block row %lld, "
                               "col %lld): no writer stores a negative scale, the bytes are in another encoding",
                               (long long)h.negative, (long long)h.count, (long long)h.neg_r, (long long)h.neg_c));
        nd_findings_set_coord(f, h.neg_r, h.neg_c);
    }
    if (h.nonzero && h.subnormal * 8 > h.nonzero) {
        ND_TRY(nd_findings_add(f, ND_BREAKS_NONE, "scale_underflow", m->path, tn,
                               "%lld of %lld non-zero block scales (%.1f%%) are E4M3 subnormals (< 2^-6, 3 bits or fewer; "
                               "first at block row %lld, col %lld): the global scale is finite but too small for the "
                               "weight, precision is lost (refit weight_global_scale / weight_scale_2 so the largest "
                               "block scale is near 448)",
                               (long long)h.subnormal, (long long)h.nonzero, 100.0 * (double)h.subnormal / (double)h.nonzero,
                               (long long)h.sub_r, (long long)h.sub_c));
        nd_findings_set_coord(f, h.sub_r, h.sub_c);
    }
    if (h.nonzero > 64 && h.pow2 == h.nonzero)
        ND_TRY(nd_findings_add(f, ND_BREAKS_NONE, "scale_pow2_rounding", m->path, tn,
                               "all %lld non-zero block scales are powers of two: UE8M0-rounded scales stored as E4M3 "
                               "(the codes lose up to one bit of the scale's precision)", (long long)h.nonzero));
    return 0;
}

/* Block scales stored padded like a kernel's buffer (module.c nd_sf_padded_shape): a loader that
 * expects [N, K/16] refuses the shape or, handed the bytes, reads row r from r * K/16 where it
 * begins at r * S (C37's stride contract between writer and reader). */
static int check_layout(const nd_module *m, nd_findings *f) {
    if (m->wfmt != ND_WF_NVFP4 || !m->weight_scale) return 0;
    const nd_tview *s = m->weight_scale;
    const int64_t n = m->out_features, nb = m->in_features / ND_NVFP4_BLOCK;
    if (!nd_sf_padded_shape(s, n, nb)) return 0;
    const int64_t S = s->shape[1], R = s->shape[0];
    char rows[96] = "";
    if (R > n) snprintf(rows, sizeof rows, ", %lld padding rows (a multiple of 128)", (long long)(R - n));
    if (S > nb)
        ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "scale_layout_mismatch", m->path, s->name,
                               "block scales stored as [%lld, %lld] for a [%lld, %lld] weight: rows of %lld bytes where "
                               "K/16 = %lld (padded)%s; a loader that expects [%lld, %lld] refuses the shape "
                               "(vLLM: size mismatch) or, handed the bytes, reads row r from byte r * %lld where it begins "
                               "at r * %lld: every row after the first is shifted (read with the row stride %lld: "
                               "--override %s.scale_layout=3)",
                               (long long)R, (long long)S, (long long)n, (long long)m->in_features, (long long)S, (long long)nb,
                               rows, (long long)n, (long long)nb, (long long)nb, (long long)S, (long long)S,
                               m->path));
    else
        ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "scale_layout_mismatch", m->path, s->name,
                               "block scales stored as [%lld, %lld] for a [%lld, %lld] weight%s; a loader that expects "
                               "[%lld, %lld] refuses the shape (vLLM: size mismatch); read as bytes the first %lld rows are "
                               "right",
                               (long long)R, (long long)S, (long long)n, (long long)m->in_features, rows, (long long)n,
                               (long long)nb, (long long)n));
    if (S > nb && n > 1) nd_findings_set_coord(f, 1, 0);
    return 0;
}

static int check_outlier(const nd_ckpt *c, const nd_module *m, nd_findings *f) {
    if (m->wfmt != ND_WF_NVFP4 || !isfinite(m->weight_global_div) || m->weight_global_div <= 0) return 0;
    float med = sibling_median_div(c, m);
    if (!isfinite(med)) return 0;
    double r = m->weight_global_div / med;
    if (r <= 16 && r >= 1.0 / 16) return 0;
    return nd_findings_add(f, ND_BREAKS_NONE, "expert_scale_outlier", m->path, m->weight_global ? m->weight_global->name : "",
                           "weight global divisor %.6g is %.3gx the median of its sibling experts (%.6g): this expert's "
                           "calibration differs from the others (check its block scales and its original weights)",
                           m->weight_global_div, r, med);
}

/* AWQ's pre_quant_scale: read only where the config's algorithm is NVFP4_AWQ (a loader that follows
 * another algorithm never reads it, and a weight that holds its inverse then computes W·s·x), and
 * every value a positive finite number (the input is multiplied by it). */
static int check_pqs(const nd_ckpt *c, const nd_module *m, nd_findings *f) {
    const nd_tview *t = find2(c, m->path, "pre_quant_scale");
    if (!t || m->wfmt != ND_WF_NVFP4) return 0;
    if (!m->pre_quant_scale)
        return nd_findings_add(f, ND_BREAKS_ALL, "quant_config_mismatch", m->path, t->name,
                               "holds an AWQ pre_quant_scale, but the config (%s) does not give it quant_algo NVFP4_AWQ: a "
                               "loader that follows the config never reads the scale, and a weight that holds its inverse "
                               "then computes the wrong product", c->q.source[0] ? c->q.source : "config.json");
    for (int64_t i = 0; i < t->numel; i++) {
        const float v = nd_tview_get_f32(t, i);
        /* positive and normal, and an FP16-range input times it stays finite */
        if (!isfinite(v) || v <= 0 || v < FLT_MIN || v > FLT_MAX / 65504.0f)
            return nd_findings_add(f, ND_BREAKS_ALL, "nonfinite_scale", m->path, t->name,
                                   "AWQ pre_quant_scale[%lld] is %g: the input is multiplied by it, so the module's output is "
                                   "%s", (long long)i, v,
                                   v == 0 || (v > 0 && v < FLT_MIN) ? "(almost) zero in that channel's share"
                                   : v > 0 && isfinite(v)           ? "Inf for inputs of FP16 range"
                                                                    : "NaN/Inf or sign-flipped");
    }
    return 0;
}

/* 1 when every value of an AWQ pre_quant_scale is exactly 1 (readable dtypes only) */
static int all_ones(const nd_tview *t) {
    for (int64_t i = 0; i < t->numel; i++)
        if (nd_tview_get_f32(t, i) != 1.0f) return 0;
    return t->numel > 0;
}

/* awq_uncalibrated_expert: ModelOpt's AWQ gives an expert that calibration never reached a
 * pre_quant_scale of ones (and its weight no AWQ scale) while its siblings get searched scales
 * (vLLM issue #45333; the export averages them in later ModelOpt releases). Consistent for that
 * expert alone, but a fused MoE kernel applies one input scale to all experts of a projection
 * (TensorRT-LLM's requires them equal): the siblings' scale on this expert, or ones on theirs. */
static int check_awq_experts(const nd_ckpt *c, const nd_module *m, nd_findings *f) {
    size_t pre;
    const char *suf;
    long self;
    if (!m->pre_quant_scale || !expert_split(m->path, &pre, &suf, &self) || !all_ones(m->pre_quant_scale)) return 0;
    int looked = 0, calibrated = 0;
    for (long j = 0; j < 256 && looked < 16; j++) {
        if (j == self) continue;
        char nm[700];
        snprintf(nm, sizeof nm, "%.*s%ld.%s.pre_quant_scale", (int)pre, m->path, j, suf);
        const nd_tview *t = nd_ckpt_find(c, nm);
        if (!t || t->ndim != 1 || t->numel != m->pre_quant_scale->numel) continue;
        looked++;
        calibrated += !all_ones(t);
    }
    if (!calibrated) return 0;
    return nd_findings_add(f, ND_BREAKS_NONE, "awq_uncalibrated_expert", m->path, m->pre_quant_scale->name,
                           "AWQ pre_quant_scale is all ones while %d of %d sibling experts looked at have searched scales: "
                           "calibration never reached this expert; a fused MoE kernel that applies one input scale to "
                           "every expert (TensorRT-LLM's requires them equal) scales this expert's input with its "
                           "siblings' scale, or theirs with ones", calibrated, looked);
}

int nd_ckpt_audit(const nd_ckpt *c, nd_findings *f, nd_err *e) {
    size_t n = nd_ckpt_module_count(c);
    char **norm = calloc(n ? n : 1, sizeof *norm);
    unsigned char *quant = calloc(n ? n : 1, 1);
    const nd_ct_group **seen = calloc(c->q.n_groups + 1, sizeof *seen);
    size_t nseen = 0;
    int rc = norm && quant && seen ? 0 : nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", nd_ckpt_dir(c));
    for (size_t i = 0; !rc && i < n; i++) {
        const char *p = nd_ckpt_module_path(c, i);
        char np[300];
        nd_ckpt_path_pattern(p, np, sizeof np);
        if (!(norm[i] = strdup(np))) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        quant[i] = find2(c, p, "weight_packed") || find2(c, p, "weight_scale") || find2(c, p, "weight_scale_inv");
    }
    /* a config that quantizes (compressed-tensors, ModelOpt) over weights that are all dense: a
     * loader allocates quantized parameters no tensor fills, and a replay compares nothing */
    int any_q = 0;
    for (size_t i = 0; !rc && i < n && !any_q; i++) any_q = quant[i];
    if (!rc && !any_q && n && (c->q.fmt == ND_CKPT_COMPRESSED_TENSORS || c->q.fmt == ND_CKPT_MODELOPT) &&
        nd_findings_add(f, ND_BREAKS_ALL, "quant_config_mismatch", "", "",
                        "%s declares a quantized checkpoint (%s), but none of its %zu modules holds quantized tensors: a "
                        "loader that follows the config allocates quantized parameters that no tensor fills",
                        c->q.source[0] ? c->q.source : "config.json",
                        c->q.fmt == ND_CKPT_MODELOPT ? "ModelOpt" : "compressed-tensors", n))
        rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    /* an unknown compressed-tensors format string is refused by loaders that parse it */
    if (!rc && c->q.fmt == ND_CKPT_COMPRESSED_TENSORS && c->q.ct_format[0] && !known_ct_format(c->q.ct_format) &&
        nd_findings_add(f, ND_BREAKS_ALL, "quant_config_mismatch", "", "",
                        "%s quantization_config.format \"%s\" is not a compressed-tensors format (nvfp4-pack-quantized, "
                        "float-quantized, ...): loaders refuse it or pick a scheme by guess", c->q.source, c->q.ct_format))
        rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    size_t n_awq = 0, n_pqs = 0; /* NVFP4 modules under an NVFP4_AWQ algorithm, and those holding pre_quant_scale */
    const char *first_awq = NULL;
    for (size_t i = 0; !rc && i < n; i++) {
        nd_module m;
        if ((rc = nd_ckpt_module(c, nd_ckpt_module_path(c, i), &m, e))) break;
        if (m.wfmt == ND_WF_NVFP4 && c->q.fmt == ND_CKPT_MODELOPT && nd_qcfg_awq(&c->q, m.path)) {
            if (!n_awq++) first_awq = nd_ckpt_module_path(c, i);
            n_pqs += m.pre_quant_scale != NULL;
        }
        if (check_config(c, &m, (const char *const *)norm, quant, n, seen, &nseen, f) || check_scales(c, &m, f) ||
            check_health(&m, f) || check_outlier(c, &m, f) || check_layout(&m, f) || check_awq_experts(c, &m, f) ||
            check_pqs(c, &m, f))
            rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        if (m.weight_scale) nd_ckpt_release(c, m.weight_scale);
    }
    /* DeepSeek-V4's hash routers: each token's row of tid2eid names k distinct experts of the model; a
     * row out of range (or repeating an expert) is found only when a prompt holds that token (round 19) */
    double ne = 0;
    for (size_t i = 0, nt = nd_ckpt_count(c); !rc && i < nt && !nd_cfg_number(nd_ckpt_config(c), "n_routed_experts", &ne) && ne > 0; i++) {
        const nd_tview *t = nd_ckpt_at(c, i);
        const size_t l = strlen(t->name);
        if (l < 12 || strcmp(t->name + l - 12, "gate.tid2eid") || t->ndim != 2 || (t->dtype != ND_DT_I32 && t->dtype != ND_DT_I64)) continue;
        const int64_t rows = t->shape[0], k = t->shape[1];
        int64_t bad = -1, badv = 0;
        for (int64_t r = 0; r < rows && bad < 0; r++)
            for (int64_t a = 0; a < k && bad < 0; a++) {
                int64_t v;
                if (t->dtype == ND_DT_I32) { int32_t x; memcpy(&x, (const char *)t->data + 4 * (size_t)(r * k + a), 4); v = x; }
                else memcpy(&v, (const char *)t->data + 8 * (size_t)(r * k + a), 8);
                int dup = 0;
                for (int64_t b = 0; b < a && !dup; b++) {
                    int64_t w;
                    if (t->dtype == ND_DT_I32) { int32_t x; memcpy(&x, (const char *)t->data + 4 * (size_t)(r * k + b), 4); w = x; }
                    else memcpy(&w, (const char *)t->data + 8 * (size_t)(r * k + b), 8);
                    dup = w == v;
                }
                if (v < 0 || v >= (int64_t)ne || dup) { bad = r; badv = v; }
            }
        if (bad >= 0 &&
            nd_findings_add(f, ND_BREAKS_ALL, "hash_table_invalid", "", t->name,
                            "%s: token %lld's row names expert %lld, %s: a prompt holding that token routes it to no expert "
                            "of the model (the engines index out of range or sum one expert twice)", t->name, (long long)bad,
                            (long long)badv, badv < 0 || badv >= (int64_t)ne ? "outside the model's experts" : "twice"))
            rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    }
    /* an AWQ export stores W x diag(s): the input needs s (pre_quant_scale) unless the exporter folded it
     * into the layer before, which it does for some modules, never for all of them (round 19) */
    if (!rc && n_awq && !n_pqs &&
        nd_findings_add(f, ND_BREAKS_ALL, "quant_config_mismatch", first_awq, "",
                        "%s says NVFP4_AWQ for %zu NVFP4 modules, but none holds its AWQ pre_quant_scale: the weights hold "
                        "W x diag(s) and every input needs s (an exporter folds it into the layer before for some modules, "
                        "never for all); a loader that follows the config looks for the tensors",
                        c->q.source[0] ? c->q.source : "config.json", n_awq))
        rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    for (size_t i = 0; norm && i < n; i++) free(norm[i]);
    free(norm);
    free(quant);
    free(seen);
    if (!rc) rc = nd_qcfg_pattern_error(&c->q, nd_ckpt_dir(c), e);
    return rc;
}

/* ---- inventory ---- */
static int known_param(const nd_tview *t) {
    const char *l = last_part(t->name);
    static const char *const k[] = {"bias", "e_score_correction_bias", "k_scale", "v_scale", "kv_scale", "q_scale",
                                    "prob_scale", "attn_sink", "tid2eid", "ape", "inv_freq", "weight_shape"};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(l, k[i])) return 1;
    if (!strcmp(l, "weight") && t->ndim == 1) return 1; /* norms */
    return !strncmp(l, "hc_", 3) || strstr(t->name, ".hc_") != NULL;
}

static int tv_index(const nd_ckpt *c, const nd_tview *t) {
    size_t lo = 0, hi = c->n_tensors;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int r = strcmp(c->tensors[mid]->name, t->name);
        if (!r) return (int)mid;
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static unsigned char *accounted(const nd_ckpt *c) {
    unsigned char *a = calloc(c->n_tensors ? c->n_tensors : 1, 1);
    if (!a) return NULL;
    for (size_t i = 0; i < nd_ckpt_module_count(c); i++) {
        nd_module m;
        nd_err e;
        if (nd_ckpt_module(c, nd_ckpt_module_path(c, i), &m, &e)) continue;
        const nd_tview *ts[] = {m.weight, m.weight_scale, m.weight_global, m.input_global, m.bias, m.pre_quant_scale};
        for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
            int k = ts[j] ? tv_index(c, ts[j]) : -1;
            if (k >= 0) a[k] = 1;
        }
    }
    for (size_t i = 0; i < c->n_tensors; i++)
        if (known_param(c->tensors[i]) || (c->n_virt && nd_ckpt_virt_source(c, c->tensors[i]))) a[i] = 1;
    return a;
}

size_t nd_ckpt_unaccounted(const nd_ckpt *c) {
    unsigned char *a = accounted(c);
    size_t n = 0;
    for (size_t i = 0; a && i < c->n_tensors; i++) n += !a[i];
    free(a);
    return n;
}

static json_t *group_json(const nd_ckpt *c, const nd_ct_group *g) {
    json_t *o = json_object();
    json_object_set_new(o, "group", json_string(g->name));
    json_t *w = json_object();
    if (g->w_bits) json_object_set_new(w, "num_bits", json_integer(g->w_bits));
    if (g->w_type[0]) json_object_set_new(w, "type", json_string(g->w_type));
    if (g->w_group_size) json_object_set_new(w, "group_size", json_integer(g->w_group_size));
    if (g->w_strategy[0]) json_object_set_new(w, "strategy", json_string(g->w_strategy));
    json_object_set_new(o, "weights", w);
    json_t *a = json_object();
    if (g->a_bits) json_object_set_new(a, "num_bits", json_integer(g->a_bits));
    if (g->a_type[0]) json_object_set_new(a, "type", json_string(g->a_type));
    /* dynamic (true / false / "local") straight from the document */
    json_t *q = json_object_get((json_t *)c->cfg.json, "quantization_config");
    json_t *ia = json_object_get(json_object_get(json_object_get(q, "config_groups"), g->name), "input_activations");
    json_t *dyn = json_object_get(ia, "dynamic");
    if (dyn) json_object_set(a, "dynamic", dyn);
    json_object_set_new(o, "input_activations", json_object_size(a) || ia ? a : (json_decref(a), json_null()));
    return o;
}

json_t *nd_ckpt_inventory_json(const nd_ckpt *c) {
    json_t *root = json_object(), *mods = json_array();
    for (size_t i = 0; i < nd_ckpt_module_count(c); i++) {
        const char *p = nd_ckpt_module_path(c, i);
        nd_module m;
        nd_err e;
        if (nd_ckpt_module(c, p, &m, &e)) continue;
        scheme s = scheme_of(c, p);
        json_t *o = json_object();
        json_object_set_new(o, "module", json_string(p));
        json_object_set_new(o, "role", json_string(ROLE_NAME[role_of(p)]));
        json_object_set_new(o, "stored", json_string(fmt_word(&m)));
        json_object_set_new(o, "config_quantizes", json_boolean(s.quantized));
        json_object_set_new(o, "ignored_by", s.ignored_by ? json_string(s.ignored_by) : json_null());
        if (s.group) json_object_set_new(o, "scheme", group_json(c, s.group));
        else if (s.algo) json_object_set_new(o, "scheme", json_pack("{s:s,s:i}", "quant_algo", s.algo, "group_size", c->q.mo_group_size));
        json_t *ts = json_array();
        const nd_tview *bound[] = {m.weight, m.weight_scale, m.weight_global, m.input_global, m.bias};
        for (size_t j = 0; j < sizeof bound / sizeof bound[0]; j++)
            if (bound[j]) json_array_append_new(ts, json_string(bound[j]->name));
        json_object_set_new(o, "tensors", ts);
        if (m.wfmt == ND_WF_NVFP4) {
            json_object_set_new(o, "act_quant", json_boolean(m.act_quant));
            health h;
            health_of(&m, &h);
            json_object_set_new(o, "scale_health", json_pack("{s:I,s:I,s:I,s:I,s:I,s:o,s:o}", "blocks", (json_int_t)h.count,
                                "nan", (json_int_t)h.nan, "negative", (json_int_t)h.negative, "subnormal", (json_int_t)h.subnormal,
                                "pow2", (json_int_t)h.pow2,
                                "subnormal_share", h.nonzero ? json_real((double)h.subnormal / (double)h.nonzero) : json_null(),
                                "first_subnormal", h.sub_r >= 0 ? json_pack("[I,I]", (json_int_t)h.sub_r, (json_int_t)h.sub_c) : json_null()));
            if (m.weight_scale) nd_ckpt_release(c, m.weight_scale);
        }
        json_array_append_new(mods, o);
    }
    json_object_set_new(root, "modules", mods);
    json_t *un = json_array();
    unsigned char *a = accounted(c);
    size_t nun = 0;
    for (size_t i = 0; a && i < c->n_tensors; i++)
        if (!a[i] && nun++ < 64) json_array_append_new(un, json_string(c->tensors[i]->name));
    free(a);
    json_object_set_new(root, "unaccounted_tensors", un);
    json_object_set_new(root, "unaccounted_count", json_integer((json_int_t)nun));
    return root;
}
