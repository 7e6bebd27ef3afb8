/* quant_config.c — the checkpoint's quantization config, whichever form it takes.
 *
 *  - compressed-tensors: config.json quantization_config {quant_method "compressed-tensors" (or
 *    absent with config_groups), format, config_groups{targets, weights, input_activations}, ignore}.
 *    "re:" patterns follow compressed-tensors' re.match: anchored at the start of the module path,
 *    not at its end (so the common ignore entry "re:.*self_attn" covers every attention linear).
 *    Other targets are exact module paths, or class names (a leading capital and no dot; "Linear"
 *    matches every linear module, other classes match none).
 *  - ModelOpt: hf_quant_config.json {producer, quantization{quant_algo, group_size,
 *    exclude_modules (fnmatch globs), quantized_layers{pattern: {quant_algo, group_size}}}}, or
 *    config.json quantization_config with quant_method "modelopt". hf_quant_config.json wins.
 *  - DeepSeek native FP8: quant_method "fp8", weight_block_size [bn, bk], scale_fmt.
 *  - gpt-oss MXFP4: quant_method "mxfp4", modules_to_not_convert (globs or dotted prefixes).
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include "util/json_load.h"
#include "ckpt/ckpt_internal.h"
#include "util/infile.h"
#include "numerics/nd_numerics.h"

static json_t *get(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_null(v) ? NULL : v;
}

/* "re:" patterns are Python regular expressions matched with re.match (compressed-tensors'
 * is_match): PCRE2 reads Python's syntax, anchored at the start. A config is untrusted input, so
 * the pattern is at most 1024 bytes, a back-reference (which module-name patterns never need and
 * which makes matching exponential) is refused, and every match runs under PCRE2's match and depth
 * limits: a pattern that passes them on a module name is an error (nd_qcfg_pattern_error), never a
 * silent "no match". */
enum { PAT_MAX_LEN = 1024, PAT_MATCH_LIMIT = 100000, PAT_DEPTH_LIMIT = 1000 };

static int has_backref(const char *s) {
    for (const char *c = s; *c; c++)
        if (*c == '\\' && c[1]) {
            if ((c[1] >= '1' && c[1] <= '9') || c[1] == 'g' || c[1] == 'k') return 1;
            c++;
        } else if (c[0] == '(' && c[1] == '?' && c[2] == 'P' && c[3] == '=') return 1; /* (?P=name) */
    return 0;
}

static int pat_regex(nd_pat *p, const char *re, const char *file, const char *where, nd_err *e) {
    if (strlen(re) > PAT_MAX_LEN)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s: regular expression \"%.80s...\" is longer than %d bytes", file, where,
                       p->text, PAT_MAX_LEN);
    if (has_backref(re))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s: regular expression \"%.80s\" uses a back-reference (\\1..\\9, \\g, \\k, "
                       "(?P=...)), which module-name patterns never need and which can make matching take minutes; refused",
                       file, where, p->text);
    int code;
    PCRE2_SIZE off;
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED, &code, &off, NULL);
    if (!c) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s: bad regular expression \"%s\": %s at offset %zu", file, where, p->text,
                       (const char *)msg, (size_t)off);
    }
    p->mc = pcre2_match_context_create(NULL);
    p->limit_hit = calloc(1, sizeof *p->limit_hit);
    if (!p->mc || !p->limit_hit) {
        pcre2_code_free(c);
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", file);
    }
    pcre2_set_match_limit(p->mc, PAT_MATCH_LIMIT);
    pcre2_set_depth_limit(p->mc, PAT_DEPTH_LIMIT);
    p->re = c;
    p->kind = ND_PAT_REGEX;
    return 0;
}

static int pat_init(nd_pat *p, const char *text, int glob, const char *file, const char *where, nd_err *e) {
    memset(p, 0, sizeof *p);
    if (!(p->text = strdup(text))) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", file);
    if (glob) { p->kind = ND_PAT_GLOB; return 0; }
    if (strncmp(text, "re:", 3) == 0) return pat_regex(p, text + 3, file, where, e); /* kind stays EXACT on failure */
    p->kind = (isupper((unsigned char)text[0]) && !strchr(text, '.')) ? ND_PAT_CLASS : ND_PAT_EXACT;
    return 0;
}

static void pat_free(nd_pat *p) {
    pcre2_code_free(p->re);
    pcre2_match_context_free(p->mc);
    free(p->limit_hit);
    free(p->text);
}

int nd_pat_match(const nd_pat *p, const char *name) {
    switch (p->kind) {
    case ND_PAT_EXACT: return strcmp(p->text, name) == 0;
    case ND_PAT_REGEX: {
        pcre2_match_data *md = pcre2_match_data_create(1, NULL);
        if (!md) { *p->limit_hit = 1; return 0; }
        int rc = pcre2_match(p->re, (PCRE2_SPTR)name, PCRE2_ZERO_TERMINATED, 0, 0, md, p->mc);
        pcre2_match_data_free(md);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) *p->limit_hit = 1;
        return rc >= 0;
    }
    case ND_PAT_GLOB: return fnmatch(p->text, name, 0) == 0;
    case ND_PAT_CLASS: return strcmp(p->text, "Linear") == 0;
    }
    return 0;
}

static const nd_pat *limit_hit_in(const nd_pat *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i].kind == ND_PAT_REGEX && *p[i].limit_hit) return &p[i];
    return NULL;
}

int nd_qcfg_pattern_error(const nd_qcfg *q, const char *dir, nd_err *e) {
    const nd_pat *bad = limit_hit_in(q->ignore, q->n_ignore);
    for (size_t g = 0; !bad && g < q->n_groups; g++) bad = limit_hit_in(q->groups[g].targets, q->groups[g].n_targets);
    if (!bad) bad = limit_hit_in(q->exclude, q->n_exclude);
    if (!bad) bad = limit_hit_in(q->no_convert, q->n_no_convert);
    if (!bad) return 0;
    return nd_fail(e, ND_EXIT_BADINPUT, "%s/%s: regular expression \"%.80s\" passed PCRE2's match limit (%d steps) on a module "
                   "name: a pattern that costly is not a module-name pattern; refused", dir, q->source[0] ? q->source : "config.json",
                   bad->text, PAT_MATCH_LIMIT);
}

/* A JSON list of strings into patterns. */
static int pat_list(json_t *a, int glob, const char *file, const char *where, nd_pat **out, size_t *n, nd_err *e) {
    *out = NULL;
    *n = 0;
    if (!a) return 0;
    if (!json_is_array(a)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s' must be a list of strings", file, where);
    size_t cnt = json_array_size(a);
    *out = calloc(cnt ? cnt : 1, sizeof **out);
    if (!*out) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", file);
    for (size_t i = 0; i < cnt; i++) {
        json_t *s = json_array_get(a, i);
        if (!json_is_string(s)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s[%zu]' is not a string", file, where, i);
        int rc = pat_init(&(*out)[i], json_string_value(s), glob, file, where, e);
        (*n)++; /* a failed pattern holds nothing but its text, which pat_free releases */
        if (rc) return rc;
    }
    return 0;
}

static int opt_int(json_t *o, const char *k, const char *file, const char *where, int *out, nd_err *e) {
    json_t *v = get(o, k);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1 << 30)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s.%s' must be a non-negative integer", file, where, k);
    *out = (int)json_integer_value(v);
    return 0;
}

static int opt_str(json_t *o, const char *k, const char *file, const char *where, char *out, size_t cap, nd_err *e) {
    json_t *v = get(o, k);
    if (!v) return 0;
    if (!json_is_string(v)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s.%s' must be a string", file, where, k);
    snprintf(out, cap, "%s", json_string_value(v));
    return 0;
}

/* weights / input_activations of a compressed-tensors group. */
static int ct_args(json_t *a, const char *file, const char *where, int *bits, char *type, int *gs,
                   char *strategy, int *bn, int *bk, nd_err *e) {
    if (!a) return 0;
    if (!json_is_object(a)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s' must be an object", file, where);
    /* every field a loader builds its scheme from is range-checked: a value no quantizer writes is
     * exit 2 naming the key, never a scheme guessed around it (issue 33) */
    int nb = -1, g = -1;
    ND_TRY(opt_int(a, "num_bits", file, where, &nb, e));
    if (nb != -1 && (nb < 1 || nb > 32))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s.num_bits' is %d (1 to 32)", file, where, nb);
    if (nb != -1) *bits = nb;
    ND_TRY(opt_str(a, "type", file, where, type, 16, e));
    if (type[0] && strcmp(type, "float") && strcmp(type, "int"))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s.type' is \"%s\" (float or int)", file, where, type);
    ND_TRY(opt_int(a, "group_size", file, where, &g, e));
    if (g != -1 && g < 1)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s.group_size' is %d (a positive number of values per scale, or null "
                       "for strategies without groups)", file, where, g);
    if (g != -1) *gs = g;
    if (strategy) {
        static const char *const known[] = {"tensor", "channel", "group", "block", "token", "tensor_group", "attn_head"};
        ND_TRY(opt_str(a, "strategy", file, where, strategy, 24, e));
        int ok = !strategy[0];
        for (size_t i = 0; i < sizeof known / sizeof known[0] && !ok; i++) ok = !strcmp(strategy, known[i]);
        if (!ok)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s.strategy' is \"%s\" (tensor, channel, group, block, token, "
                           "tensor_group, attn_head)", file, where, strategy);
    }
    json_t *bs = get(a, "block_structure");
    if (bs && bn) {
        if (json_is_array(bs) && json_array_size(bs) == 2 && json_is_integer(json_array_get(bs, 0)) &&
            json_is_integer(json_array_get(bs, 1)) && json_integer_value(json_array_get(bs, 0)) > 0 &&
            json_integer_value(json_array_get(bs, 1)) > 0) {
            *bn = (int)json_integer_value(json_array_get(bs, 0));
            *bk = (int)json_integer_value(json_array_get(bs, 1));
        } else if (json_is_string(bs) && sscanf(json_string_value(bs), "%dx%d", bn, bk) == 2 && *bn > 0 && *bk > 0) {
        } else {
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s.block_structure' must be [rows, cols]", file, where);
        }
    }
    return 0;
}

/* an empty value (null, {}, []) of an optional block means the block is absent, as compressed-tensors
 * writes it */
static int present(json_t *v) {
    return v && !json_is_null(v) && !(json_is_object(v) && !json_object_size(v)) && !(json_is_array(v) && !json_array_size(v));
}

static int parse_ct(json_t *q, const char *file, nd_qcfg *c, nd_err *e) {
    c->fmt = ND_CKPT_COMPRESSED_TENSORS;
    ND_TRY(opt_str(q, "format", file, "quantization_config", c->ct_format, sizeof c->ct_format, e));
    /* blocks that change what the model computes and that the replay does not model: both paths
     * would run another model than the engine does, so they are refused, never skipped */
    if (present(get(q, "transform_config")))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: 'quantization_config.transform_config' applies transforms (Hadamard or "
                       "learned rotations of the linears' inputs and weights) that this version does not replay yet: both "
                       "paths would run another model than the engine does", file);
    /* quantization_status: how the weights are stored; a packed format is only ever "compressed" */
    json_t *qs = get(q, "quantization_status");
    if (qs && !json_is_null(qs)) {
        const char *v = json_is_string(qs) ? json_string_value(qs) : "";
        static const char *const known[] = {"initialized", "calibration", "frozen", "compressed"};
        int k = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0] && !k; i++) k = !strcmp(v, known[i]);
        if (!k)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: 'quantization_config.quantization_status' is \"%.40s\", not a "
                           "compressed-tensors status (initialized, calibration, frozen, compressed)", file, v);
        if (strcmp(v, "compressed") && strstr(c->ct_format, "-pack-quantized"))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: 'quantization_config.quantization_status' is \"%s\" (weights stored "
                           "unpacked), but the format is %s: a loader decompresses nothing and reads the packed tensors as "
                           "they are", file, v, c->ct_format);
    }
    json_t *sp = get(q, "sparsity_config");
    if (present(sp)) {
        json_t *sf = json_is_object(sp) ? get(sp, "format") : NULL;
        const char *fs = json_is_string(sf) ? json_string_value(sf) : NULL;
        if (!fs || strcmp(fs, "dense"))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: 'quantization_config.sparsity_config' has format %s%s%s: sparse "
                           "compressed weights (bitmasks) are not read by this version (only format \"dense\" is)",
                           file, fs ? "\"" : "", fs ? fs : "(none)", fs ? "\"" : "");
    }
    ND_TRY(pat_list(get(q, "ignore"), 0, file, "quantization_config.ignore", &c->ignore, &c->n_ignore, e));
    json_t *g = get(q, "config_groups");
    if (!g) return 0;
    c->groups = nd_json_entries(g, 1, sizeof *c->groups, file, "'quantization_config.config_groups'", "an object", NULL, e);
    if (!c->groups) return e->code;
    const char *k;
    json_t *v;
    json_object_foreach(g, k, v) {
        nd_ct_group *gr = &c->groups[c->n_groups++];
        char where[160];
        snprintf(where, sizeof where, "quantization_config.config_groups.%s", k);
        if (!(gr->name = strdup(k))) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", file);
        if (!json_is_object(v)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s' must be an object", file, where);
        char w2[200];
        snprintf(w2, sizeof w2, "%s.targets", where);
        if (!json_is_array(get(v, "targets"))) return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s' must be a list of strings", file, w2);
        ND_TRY(pat_list(get(v, "targets"), 0, file, w2, &gr->targets, &gr->n_targets, e));
        snprintf(w2, sizeof w2, "%s.weights", where);
        ND_TRY(ct_args(get(v, "weights"), file, w2, &gr->w_bits, gr->w_type, &gr->w_group_size, gr->w_strategy,
                       &gr->block_n, &gr->block_k, e));
        snprintf(w2, sizeof w2, "%s.input_activations", where);
        ND_TRY(ct_args(get(v, "input_activations"), file, w2, &gr->a_bits, gr->a_type, &gr->a_group_size, gr->a_strategy,
                       NULL, NULL, e));
        /* a group's own format, which loaders read in preference to the top-level one */
        ND_TRY(opt_str(v, "format", file, where, gr->format, sizeof gr->format, e));
        /* output activations quantized (a fake-quant of every linear's output): not replayed */
        json_t *oa = get(v, "output_activations");
        if (oa && !json_is_null(oa))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s.output_activations' quantizes the linears' outputs, which this "
                           "version does not replay: both paths would run another model than the engine does", file, where);
        /* 4-bit float weights (NVFP4, MXFP4) take 4-bit float activations or none: any other
         * activation scheme is one no engine runs (vLLM finds no compressed-tensors scheme for it),
         * and replaying it as weight-only would test nothing of it */
        const int fp4_w = gr->w_bits == 4 && !strcmp(gr->w_type, "float");
        /* float formats have no zero point, and 4-bit float activations take the weights' blocks
         * (NVFP4 16, MXFP4 32): anything else is a scheme no engine runs */
        static const char *const sides[] = {"weights", "input_activations"};
        for (int k = 0; k < 2; k++) {
            json_t *side = get(v, sides[k]), *sym = json_is_object(side) ? get(side, "symmetric") : NULL;
            const char *ty = k ? gr->a_type : gr->w_type;
            if (json_is_false(sym) && (!ty[0] || !strcmp(ty, "float")))
                return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s.%s.symmetric' is false for a float format, which has no zero point",
                               file, where, sides[k]);
        }
        if (fp4_w && gr->a_bits == 4 && gr->a_group_size && gr->w_group_size && gr->a_group_size != gr->w_group_size)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s.input_activations.group_size' is %d, the weights' %d: 4-bit float "
                           "activations are quantized in the weights' blocks", file, where, gr->a_group_size, gr->w_group_size);
        if (fp4_w && gr->a_bits && !(gr->a_bits == 4 && (!gr->a_type[0] || !strcmp(gr->a_type, "float"))))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s' is %d-bit %s over 4-bit float weights: no serving engine runs this "
                           "scheme (NVFP4/MXFP4 weights take 4-bit float activations or none), so it is not replayed", file, w2,
                           gr->a_bits, gr->a_type[0] ? gr->a_type : "float");
    }
    return 0;
}

/* ModelOpt quant_algo values (modelopt/torch/export/model_config.py QUANTIZATION_*): a value
 * outside them is exit 2, never a scheme guessed (a misspelt or lower-case NVFP4 was read as
 * weights only and hid a fault). */
static int known_mo_algo(const char *a) {
    static const char *const k[] = {"NVFP4", "NVFP4_AWQ", "W4A16_NVFP4", "W4A8_NVFP4_FP8", "NVFP4_SVD", "FP8",
                                    "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO", "FP8_PB_REAL", "MXFP8", "MXFP4",
                                    "W4A8_MXFP4_FP8", "W4A16_AWQ", "W4A8_AWQ", "INT8_SQ", "INT8_WO", "INT4_AWQ",
                                    "MIXED_PRECISION"};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(a, k[i])) return 1;
    return 0;
}

static int check_mo_algo(const char *file, const char *where, const char *a, nd_err *e) {
    if (known_mo_algo(a)) return 0;
    return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s.quant_algo' is \"%s\", not a ModelOpt quantization algorithm (NVFP4, "
                   "NVFP4_AWQ, W4A16_NVFP4, W4A8_NVFP4_FP8, FP8, MXFP4, MIXED_PRECISION, ...; names are upper case)",
                   file, where, a);
}

static int is_nvfp4_algo(const char *a) {
    return strcmp(a, "NVFP4") == 0 || strcmp(a, "NVFP4_AWQ") == 0 || strcmp(a, "W4A16_NVFP4") == 0 ||
           strcmp(a, "W4A8_NVFP4_FP8") == 0 || strcmp(a, "NVFP4_SVD") == 0;
}

/* NVFP4 elements per block scale of a ModelOpt algorithm: 16, but 32 for W4A8_NVFP4_FP8 (its preset
 * quantizes weights as nvfp4_bs32: E4M3 block scales per 32, weight_scale_2 = amax/448) */
static int algo_block(const char *algo) { return strcmp(algo, "W4A8_NVFP4_FP8") == 0 ? 32 : ND_NVFP4_BLOCK; }

static int check_group_size(const char *file, const char *where, const char *algo, int gs, nd_err *e) {
    if (!is_nvfp4_algo(algo)) return 0;
    if (gs == 0) return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s: quant_algo %s without group_size", file, where, algo);
    if (gs != algo_block(algo))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s: quant_algo %s with group_size %d (its NVFP4 blocks are %d)", file, where, algo, gs,
                       algo_block(algo));
    return 0;
}

/* the group size an embedded ModelOpt config states (top level, or its CT-like config_groups), -1 none */
static long long mo_group(json_t *q) {
    if (json_is_integer(get(q, "group_size"))) return json_integer_value(get(q, "group_size"));
    json_t *g = get(q, "config_groups"), *v;
    const char *k;
    if (json_is_object(g)) json_object_foreach(g, k, v) {
        json_t *w = json_is_object(v) ? get(v, "weights") : NULL;
        if (json_is_object(w) && json_is_integer(get(w, "group_size"))) return json_integer_value(get(w, "group_size"));
    }
    return -1;
}

/* The "quantization" object of hf_quant_config.json, or an embedded quant_method modelopt config. */
static int parse_modelopt(json_t *q, const char *file, const char *where, nd_qcfg *c, nd_err *e) {
    c->fmt = ND_CKPT_MODELOPT;
    json_t *a = get(q, "quant_algo");
    if (!json_is_string(a)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s.quant_algo' is missing or not a string", file, where);
    snprintf(c->mo_algo, sizeof c->mo_algo, "%s", json_string_value(a));
    ND_TRY(check_mo_algo(file, where, c->mo_algo, e));
    ND_TRY(opt_int(q, "group_size", file, where, &c->mo_group_size, e));
    /* the embedded (CT-like) form keeps group_size under config_groups.*.weights */
    const long long g = c->mo_group_size == 0 ? mo_group(q) : -1;
    if (g != -1) c->mo_group_size = g < INT_MIN || g > INT_MAX ? -1 : (int)g; /* out of int: check_group_size refuses it */
    ND_TRY(check_group_size(file, where, c->mo_algo, c->mo_group_size, e));
    char w2[96];
    snprintf(w2, sizeof w2, "%s.exclude_modules", where);
    json_t *ex = get(q, "exclude_modules");
    if (!ex) { ex = get(q, "ignore"); snprintf(w2, sizeof w2, "%s.ignore", where); }
    ND_TRY(pat_list(ex, 1, file, w2, &c->exclude, &c->n_exclude, e));
    json_t *ql = get(q, "quantized_layers");
    if (ql) {
        char shown[320];
        snprintf(shown, sizeof shown, "'%s.quantized_layers'", where);
        if (!(c->layers = nd_json_entries(ql, 1, sizeof *c->layers, file, shown, "an object", NULL, e))) return e->code;
        const char *k;
        json_t *v;
        json_object_foreach(ql, k, v) {
            nd_mo_layer *L = &c->layers[c->n_layers++];
            if (!(L->pattern = strdup(k))) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", file);
            char w3[320];
            snprintf(w3, sizeof w3, "%s.quantized_layers.%s", where, k);
            if (!json_is_object(v) || !json_is_string(get(v, "quant_algo")))
                return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s' must be an object with a string quant_algo", file, w3);
            snprintf(L->algo, sizeof L->algo, "%s", json_string_value(get(v, "quant_algo")));
            ND_TRY(check_mo_algo(file, w3, L->algo, e));
            L->group_size = c->mo_group_size;
            ND_TRY(opt_int(v, "group_size", file, w3, &L->group_size, e));
            ND_TRY(check_group_size(file, w3, L->algo, L->group_size, e));
        }
    }
    json_t *p = get(q, "producer");
    if (json_is_object(p) && json_is_string(get(p, "name")))
        snprintf(c->producer, sizeof c->producer, "%s", json_string_value(get(p, "name")));
    if (json_is_object(p) && json_is_string(get(p, "version")))
        snprintf(c->producer_version, sizeof c->producer_version, "%s", json_string_value(get(p, "version")));
    return 0;
}

static int parse_fp8(json_t *q, const char *file, nd_qcfg *c, nd_err *e) {
    json_t *b = get(q, "weight_block_size");
    if (b) {
        if (!json_is_array(b) || json_array_size(b) != 2 || !json_is_integer(json_array_get(b, 0)) ||
            !json_is_integer(json_array_get(b, 1)) || json_integer_value(json_array_get(b, 0)) <= 0 ||
            json_integer_value(json_array_get(b, 1)) <= 0 || json_integer_value(json_array_get(b, 0)) > 1 << 20 ||
            json_integer_value(json_array_get(b, 1)) > 1 << 20)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: 'quantization_config.weight_block_size' must be [rows, cols] of positive integers", file);
        c->fp8_block_n = (int)json_integer_value(json_array_get(b, 0));
        c->fp8_block_k = (int)json_integer_value(json_array_get(b, 1));
    }
    ND_TRY(opt_str(q, "scale_fmt", file, "quantization_config", c->fp8_scale_fmt, sizeof c->fp8_scale_fmt, e));
    /* the words a loader builds the scheme from: a value outside what DeepSeek's releases write is
     * another scheme, which the replay does not model (round 19) */
    static const struct { const char *key, *want, *why; } words[] = {
        {"fmt", "e4m3", "the weights are F8_E4M3 (another FP8 format is read with other bits)"},
        {"activation_scheme", "dynamic", "static activation scales would be per-tensor values the checkpoint does not hold"},
        {"scale_fmt", "ue8m0", "block scales are float32 (no key) or powers of two (ue8m0)"}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        json_t *v = get(q, words[i].key);
        if (!v || json_is_null(v)) continue;
        if (!json_is_string(v) || strcmp(json_string_value(v), words[i].want))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: 'quantization_config.%s' is %s%.40s%s, not \"%s\": %s; not replayed", file,
                           words[i].key, json_is_string(v) ? "\"" : "", json_is_string(v) ? json_string_value(v) : "not a string",
                           json_is_string(v) ? "\"" : "", words[i].want, words[i].why);
    }
    return 0;
}

/* gpt-oss's quant_method "mxfp4": the experts are MXFP4 (fused *_blocks / *_scales), everything in
 * modules_to_not_convert stays BF16. */
static int parse_mxfp4(json_t *q, const char *file, nd_qcfg *c, nd_err *e) {
    c->fmt = ND_CKPT_MXFP4;
    return pat_list(get(q, "modules_to_not_convert"), 1, file, "quantization_config.modules_to_not_convert", &c->no_convert,
                    &c->n_no_convert, e);
}

/* A modules_to_not_convert entry covers the module itself, a dotted prefix of it, or a glob of
 * either ("model.layers.*.self_attn" covers model.layers.0.self_attn.q_proj). */
static int no_convert(const nd_qcfg *q, const char *module) {
    for (size_t i = 0; i < q->n_no_convert; i++) {
        const char *p = q->no_convert[i].text;
        size_t pl = strlen(p);
        char g[600];
        snprintf(g, sizeof g, "%s.*", p);
        if (!strcmp(p, module) || (!strncmp(p, module, pl) && module[pl] == '.') || !fnmatch(p, module, 0) ||
            !fnmatch(g, module, 0))
            return 1;
    }
    return 0;
}

static int load_hf_quant(const char *dir, nd_qcfg *c, nd_err *e) {
    char path[4096];
    snprintf(path, sizeof path, "%s/hf_quant_config.json", dir);
    ND_TRY(nd_input_regular(path, e));
    const char *kind;
    FILE *fp = nd_fopen_regular(path, &kind); /* never blocks on a FIFO put there after the check */
    if (!fp && kind) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file (%s)", path, kind);
    if (!fp) {
        if (errno == ENOENT) return 0;
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot open: %s", path, strerror(errno));
    }
    json_error_t jerr;
    fclose(fp);
    json_t *root = nd_json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not valid JSON (line %d: %s)", path, jerr.line, jerr.text);
    int rc;
    json_t *q = json_is_object(root) ? get(root, "quantization") : NULL;
    if (!json_is_object(q)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: missing object 'quantization'", path);
    else {
        /* the ModelOpt fields replace an embedded config; keep DeepSeek FP8 block sizes */
        snprintf(c->source, sizeof c->source, "hf_quant_config.json");
        for (size_t i = 0; i < c->n_exclude; i++) pat_free(&c->exclude[i]);
        free(c->exclude);
        c->exclude = NULL;
        c->n_exclude = 0;
        for (size_t i = 0; i < c->n_layers; i++) free(c->layers[i].pattern);
        free(c->layers);
        c->layers = NULL;
        c->n_layers = 0;
        c->mo_group_size = 0;
        rc = parse_modelopt(q, path, "quantization", c, e);
        json_t *p = get(root, "producer");
        if (!rc && json_is_object(p) && json_is_string(get(p, "name")))
            snprintf(c->producer, sizeof c->producer, "%s", json_string_value(get(p, "name")));
        if (!rc && json_is_object(p) && json_is_string(get(p, "version")))
            snprintf(c->producer_version, sizeof c->producer_version, "%s", json_string_value(get(p, "version")));
    }
    json_decref(root);
    return rc;
}

/* an entry of list a that list b lacks, or NULL */
static const char *missing_from(json_t *a, json_t *b) {
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(a, i, x) {
        int found = 0;
        json_array_foreach(b, j, y) found |= json_is_string(x) && json_is_string(y) && !strcmp(json_string_value(x), json_string_value(y));
        if (!found) return json_is_string(x) ? json_string_value(x) : "(not a string)";
    }
    return NULL;
}

/* config.json's quantization_config beside hf_quant_config.json: vLLM and transformers read the
 * first, TensorRT-LLM (and this tool) the second, so they must say the same (quant_algo, group
 * size where both state one, the excluded modules); an embedded copy may leave out what the file
 * holds (W4A8's group_size), which is no contradiction */
static int modelopt_agree(json_t *q, const char *meth, const char *dir, const char *cfg_path, nd_err *e) {
    char hq[4096];
    snprintf(hq, sizeof hq, "%s/hf_quant_config.json", dir);
    json_error_t je;
    json_t *root = nd_json_load_file(hq, JSON_REJECT_DUPLICATES, &je);
    json_t *h = root ? get(root, "quantization") : NULL;
    int rc = 0;
    if (!json_is_object(h)) { json_decref(root); return 0; } /* load_hf_quant says what is wrong with it */
    /* a DeepSeek FP8 config kept beside ModelOpt's file describes the FP8 layers of a mixed
     * release (its quant_algo MIXED_PRECISION): no contradiction */
    if (!strcmp(meth, "fp8")) { json_decref(root); return 0; }
    if (strcmp(meth, "modelopt"))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: quantization_config.quant_method is \"%s\", but %s is ModelOpt's: a loader that reads "
                     "config.json and one that reads hf_quant_config.json load different models", cfg_path, meth, hq);
    json_t *a = get(q, "quant_algo"), *b = get(h, "quant_algo");
    if (!rc && json_is_string(a) && json_is_string(b) && strcmp(json_string_value(a), json_string_value(b)))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: quantization_config.quant_algo is %s, but %s says %s: vLLM and transformers read "
                     "config.json, TensorRT-LLM hf_quant_config.json", cfg_path, json_string_value(a), hq, json_string_value(b));
    const long long gc = mo_group(q), gh = json_is_integer(get(h, "group_size")) ? json_integer_value(get(h, "group_size")) : -1;
    if (!rc && gc >= 0 && gh >= 0 && gc != gh)
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: quantization_config's group size is %lld, but %s says %lld", cfg_path, gc, hq, gh);
    json_t *lc = get(q, "exclude_modules") ? get(q, "exclude_modules") : get(q, "ignore"), *lh = get(h, "exclude_modules");
    const char *m1 = json_is_array(lc) && json_is_array(lh) ? missing_from(lc, lh) : NULL;
    const char *m2 = json_is_array(lc) && json_is_array(lh) && !m1 ? missing_from(lh, lc) : NULL;
    if (!rc && (m1 || m2))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %s excludes '%.200s' from quantization and %s does not: the two files describe "
                     "different checkpoints", cfg_path, m1 ? "quantization_config" : hq, m1 ? m1 : m2, m1 ? hq : "quantization_config");
    json_decref(root);
    return rc;
}

int nd_qcfg_load(const char *dir, const nd_model_cfg *cfg, nd_qcfg *c, nd_err *e) {
    memset(c, 0, sizeof *c);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *root = cfg->json, *q = get(root, "quantization_config");
    int rc = 0;
    json_t *mq = get(root, "moe_quant_algo");
    if (json_is_string(mq)) snprintf(c->moe_quant_algo, sizeof c->moe_quant_algo, "%s", json_string_value(mq));
    if (q) {
        snprintf(c->source, sizeof c->source, "config.json");
        json_t *m = get(q, "quant_method");
        if (m && !json_is_string(m)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: 'quantization_config.quant_method' must be a string", path);
        const char *meth = m ? json_string_value(m) : (get(q, "config_groups") ? "compressed-tensors" : "");
        if (strcmp(meth, "compressed-tensors") == 0) rc = parse_ct(q, path, c, e);
        else if (strcmp(meth, "modelopt") == 0) {
            /* hf_quant_config.json wins: ModelOpt's embedded copy may lack what it holds (W4A8's
             * group_size), so it is read only where that file is absent */
            char hq[4096];
            struct stat hst;
            snprintf(hq, sizeof hq, "%s/hf_quant_config.json", dir);
            if (lstat(hq, &hst) != 0) rc = parse_modelopt(q, path, "quantization_config", c, e);
            else c->fmt = ND_CKPT_MODELOPT;
        }
        else if (strcmp(meth, "fp8") == 0) { c->fmt = ND_CKPT_FP8; rc = parse_fp8(q, path, c, e); }
        else if (strcmp(meth, "mxfp4") == 0) rc = parse_mxfp4(q, path, c, e);
        else rc = nd_fail(e, ND_EXIT_BADINPUT,
                          "%s: quantization_config.quant_method \"%s\" is not supported (compressed-tensors, modelopt, fp8, mxfp4)",
                          path, meth);
        if (rc) return rc;
    }
    ND_TRY(load_hf_quant(dir, c, e));
    /* both files, each valid on its own: they must agree */
    if (q && !strcmp(c->source, "hf_quant_config.json")) {
        json_t *m = get(q, "quant_method");
        const char *meth = m ? json_string_value(m) : (get(q, "config_groups") ? "compressed-tensors" : "");
        ND_TRY(modelopt_agree(q, meth ? meth : "", dir, path, e));
    }
    return 0;
}

void nd_qcfg_free(nd_qcfg *c) {
    for (size_t i = 0; i < c->n_groups; i++) {
        for (size_t j = 0; j < c->groups[i].n_targets; j++) pat_free(&c->groups[i].targets[j]);
        free(c->groups[i].targets);
        free(c->groups[i].name);
    }
    free(c->groups);
    for (size_t i = 0; i < c->n_ignore; i++) pat_free(&c->ignore[i]);
    free(c->ignore);
    for (size_t i = 0; i < c->n_exclude; i++) pat_free(&c->exclude[i]);
    free(c->exclude);
    for (size_t i = 0; i < c->n_layers; i++) free(c->layers[i].pattern);
    free(c->layers);
    for (size_t i = 0; i < c->n_no_convert; i++) pat_free(&c->no_convert[i]);
    free(c->no_convert);
    memset(c, 0, sizeof *c);
}

static int any_match(const nd_pat *p, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (nd_pat_match(&p[i], name)) return 1;
    return 0;
}

const nd_ct_group *nd_qcfg_ct_group(const nd_qcfg *q, const char *module) {
    if (q->fmt != ND_CKPT_COMPRESSED_TENSORS || any_match(q->ignore, q->n_ignore, module)) return NULL;
    /* compressed-tensors precedence: exact name, then regex, then class name; a target string that
     * a later group names again is that group's (vLLM keeps one scheme per target string, the last
     * group's: target_scheme_map[target] is overwritten group by group) */
    static const nd_pat_kind order[] = { ND_PAT_EXACT, ND_PAT_REGEX, ND_PAT_CLASS };
    for (size_t o = 0; o < 3; o++)
        for (size_t g = 0; g < q->n_groups; g++)
            for (size_t t = 0; t < q->groups[g].n_targets; t++)
                if (q->groups[g].targets[t].kind == order[o] && nd_pat_match(&q->groups[g].targets[t], module)) {
                    const char *text = q->groups[g].targets[t].text;
                    size_t last = g;
                    for (size_t h = g + 1; h < q->n_groups; h++)
                        for (size_t u = 0; u < q->groups[h].n_targets; u++)
                            if (!strcmp(q->groups[h].targets[u].text, text)) last = h;
                    return &q->groups[last];
                }
    return NULL;
}

/* ModelOpt quant_algo of one module: "" when excluded or not listed under MIXED_PRECISION. A
 * quantized_layers key matches the module itself, a parent of it, or as a glob. */
static const char *mo_algo_of(const nd_qcfg *q, const char *module) {
    if (any_match(q->exclude, q->n_exclude, module)) return "";
    if (strcmp(q->mo_algo, "MIXED_PRECISION") != 0) return q->mo_algo;
    for (size_t i = 0; i < q->n_layers; i++) {
        const char *p = q->layers[i].pattern;
        size_t pl = strlen(p);
        if (strcmp(p, module) == 0 || (strncmp(p, module, pl) == 0 && module[pl] == '.') ||
            fnmatch(p, module, 0) == 0)
            return q->layers[i].algo;
    }
    return "";
}

int nd_qcfg_ignored(const nd_qcfg *q, const char *module) {
    switch (q->fmt) {
    case ND_CKPT_COMPRESSED_TENSORS: return nd_qcfg_ct_group(q, module) == NULL;
    case ND_CKPT_MODELOPT: return mo_algo_of(q, module)[0] == 0;
    case ND_CKPT_FP8: return 0;
    case ND_CKPT_MXFP4: return no_convert(q, module);
    case ND_CKPT_UNQUANTIZED: return 1;
    }
    return 1;
}

int nd_qcfg_nvfp4_algo_conflict(const nd_qcfg *q, const char *module, const char **algo) {
    *algo = q->fmt == ND_CKPT_MODELOPT ? mo_algo_of(q, module) : "";
    return (*algo)[0] && !is_nvfp4_algo(*algo);
}

int nd_qcfg_awq(const nd_qcfg *q, const char *module) {
    return q->fmt == ND_CKPT_MODELOPT && strcmp(mo_algo_of(q, module), "NVFP4_AWQ") == 0;
}

int nd_qcfg_nvfp4_block(const nd_qcfg *q, const char *module) {
    return q->fmt == ND_CKPT_MODELOPT ? algo_block(mo_algo_of(q, module)) : ND_NVFP4_BLOCK;
}

int nd_qcfg_act_fp8_static(const nd_qcfg *q, const char *module) {
    return q->fmt == ND_CKPT_MODELOPT && strcmp(mo_algo_of(q, module), "W4A8_NVFP4_FP8") == 0;
}

int nd_qcfg_act_quant(const nd_qcfg *q, const char *module, int *known) {
    *known = 1;
    if (q->fmt == ND_CKPT_COMPRESSED_TENSORS) {
        const nd_ct_group *g = nd_qcfg_ct_group(q, module);
        if (!g) { *known = 0; return 0; }
        return g->a_bits == 4 && (g->a_type[0] == 0 || strcmp(g->a_type, "float") == 0);
    }
    if (q->fmt == ND_CKPT_MODELOPT) {
        const char *a = mo_algo_of(q, module);
        if (!a[0]) { *known = 0; return 0; }
        return strcmp(a, "NVFP4") == 0 || strcmp(a, "NVFP4_AWQ") == 0 || strcmp(a, "NVFP4_SVD") == 0;
    }
    if (q->fmt == ND_CKPT_MXFP4) return 0; /* gpt-oss: MXFP4 experts times BF16 activations */
    *known = 0;
    return 0;
}
