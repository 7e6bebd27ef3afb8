/* stack.c — serving-stack profiles (YAML data) and --override. */
#include "stack.h"
#include "util/suggest.h"
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>
#include "recipe/yaml_depth.h"
#include "numerics/nd_numerics.h"
#include "recipe/recipe.h"
#include "scale_repr.h"

static int parse_rule(const char *v, int *out) {
    if (!strcmp(v, "own")) *out = ND_FUSED_OWN;
    else if (!strcmp(v, "max")) *out = ND_FUSED_MAX;
    else if (!strcmp(v, "min")) *out = ND_FUSED_MIN;
    else if (!strcmp(v, "first")) *out = ND_FUSED_FIRST;
    else return -1;
    return 0;
}

/* A boolean as profiles write it: true/false, yes/no, 1/0 in any case; anything else is refused
 * (a typo must not silently mean false). */
static int parse_bool(const char *v, int *out) {
    static const char *const yes[] = {"true", "yes", "1"}, *const no[] = {"false", "no", "0"};
    for (int i = 0; i < 3; i++) {
        if (!strcasecmp(v, yes[i])) { *out = 1; return 0; }
        if (!strcasecmp(v, no[i])) { *out = 0; return 0; }
    }
    return -1;
}

/* One of `n` spellings (case-sensitive, as the other enumerated keys); its index, or -1. */
static int parse_enum(const char *v, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i])) return i;
    return -1;
}

/* A positive integer key (tp, tp_tile) within [lo, hi] and a multiple of `mult`; -1 otherwise. */
static int parse_count(const char *v, int lo, int hi, int mult) {
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi || x % mult) return -1;
    return (int)x;
}

/* A stack file is a flat mapping: stack, description, fused_input, fused_weight,
 * reciprocal_input, quantizer, gate_up_order, routed_scaling, epilogue, kv_cache, kv_scales,
 * block_scale_rounding, block_scale_layout, block_scale_encoding, tp, tp_tile, pad_policy. */
int nd_stack_load(const char *name, nd_stack *s, nd_err *e) {
    char path[1024];
    if (strchr(name, '/')) snprintf(path, sizeof path, "%s", name);
    else snprintf(path, sizeof path, "%s/stack-%s.yaml", nd_recipe_dir(), name);
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f) {
        /* "did you mean": the shipped profile closest to a misspelt name */
        char names[64][64], near[96] = "";
        const char *cands[64];
        int n = 0;
        nd_err ignore = {0};
        if (!strchr(name, '/') && !nd_stack_names(names, 64, &n, &ignore)) {
            for (int i = 0; i < n; i++) cands[i] = names[i];
            const char *best = nd_suggest(name, cands, (size_t)n);
            if (best) snprintf(near, sizeof near, "; did you mean '%s'?", best);
        }
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: no serving-stack profile named '%s'%s", path, name, near);
    }
    int deep_line = 0;
    if (!nd_yaml_depth_ok(f, ND_YAML_MAX_DEPTH, &deep_line)) {
        fclose(f);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: nested deeper than %d levels", path, deep_line, ND_YAML_MAX_DEPTH);
    }
    yaml_parser_t p;
    yaml_document_t doc;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_file(&p, f);
    int rc = 0;
    if (!yaml_parser_load(&p, &doc)) {
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: malformed YAML: %s", path, (int)p.problem_mark.line + 1,
                     p.problem ? p.problem : "parse error");
        yaml_parser_delete(&p);
        fclose(f);
        return rc;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || root->type != YAML_MAPPING_NODE) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: a stack profile must be a mapping", path);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->quant_sem = ND_QSEM_KERNEL;
    s->routed_scaling = 1;
    static const char *const gate_up[] = {"w13", "w31"}, *const times[] = {"never", "once", "twice"},
                             *const epi[] = {"bf16", "fp16"}, *const kvc[] = {"bf16", "fp8"},
                             *const kvs[ND_KV_NUSES] = {"ignore", "apply", "twice", "write_only"};
    s->kv_scales = ND_KV_APPLY;
    s->tp = 1;
    s->tp_tile = 16;
    static const char *const rounding[] = {"none", "ue8m0_ceil"}, *const pads[] = {"zero", "garbage"};
    for (yaml_node_pair_t *q = root && !rc ? root->data.mapping.pairs.start : NULL; q && q < root->data.mapping.pairs.top; q++) {
        yaml_node_t *kn = yaml_document_get_node(&doc, q->key), *vn = yaml_document_get_node(&doc, q->value);
        if (kn->type != YAML_SCALAR_NODE || vn->type != YAML_SCALAR_NODE) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: expected 'key: value'", path, (int)kn->start_mark.line + 1);
            break;
        }
        const char *k = (const char *)kn->data.scalar.value, *v = (const char *)vn->data.scalar.value;
        int line = (int)kn->start_mark.line + 1;
        if (!strcmp(k, "stack")) snprintf(s->name, sizeof s->name, "%s", v);
        else if (!strcmp(k, "description")) snprintf(s->description, sizeof s->description, "%s", v);
        else if (!strcmp(k, "fused_input") || !strcmp(k, "fused_weight")) {
            if (parse_rule(v, k[6] == 'i' ? &s->input_fused : &s->weight_fused)) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: %s must be own, max, min or first", path, line, k);
                break;
            }
        } else if (!strcmp(k, "reciprocal_input")) {
            if (parse_bool(v, &s->reciprocal_input)) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: reciprocal_input must be true or false (yes/no, 1/0), not '%s'", path, line, v);
                break;
            }
        } else if (!strcmp(k, "gate_up_order")) {
            if ((s->gate_up_w31 = parse_enum(v, gate_up, 2)) < 0) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: gate_up_order must be w13 or w31, not '%s'", path, line, v);
                break;
            }
        } else if (!strcmp(k, "routed_scaling")) {
            if ((s->routed_scaling = parse_enum(v, times, 3)) < 0) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: routed_scaling must be once, twice or never, not '%s'", path, line, v);
                break;
            }
        } else if (!strcmp(k, "epilogue")) {
            if ((s->epilogue_fp16 = parse_enum(v, epi, 2)) < 0) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: epilogue must be bf16 or fp16, not '%s'", path, line, v);
                break;
            }
        } else if (!strcmp(k, "kv_cache")) {
            if ((s->kv_cache_fp8 = parse_enum(v, kvc, 2)) < 0) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: kv_cache must be bf16 or fp8, not '%s'", path, line, v);
                break;
            }
        } else if (!strcmp(k, "kv_scales")) {
            if ((s->kv_scales = parse_enum(v, kvs, ND_KV_NUSES)) < 0) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: kv_scales must be apply, ignore, twice or write_only, not '%s'", path, line, v);
                break;
            }
        } else if (!strcmp(k, "block_scale_rounding")) {
            if ((s->block_scale_pow2 = parse_enum(v, rounding, 2)) < 0) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: block_scale_rounding must be none or ue8m0_ceil, not '%s'", path, line, v);
                break;
            }
        } else if (!strcmp(k, "block_scale_layout")) {
            if ((s->block_scale_layout = nd_sf_layout_parse(v)) < 0) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: block_scale_layout must be linear, swizzled_128x4 or transposed, not '%s'", path, line, v);
                break;
            }
        } else if (!strcmp(k, "block_scale_encoding")) {
            if ((s->block_scale_encoding = nd_sf_encoding_parse(v)) < 0) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: block_scale_encoding must be e4m3, e8m0 or u8, not '%s'", path, line, v);
                break;
            }
        } else if (!strcmp(k, "tp")) {
            if ((s->tp = parse_count(v, 1, 4096, 1)) < 0) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: tp must be an integer from 1 to 4096, not '%s'", path, line, v);
                break;
            }
        } else if (!strcmp(k, "tp_tile")) {
            if ((s->tp_tile = parse_count(v, 16, 4096, 16)) < 0) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: tp_tile must be a multiple of 16 from 16 to 4096, not '%s'", path, line, v);
                break;
            }
        } else if (!strcmp(k, "pad_policy")) {
            if ((s->pad_garbage = parse_enum(v, pads, 2)) < 0) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: pad_policy must be zero or garbage, not '%s'", path, line, v);
                break;
            }
        } else if (!strcmp(k, "quantizer")) {
            if (!strcmp(v, "kernel")) s->quant_sem = ND_QSEM_KERNEL;
            else if (!strcmp(v, "compressed-tensors")) s->quant_sem = ND_QSEM_CT;
            else { rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: quantizer must be kernel or compressed-tensors", path, line); break; }
        } else { rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: unknown key '%s'", path, line, k); break; }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&p);
    fclose(f);
    return rc;
}

int nd_stack_add_override(nd_stack *s, const char *arg, nd_err *e) {
    const char *eq = strrchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) return nd_fail(e, ND_EXIT_BADINPUT, "--override %s: expected NAME=VALUE", arg);
    if (s->n_ov >= ND_MAX_OVERRIDES) return nd_fail(e, ND_EXIT_BADINPUT, "--override: at most %d overrides", ND_MAX_OVERRIDES);
    char *end;
    double v = strtod(eq + 1, &end);
    if (*end) return nd_fail(e, ND_EXIT_BADINPUT, "--override %s: '%s' is not a number", arg, eq + 1);
    size_t n = (size_t)(eq - arg);
    if (n >= sizeof s->ov[0].name) return nd_fail(e, ND_EXIT_BADINPUT, "--override: name too long");
    /* the runtime-behaviour switches take a count or a flag, nothing else */
    static const struct { const char *suffix; int min, max; const char *takes; } sw[] = {
        {".gate_up_swap", 0, 1, "0 or 1"}, {".routed_scaling", 0, 2, "0, 1 or 2 (times applied)"}, {".epilogue_fp16", 0, 1, "0 or 1"},
        {".kv_cache_fp8", 0, 1, "0 or 1"}, {".kv_scales", 0, 3, "0 (ignore), 1 (apply), 2 (twice) or 3 (write_only)"},
        {".block_scale_pow2", 0, 1, "0 or 1"}, {".block_scale_layout", 0, 2, "0 (linear), 1 (swizzled_128x4) or 2 (transposed)"},
        {".block_scale_encoding", 0, 2, "0 (e4m3), 1 (e8m0) or 2 (u8)"}, {".tp", 1, 4096, "an integer from 1 to 4096"},
        {".pad_garbage", 0, 1, "0 or 1"}, {".scale_layout", 0, 2, "0 (linear), 1 (swizzled_128x4) or 2 (transposed)"},
        {".scale_encoding", 0, 2, "0 (e4m3), 1 (e8m0) or 2 (u8)"}, {".block_scale_refit", 0, 1, "0 or 1"}};
    for (size_t i = 0; i < sizeof sw / sizeof sw[0]; i++) {
        size_t ls = strlen(sw[i].suffix);
        if (n > ls && !strncmp(arg + n - ls, sw[i].suffix, ls) && !(v >= sw[i].min && v <= sw[i].max && v == (int)v))
            return nd_fail(e, ND_EXIT_BADINPUT, "--override %s: %s takes %s", arg, sw[i].suffix + 1, sw[i].takes);
    }
    nd_override *o = &s->ov[s->n_ov++];
    memcpy(o->name, arg, n);
    o->name[n] = 0;
    o->value = v;
    o->used = 0;
    return 0;
}

/* The override of prefix.suffix; the last one given wins (a repair replayed or printed after the
 * user's own override of the same name), and every one of that name counts as used. */
static nd_override *find_ov(nd_stack *s, const char *prefix, const char *suffix) {
    char full[256];
    snprintf(full, sizeof full, "%s.%s", prefix, suffix);
    nd_override *hit = NULL;
    for (int i = 0; i < s->n_ov; i++)
        if (!strcmp(s->ov[i].name, full)) { s->ov[i].used = 1; hit = &s->ov[i]; }
    return hit;
}

void nd_stack_override_module(nd_stack *s, nd_module *m) {
    nd_override *o;
    if (m->conv == ND_CONV_MODELOPT) {
        if ((o = find_ov(s, m->path, "input_scale"))) m->input_global_mult = (float)(1.0 / o->value);
        if ((o = find_ov(s, m->path, "weight_scale_2"))) m->weight_global_div = (float)(1.0 / o->value);
    } else {
        if ((o = find_ov(s, m->path, "input_global_scale"))) m->input_global_mult = (float)o->value;
        if ((o = find_ov(s, m->path, "weight_global_scale"))) m->weight_global_div = (float)o->value;
    }
}

const char *nd_fused_rule_name(int rule) {
    static const char *names[ND_FUSED_NRULES] = {"own", "max", "min", "first"};
    return rule >= 0 && rule < ND_FUSED_NRULES ? names[rule] : "?";
}

static float fuse(int rule, float own, const nd_module *fused, int n, int input) {
    if (rule == ND_FUSED_OWN || n <= 1) return own;
    float v = input ? fused[0].input_global_mult : fused[0].weight_global_div;
    if (rule == ND_FUSED_FIRST) return v;
    for (int i = 1; i < n; i++) {
        float x = input ? fused[i].input_global_mult : fused[i].weight_global_div;
        /* NaN from a missing scale must win, as an unloaded parameter would */
        if (x != x || v != v) { v = NAN; continue; }
        v = rule == ND_FUSED_MAX ? fmaxf(v, x) : fminf(v, x);
    }
    return v;
}

void nd_stack_params(nd_stack *s, const nd_module *m, const nd_module *fused, int n_fused,
                     const char *stage, nd_prod_params *out) {
    out->ideal_w_div = m->weight_global_div;
    int rule_in = s->input_fused, rule_w = s->weight_fused;
    nd_override *o;
    if ((o = find_ov(s, stage, "fused_input")) && o->value >= 0 && o->value < ND_FUSED_NRULES) rule_in = (int)o->value;
    if ((o = find_ov(s, stage, "fused_weight")) && o->value >= 0 && o->value < ND_FUSED_NRULES) rule_w = (int)o->value;
    float mult = fuse(rule_in, m->input_global_mult, fused, n_fused, 1);
    if (s->reciprocal_input) mult = 1.0f / mult;
    out->w_div = fuse(rule_w, m->weight_global_div, fused, n_fused, 0);
    out->mult = mult;
    if ((o = find_ov(s, stage, "quant_mult")) || (o = find_ov(s, stage, "input_global_scale_inv"))) out->mult = (float)o->value;
    /* vLLM's post-load weight_global_scale is the reciprocal of the CT divisor */
    if ((o = find_ov(s, stage, "weight_global_scale"))) out->w_div = (float)(1.0 / o->value);
    out->alpha = 1.0f / (out->mult * out->w_div);
    if ((o = find_ov(s, stage, "alpha"))) out->alpha = (float)o->value;
}

int nd_stack_gate_up_swap(nd_stack *s, const char *stage) {
    nd_override *o = find_ov(s, stage, "gate_up_swap");
    return o ? o->value != 0 : s->gate_up_w31;
}

int nd_stack_routed_scaling(nd_stack *s, const char *stage) {
    nd_override *o = find_ov(s, stage, "routed_scaling");
    return o ? (int)o->value : s->routed_scaling;
}

int nd_stack_epilogue_fp16(nd_stack *s, const char *stage) {
    nd_override *o = find_ov(s, stage, "epilogue_fp16");
    return o ? o->value != 0 : s->epilogue_fp16;
}

int nd_stack_kv_cache_fp8(nd_stack *s, const char *stage) {
    nd_override *o = find_ov(s, stage, "kv_cache_fp8");
    return o ? o->value != 0 : s->kv_cache_fp8;
}

int nd_stack_kv_scales(nd_stack *s, const char *stage) {
    nd_override *o = find_ov(s, stage, "kv_scales");
    return o ? (int)o->value : s->kv_scales;
}

const char *nd_kv_use_name(int use) {
    static const char *const names[ND_KV_NUSES] = {"ignore", "apply", "twice", "write_only"};
    return use >= 0 && use < ND_KV_NUSES ? names[use] : "?";
}

double nd_stack_scalar(nd_stack *s, const char *tensor, double dflt) {
    nd_override *hit = NULL;
    for (int i = 0; i < s->n_ov; i++)
        if (!strcmp(s->ov[i].name, tensor)) { s->ov[i].used = 1; hit = &s->ov[i]; }
    return hit ? hit->value : dflt;
}

void nd_stack_module_repair(nd_stack *s, const nd_module *m, nd_module_repair *out) {
    nd_override *o;
    out->nibble_swap = (o = find_ov(s, m->path, "nibble_swap")) && o->value != 0;
    out->block_scale_fix = (o = find_ov(s, m->path, "block_scale_fix")) && o->value != 0;
    out->scale_layout = (o = find_ov(s, m->path, "scale_layout")) ? (int)o->value : ND_SF_LINEAR;
    out->scale_encoding = (o = find_ov(s, m->path, "scale_encoding")) ? (int)o->value : ND_SF_E4M3;
    out->block_scale_refit = (o = find_ov(s, m->path, "block_scale_refit")) && o->value != 0;
}

void nd_stack_sf_read(nd_stack *s, const char *stage, nd_sf_read *out) {
    nd_override *o;
    out->pow2 = (o = find_ov(s, stage, "block_scale_pow2")) ? o->value != 0 : s->block_scale_pow2;
    out->layout = (o = find_ov(s, stage, "block_scale_layout")) ? (int)o->value : s->block_scale_layout;
    out->encoding = (o = find_ov(s, stage, "block_scale_encoding")) ? (int)o->value : s->block_scale_encoding;
    out->tp = (o = find_ov(s, stage, "tp")) ? (int)o->value : s->tp;
    out->tile = s->tp_tile;
    out->pad_garbage = (o = find_ov(s, stage, "pad_garbage")) ? o->value != 0 : s->pad_garbage;
}

int nd_sf_read_plain(const nd_sf_read *rd) {
    return !rd->pow2 && rd->layout == ND_SF_LINEAR && rd->encoding == ND_SF_E4M3 && !(rd->tp > 1 && rd->pad_garbage);
}

int nd_stack_unused(const nd_stack *s, const char **name) {
    for (int i = 0; i < s->n_ov; i++)
        if (!s->ov[i].used) { *name = s->ov[i].name; return 1; }
    return 0;
}

int nd_stack_breaks(const nd_stack *s, nd_break_kind kind) {
    switch (kind) {
    case ND_BREAKS_NONE: return 0;
    case ND_BREAKS_ALL: return 1;
    case ND_BREAKS_FUSED_WEIGHT: return s->weight_fused != ND_FUSED_OWN;
    case ND_BREAKS_FUSED_INPUT: return s->input_fused != ND_FUSED_OWN;
    case ND_BREAKS_INPUT_CONVENTION: return !s->reciprocal_input;
    case ND_BREAKS_KV_FP8: return s->kv_cache_fp8;
    case ND_BREAKS_NKINDS: break;
    }
    return 1;
}

static int by_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

int nd_stack_names(char (*out)[64], int cap, int *n, nd_err *e) {
    *n = 0;
    const char *dir = nd_recipe_dir();
    DIR *d = opendir(dir);
    if (!d) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot list the stack profiles", dir);
    struct dirent *de;
    while ((de = readdir(d)) && *n < cap) {
        size_t len = strlen(de->d_name);
        if (strncmp(de->d_name, "stack-", 6) || len < 12 || len - 11 >= 64 || strcmp(de->d_name + len - 5, ".yaml")) continue;
        snprintf(out[*n], 64, "%.*s", (int)(len - 11), de->d_name + 6);
        (*n)++;
    }
    closedir(d);
    qsort(out, (size_t)*n, sizeof out[0], by_name);
    return 0;
}
