/* stack.c — serving-stack profiles (YAML data) and --override. */
#include "stack.h"
#include "util/suggest.h"
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <unistd.h>
#include <strings.h>
#include <yaml.h>
#include "recipe/yaml_doc.h"
#include "numerics/nd_numerics.h"
#include "recipe/recipe.h"
#include "scale_repr.h"

/* A stack file is a flat mapping of typed keys, read with the one YAML reader
 * (src/recipe/yaml_doc.h): every value is checked against its key's type and set, and an unknown
 * key, a non-scalar or a value outside its set is exit 2 naming file, line and key. */
typedef enum { SK_TEXT, SK_ENUM, SK_BOOL, SK_INT } sk_kind;
typedef struct stack_key {
    const char *name;
    sk_kind kind;
    size_t off;                 /* the int (or char array) field of nd_stack */
    size_t cap;                 /* SK_TEXT: the field's size */
    const char *const *names;   /* SK_ENUM: the spellings, index = stored value */
    int n;
    long lo, hi, mult;          /* SK_INT */
} stack_key;

#define F(field) offsetof(nd_stack, field)
static const char *const RULES[] = {"own", "max", "min", "first"};        /* nd_fused_rule order */
static const char *const QUANT[] = {"kernel", "compressed-tensors"};    /* ND_QSEM_KERNEL, ND_QSEM_CT */
static const char *const GATE_UP[] = {"w13", "w31"}, *const TIMES[] = {"never", "once", "twice"};
static const char *const EPI[] = {"bf16", "fp16", "fp16_output"}, *const KVC[] = {"bf16", "fp8"};
static const char *const KVS[ND_KV_NUSES] = {"ignore", "apply", "twice", "write_only"};
static const char *const ROUNDING[] = {"none", "ue8m0_ceil", "ue8m0_requant"}, *const PADS[] = {"zero", "garbage"};
static const char *const GLOBAL[] = {"apart", "baked"}, *const RBIAS[] = {"fp32", "bf16"};
static const char *const LAYOUT[] = {"linear", "swizzled_128x4", "transposed", "padded_128x4"};  /* nd_sf_layout order */
static const char *const ENCODING[] = {"e4m3", "e8m0", "u8", "e8m0_bias125", "e8m0_bias128"}; /* nd_sf_encoding order */
static const stack_key KEYS[] = {
    {"stack", SK_TEXT, F(name), sizeof ((nd_stack *)0)->name, NULL, 0, 0, 0, 0},
    {"description", SK_TEXT, F(description), sizeof ((nd_stack *)0)->description, NULL, 0, 0, 0, 0},
    {"fused_input", SK_ENUM, F(input_fused), 0, RULES, 4, 0, 0, 0},
    {"fused_weight", SK_ENUM, F(weight_fused), 0, RULES, 4, 0, 0, 0},
    {"reciprocal_input", SK_BOOL, F(reciprocal_input), 0, NULL, 0, 0, 0, 0},
    {"quantizer", SK_ENUM, F(quant_sem), 0, QUANT, 2, 0, 0, 0},
    {"gate_up_order", SK_ENUM, F(gate_up_w31), 0, GATE_UP, 2, 0, 0, 0},
    {"routed_scaling", SK_ENUM, F(routed_scaling), 0, TIMES, 3, 0, 0, 0},
    {"epilogue", SK_ENUM, F(epilogue_fp16), 0, EPI, 3, 0, 0, 0},
    {"kv_cache", SK_ENUM, F(kv_cache_fp8), 0, KVC, 2, 0, 0, 0},
    {"kv_scales", SK_ENUM, F(kv_scales), 0, KVS, ND_KV_NUSES, 0, 0, 0},
    {"block_scale_rounding", SK_ENUM, F(block_scale_pow2), 0, ROUNDING, 3, 0, 0, 0},
    {"block_scale_layout", SK_ENUM, F(block_scale_layout), 0, LAYOUT, ND_SF_NLAYOUTS, 0, 0, 0},
    {"block_scale_encoding", SK_ENUM, F(block_scale_encoding), 0, ENCODING, ND_SF_NENCODINGS, 0, 0, 0},
    {"tp", SK_INT, F(tp), 0, NULL, 0, 1, 4096, 1},
    {"tp_tile", SK_INT, F(tp_tile), 0, NULL, 0, 16, 4096, 16},
    {"pad_policy", SK_ENUM, F(pad_garbage), 0, PADS, 2, 0, 0, 0},
    {"global_scale", SK_ENUM, F(global_scale_baked), 0, GLOBAL, 2, 0, 0, 0},
    {"router_bias", SK_ENUM, F(router_bias_bf16), 0, RBIAS, 2, 0, 0, 0},
};
#undef F

static int read_key(nd_ydoc *d, const stack_key *k, const yaml_node_t *v, nd_stack *s) {
    char *base = (char *)s;
    int *iv = (int *)(base + k->off);
    switch (k->kind) {
    case SK_TEXT: return nd_ydoc_text(d, k->name, v, base + k->off, k->cap);
    case SK_ENUM: return nd_ydoc_enum(d, k->name, v, k->names, k->n, iv);
    case SK_BOOL: return nd_ydoc_bool(d, k->name, v, iv);
    case SK_INT: {
        long x;
        ND_TRY(nd_ydoc_int(d, k->name, v, k->lo, k->hi, &x));
        if (x % k->mult) return nd_ydoc_fail(d, v, "%s must be a multiple of %ld, not %ld", k->name, k->mult, x);
        *iv = (int)x;
        return 0;
    }
    }
    return 0;
}

int nd_stack_load(const char *name, nd_stack *s, nd_err *e) {
    char path[1024];
    if (strchr(name, '/')) snprintf(path, sizeof path, "%s", name);
    else snprintf(path, sizeof path, "%s/stack-%s.yaml", nd_recipe_dir(), name);
    memset(s, 0, sizeof *s);
    if (access(path, F_OK) != 0) {
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
    nd_ydoc d;
    ND_TRY(nd_ydoc_load(&d, path, "serving-stack profile", e));
    yaml_node_t *root = nd_ydoc_root(&d);
    int rc = 0;
    if (!root || root->type != YAML_MAPPING_NODE) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: a stack profile must be a mapping", path);
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->path, sizeof s->path, "%s", path);
    s->quant_sem = ND_QSEM_KERNEL;
    s->routed_scaling = 1;
    s->kv_scales = ND_KV_APPLY;
    s->tp = 1;
    s->tp_tile = 16;
    for (yaml_node_pair_t *q = root && !rc ? root->data.mapping.pairs.start : NULL; q && q < root->data.mapping.pairs.top; q++) {
        yaml_node_t *kn = nd_ydoc_node(&d, q->key), *vn = nd_ydoc_node(&d, q->value);
        const char *k = nd_ydoc_scalar(kn);
        if (!k || vn->type != YAML_SCALAR_NODE) { rc = nd_ydoc_fail(&d, kn, "expected 'key: value'"); break; }
        const stack_key *key = NULL;
        for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0] && !key; i++)
            if (!strcmp(KEYS[i].name, k)) key = &KEYS[i];
        if (!key) {
            const char *cands[sizeof KEYS / sizeof KEYS[0]];
            for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++) cands[i] = KEYS[i].name;
            const char *best = nd_suggest(k, cands, sizeof KEYS / sizeof KEYS[0]);
            rc = nd_ydoc_fail(&d, kn, "unknown key '%s'%s%s%s", k, best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "");
            break;
        }
        if ((rc = read_key(&d, key, vn, s))) break;
    }
    nd_ydoc_free(&d);
    return rc;
}

int nd_stack_add_override(nd_stack *s, const char *arg, nd_err *e) {
    const char *eq = strrchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) return nd_fail(e, ND_EXIT_BADINPUT, "--override %s: expected NAME=VALUE", arg);
    if (s->n_ov >= ND_MAX_OVERRIDES) return nd_fail(e, ND_EXIT_BADINPUT, "--override: at most %d overrides", ND_MAX_OVERRIDES);
    char *end;
    /* a decimal number as written (sign, digits, point, exponent; nan/inf for the non-finite cases
     * an override may test): no hexadecimal, no surrounding blanks, which strtod would take */
    const char *val = eq + 1;
    const int word = !strcasecmp(val + (*val == '-' || *val == '+'), "nan") || !strcasecmp(val + (*val == '-' || *val == '+'), "inf");
    if (!word && (strspn(val, "+-0123456789.eE") != strlen(val) || !strpbrk(val, "0123456789")))
        return nd_fail(e, ND_EXIT_BADINPUT, "--override %s: '%s' is not a decimal number", arg, val);
    double v = strtod(val, &end);
    if (*end) return nd_fail(e, ND_EXIT_BADINPUT, "--override %s: '%s' is not a number", arg, eq + 1);
    size_t n = (size_t)(eq - arg);
    if (n >= sizeof s->ov[0].name) return nd_fail(e, ND_EXIT_BADINPUT, "--override: name too long");
    /* the runtime-behaviour switches take a count or a flag, nothing else */
    static const struct { const char *suffix; int min, max; const char *takes; } sw[] = {
        {".gate_up_swap", 0, 1, "0 or 1"}, {".routed_scaling", 0, 2, "0, 1 or 2 (times applied)"}, {".epilogue_fp16", 0, 2, "0 (bf16), 1 (fp16: cast before alpha) or 2 (fp16_output)"},
        {".kv_cache_fp8", 0, 1, "0 or 1"}, {".kv_scales", 0, 3, "0 (ignore), 1 (apply), 2 (twice) or 3 (write_only)"},
        {".block_scale_pow2", 0, 2, "0 (none), 1 (ue8m0_ceil) or 2 (ue8m0_requant)"}, {".block_scale_layout", 0, 3, "0 (linear), 1 (swizzled_128x4), 2 (transposed) or 3 (padded_128x4)"},
        {".block_scale_encoding", 0, 4, "0 (e4m3; MXFP4: its own e8m0), 1 (e8m0), 2 (u8), 3 (e8m0_bias125) or 4 (e8m0_bias128)"}, {".tp", 1, 4096, "an integer from 1 to 4096"},
        {".pad_garbage", 0, 1, "0 or 1"}, {".scale_layout", 0, 3, "0 (linear), 1 (swizzled_128x4), 2 (transposed) or 3 (padded: rows of the stored tensor's length)"},
        {".scale_encoding", 0, 4, "0 (e4m3; MXFP4: its own e8m0), 1 (e8m0), 2 (u8), 3 (e8m0_bias125) or 4 (e8m0_bias128)"}, {".block_scale_refit", 0, 1, "0 or 1"},
        {".global_scale_baked", 0, 1, "0 or 1"}, {".router_bias_bf16", 0, 1, "0 or 1"}, {".gate_up_tensors_swapped", 0, 1, "0 or 1"},
        {".scale_exponent_shift", -8, 8, "an integer from -8 to 8"}};
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
/* The override named `name` (the last one given wins; each match counts as used), NULL when none. */
static nd_override *find_named(nd_stack *s, const char *name) {
    nd_override *hit = NULL;
    if (s->on_lookup) s->on_lookup(s->lookup_user, name);
    for (int i = 0; i < s->n_ov; i++)
        if (!strcmp(s->ov[i].name, name)) { s->ov[i].used = 1; hit = &s->ov[i]; }
    return hit;
}

static nd_override *find_ov(nd_stack *s, const char *prefix, const char *suffix) {
    char full[256];
    snprintf(full, sizeof full, "%s.%s", prefix, suffix);
    return find_named(s, full);
}

void nd_stack_override_module(nd_stack *s, nd_module *m) {
    nd_override *o;
    /* block scales whose E4M3 exponent was written k too low (every scale 2^-k of its value): read
     * 2^k larger. E4M3 cannot hold 448 x 2^k, so the factor goes into the weight's divisor, where it
     * is exact (a power of two) and means the same for both paths: codes x (s 2^k) / g */
    if (m->wfmt == ND_WF_NVFP4 && (o = find_ov(s, m->path, "scale_exponent_shift")))
        m->weight_global_div = (float)ldexp(m->weight_global_div, -(int)o->value);
    /* a dense (BF16) module has no scales: an override of them applies to nothing (left unused) */
    if (m->wfmt == ND_WF_DENSE) return;
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

/* A knob of one stage or module: its override <prefix>.<key> when given, else dflt (the profile's). */
static int ov_flag(nd_stack *s, const char *prefix, const char *key, int dflt) {
    nd_override *o = find_ov(s, prefix, key);
    return o ? o->value != 0 : dflt;
}

static int ov_int(nd_stack *s, const char *prefix, const char *key, int dflt) {
    nd_override *o = find_ov(s, prefix, key);
    return o ? (int)o->value : dflt;
}

int nd_stack_gate_up_swap(nd_stack *s, const char *stage) {
    s->gate_up_consulted = 1;
    return ov_flag(s, stage, "gate_up_swap", s->gate_up_w31);
}
int nd_stack_gate_up_tensors_swapped(nd_stack *s, const char *prefix) { return ov_flag(s, prefix, "gate_up_tensors_swapped", 0); }
int nd_stack_routed_scaling(nd_stack *s, const char *stage) { return ov_int(s, stage, "routed_scaling", s->routed_scaling); }
int nd_stack_epilogue_fp16(nd_stack *s, const char *stage) { return ov_int(s, stage, "epilogue_fp16", s->epilogue_fp16); }
int nd_stack_router_bias_bf16(nd_stack *s, const char *stage) {
    return ov_flag(s, stage, "router_bias_bf16", s->router_bias_bf16);
}
int nd_stack_kv_cache_fp8(nd_stack *s, const char *stage) { return ov_flag(s, stage, "kv_cache_fp8", s->kv_cache_fp8); }
int nd_stack_kv_scales(nd_stack *s, const char *stage) { return ov_int(s, stage, "kv_scales", s->kv_scales); }

const char *nd_kv_use_name(int use) {
    static const char *const names[ND_KV_NUSES] = {"ignore", "apply", "twice", "write_only"};
    return use >= 0 && use < ND_KV_NUSES ? names[use] : "?";
}

double nd_stack_scalar(nd_stack *s, const char *tensor, double dflt) {
    nd_override *hit = find_named(s, tensor);
    return hit ? hit->value : dflt;
}

void nd_stack_module_repair(nd_stack *s, const nd_module *m, nd_module_repair *out) {
    /* the byte repairs mean something for FP4 weights only: on another module the override is
     * never looked up, so the run says it matched nothing (exit 2), never a silent no-op */
    memset(out, 0, sizeof *out);
    out->scale_layout = ND_SF_LINEAR;
    out->scale_encoding = ND_SF_E4M3;
    if (m->wfmt != ND_WF_NVFP4 && m->wfmt != ND_WF_MXFP4) return;
    out->nibble_swap = ov_flag(s, m->path, "nibble_swap", 0);
    out->block_scale_fix = ov_flag(s, m->path, "block_scale_fix", 0);
    out->scale_layout = ov_int(s, m->path, "scale_layout", ND_SF_LINEAR);
    out->scale_encoding = ov_int(s, m->path, "scale_encoding", ND_SF_E4M3);
    out->block_scale_refit = ov_flag(s, m->path, "block_scale_refit", 0);
}

void nd_stack_sf_read(nd_stack *s, const char *stage, nd_sf_read *out) {
    out->pow2 = ov_int(s, stage, "block_scale_pow2", s->block_scale_pow2);
    out->layout = ov_int(s, stage, "block_scale_layout", s->block_scale_layout);
    out->encoding = ov_int(s, stage, "block_scale_encoding", s->block_scale_encoding);
    out->tp = ov_int(s, stage, "tp", s->tp);
    out->tile = s->tp_tile;
    out->pad_garbage = ov_flag(s, stage, "pad_garbage", s->pad_garbage);
    out->baked = ov_flag(s, stage, "global_scale_baked", s->global_scale_baked);
    out->baked_div = 0;
}

int nd_sf_read_plain(const nd_sf_read *rd) {
    return !rd->pow2 && rd->layout == ND_SF_LINEAR && rd->encoding == ND_SF_E4M3 && !(rd->tp > 1 && rd->pad_garbage) &&
           !rd->baked;
}

void nd_stack_used_save(const nd_stack *s, unsigned char *saved) {
    for (int i = 0; i < s->n_ov; i++) saved[i] = (unsigned char)s->ov[i].used;
}

void nd_stack_used_restore(nd_stack *s, const unsigned char *saved) {
    for (int i = 0; i < s->n_ov; i++) s->ov[i].used = saved[i];
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
