/* names.c — templates, attributes, and canonical -> on-disk tensor names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"

void nd_expand(const char *t, int layer, int expert, char *out, size_t cap) {
    size_t o = 0;
    if (!cap) return;
    while (*t && o + 1 < cap) {
        if (t[0] == '{' && (t[1] == 'L' || t[1] == 'E') && t[2] == '}') {
            char num[16];
            size_t k = (size_t)snprintf(num, sizeof num, "%d", t[1] == 'L' ? layer : expert);
            if (o + k >= cap) break; /* a number is never cut */
            memcpy(out + o, num, k);
            o += k;
            t += 3;
        } else {
            out[o++] = *t++;
        }
    }
    out[o] = 0;
}

const char *nd_attr_str(const nd_stage *st, const char *key, char *buf, size_t cap) {
    const char *v = nd_stage_attr(st->def, key);
    if (!v) return NULL;
    nd_expand(v, st->layer, 0, buf, cap);
    return buf;
}

/* A number, a config key ("$head_dim"), or a sum of those ("$qk_nope_head_dim+$qk_rope_head_dim",
 * "$head_dim+-$qk_rope_head_dim"). */
int nd_attr_num(nd_run *r, const nd_stage *st, const char *key, double dflt, double *out, nd_err *e) {
    const char *v = nd_stage_attr(st->def, key);
    if (!v) { *out = dflt; return 0; }
    double sum = 0;
    const char *p = v;
    for (;;) {
        char term[160];
        size_t n = strcspn(p, "+");
        if (n == 0 || n >= sizeof term)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: attribute %s of stage %s is not a number: '%s'", nd_stage_file(r->rc, st->def),
                           st->def->line, key, st->def->name, v);
        memcpy(term, p, n);
        term[n] = 0;
        double x, sign = 1;
        char *tp = term;
        if (tp[0] == '-' && tp[1] == '$') { sign = -1; tp++; } /* "$a+-$b" is a - b */
        if (tp[0] == '$') {
            if (nd_cfg_number(r->cfg, tp + 1, &x))
                return nd_fail(e, ND_EXIT_BADINPUT, "%s: stage %s needs config.json key '%s' (attribute %s)",
                               nd_ckpt_dir(r->ck), st->name, tp + 1, key);
            x *= sign;
        } else {
            char *end;
            x = strtod(term, &end);
            if (end == term || *end)
                return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: attribute %s of stage %s is not a number: '%s'", nd_stage_file(r->rc, st->def),
                               st->def->line, key, st->def->name, v);
        }
        sum += x;
        if (!p[n]) break;
        p += n + 1;
    }
    *out = sum;
    return 0;
}

int nd_attr_req(nd_run *r, const nd_stage *st, const char *key, double *out, nd_err *e) {
    if (!nd_stage_attr(st->def, key))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s needs attribute '%s'", nd_stage_file(r->rc, st->def), st->def->line,
                       st->def->name, key);
    return nd_attr_num(r, st, key, 0, out, e);
}

/* Match `name` against template `from` capturing {L}/{E} digits; write `to` with them. */
static int rename_one(const char *from, const char *to, const char *name, char *out, size_t cap) {
    int caps[2] = {-1, -1};
    const char *f = from, *n = name;
    while (*f) {
        if (f[0] == '{' && (f[1] == 'L' || f[1] == 'E') && f[2] == '}') {
            if (*n < '0' || *n > '9') return 0;
            int v = 0;
            while (*n >= '0' && *n <= '9') v = v * 10 + (*n++ - '0');
            caps[f[1] == 'E'] = v;
            f += 3;
        } else if (*f++ != *n++) return 0;
    }
    /* `from` is a prefix template: the rest of the name (".weight", ...) is kept */
    char head[256];
    nd_expand(to, caps[0], caps[1], head, sizeof head);
    snprintf(out, cap, "%s%s", head, n);
    return 1;
}

static const char *disk_name(const nd_naming *nm, const char *canonical, char *buf, size_t cap) {
    if (!nm) return canonical;
    for (int i = 0; i < nm->n_rename; i++)
        if (rename_one(nm->from[i], nm->to[i], canonical, buf, cap)) return buf;
    return canonical;
}

/* Multimodal checkpoints keep the decoder under another prefix: transformers 5 writes
 * `model.language_model.layers...` (lm_head at the top), earlier versions and many Hub exports
 * `language_model.model.layers...` and `language_model.lm_head`. A name the checkpoint lacks is
 * tried under those prefixes; `tensor` says whether to look for a tensor or a module. */
static const char *located(const nd_ckpt *ck, const char *name, int tensor, char *alt, size_t cap) {
    if (tensor ? nd_ckpt_find(ck, name) != NULL : nd_ckpt_has_module(ck, name)) return name;
    static const char *const from[] = {"model.", "model.", "lm_head"};
    static const char *const to[] = {"model.language_model.", "language_model.model.", "language_model.lm_head"};
    for (size_t i = 0; i < sizeof from / sizeof from[0]; i++) {
        size_t n = strlen(from[i]);
        if (strncmp(name, from[i], n)) continue;
        snprintf(alt, cap, "%s%s", to[i], name + n);
        if (tensor ? nd_ckpt_find(ck, alt) != NULL : nd_ckpt_has_module(ck, alt)) return alt;
    }
    return name;
}

const char *nd_module_located(const nd_ckpt *ck, const char *name, char *alt, size_t cap) {
    return located(ck, name, 0, alt, cap);
}

const nd_tview *nd_run_tensor(nd_run *r, int reference, const char *canonical) {
    char buf[320], alt[352];
    nd_ckpt *ck = reference && r->ref_ck ? r->ref_ck : r->ck;
    const nd_naming *nm = reference && r->ref_ck ? r->ref_naming : r->naming;
    return nd_ckpt_find(ck, located(ck, disk_name(nm, canonical, buf, sizeof buf), 1, alt, sizeof alt));
}

/* canonical's gate_proj <-> up_proj (w1 <-> w3) when the override <parent>.gate_up_tensors_swapped
 * is set for its MLP or expert (the stage-style name: "model." dropped), written into out. */
static const char *gate_up_swapped(nd_run *r, const char *canonical, char *out, size_t cap) {
    const char *dot = strrchr(canonical, '.'), *sib = nd_gate_up_sibling(canonical, NULL);
    if (!dot || !sib) return canonical;
    char parent[256];
    const char *p = !strncmp(canonical, "model.", 6) ? canonical + 6 : canonical;
    snprintf(parent, sizeof parent, "%.*s", (int)(dot - p), p);
    if (!nd_stack_gate_up_tensors_swapped(&r->stack, parent)) return canonical;
    snprintf(out, cap, "%.*s.%s", (int)(dot - canonical), canonical, sib);
    return out;
}

/* "model.layers.3.mlp.experts.17.down_proj" -> "model.layers.#.mlp.experts.#.down_proj": every
 * run of digits between dots (a layer, an expert, a shard) as '#' */
void nd_path_pattern(const char *p, char *out, size_t cap) {
    size_t o = 0;
    for (const char *q = p; *q && o + 1 < cap;) {
        if ((q == p || q[-1] == '.') && *q >= '0' && *q <= '9') {
            const char *d = q;
            while (*d >= '0' && *d <= '9') d++;
            if (!*d || *d == '.') { out[o++] = '#'; q = d; continue; }
        }
        out[o++] = *q++;
    }
    out[o] = 0;
}

void nd_run_note_bound(nd_run *r, const char *name) {
    if (!r->loop) return; /* an op run alone (no run_close frees the list): no coverage to judge */
    char pat[192];
    nd_path_pattern(name, pat, sizeof pat);
    for (int i = 0; i < r->n_bound; i++)
        if (!strcmp(r->bound[i], pat)) return;
    if (r->n_bound == r->cap_bound) {
        const int cap = r->cap_bound ? 2 * r->cap_bound : 32;
        char (*nb)[192] = realloc(r->bound, (size_t)cap * sizeof *nb);
        if (!nb) return; /* then the coverage check sees fewer bound modules: it can only say more */
        r->bound = nb;
        r->cap_bound = cap;
    }
    memcpy(r->bound[r->n_bound++], pat, sizeof pat);
}

int nd_run_module(nd_run *r, int reference, const char *canonical, nd_module *m, nd_err *e) {
    char buf[320];
    nd_ckpt *ck = reference && r->ref_ck ? r->ref_ck : r->ck;
    const nd_naming *nm = reference && r->ref_ck ? r->ref_naming : r->naming;
    char alt[352], swapped[320];
    /* the checkpoint under test read with its gate and up exchanged (a repair); the original not */
    if (ck == r->ck) canonical = gate_up_swapped(r, canonical, swapped, sizeof swapped);
    const char *name = located(ck, disk_name(nm, canonical, buf, sizeof buf), 0, alt, sizeof alt);
    /* tied embeddings: a checkpoint without lm_head reads the embedding matrix (as transformers ties
     * them); only when the config says so, else the missing lm_head is an error */
    if (!strcmp(canonical, "lm_head") && !nd_ckpt_has_module(ck, name) && r->cfg->tie_word_embeddings)
        name = located(ck, disk_name(nm, "model.embed_tokens", buf, sizeof buf), 0, alt, sizeof alt);
    ND_TRY(nd_ckpt_module(ck, name, m, e));
    if (ck == r->ck) nd_run_note_bound(r, name);
    /* binding read the global scales through the mapping: let their pages (and the neighbours
     * fault-around mapped with them) go */
    nd_ckpt_release_near(ck, m->weight_global);
    nd_ckpt_release_near(ck, m->input_global);
    if (!reference || !r->ref_ck) nd_stack_override_module(&r->stack, m);
    return 0;
}

/* A naming's detect names a tensor; one that names a module's weight (P.weight) also matches that
 * module stored in any form an exporter writes (P.weight_packed + scales, FP8 P.weight +
 * P.weight_scale, ...): a quantized checkpoint with the Hub's names has no P.weight. */
static int detected(const nd_ckpt *ck, const char *detect) {
    if (nd_ckpt_find(ck, detect)) return 1;
    const size_t n = strlen(detect);
    if (n <= 7 || strcmp(detect + n - 7, ".weight")) return 0;
    for (size_t i = 0; i < nd_ckpt_module_count(ck); i++) {
        const char *m = nd_ckpt_module_path(ck, i);
        if (strlen(m) == n - 7 && !strncmp(m, detect, n - 7)) return 1;
    }
    return 0;
}

const nd_naming *nd_naming_pick(const nd_recipe *rc, const nd_ckpt *ck) {
    for (int i = 0; i < rc->n_namings; i++)
        if (rc->namings[i].detect[0] && detected(ck, rc->namings[i].detect)) return &rc->namings[i];
    return NULL;
}

/* The recipe for a checkpoint as trace picks it (the one named, else the one matching its
 * model_type) and the naming it reads the checkpoint with (NULL: canonical); *rc for nd_recipe_free */
int nd_naming_for(const char *recipe, const nd_ckpt *ck, nd_recipe **rc, const nd_naming **nm, nd_err *e) {
    *nm = NULL;
    ND_TRY(recipe ? nd_recipe_load(recipe, rc, e) : nd_recipe_for_model_type(nd_ckpt_config(ck)->model_type, rc, e));
    *nm = nd_naming_pick(*rc, ck);
    return 0;
}

void nd_naming_map(const nd_naming *nm, const char *name, int to_disk, char *out, size_t cap) {
    snprintf(out, cap, "%s", name);
    for (int i = 0; nm && i < nm->n_rename; i++)
        if (to_disk ? rename_one(nm->from[i], nm->to[i], name, out, cap) : rename_one(nm->to[i], nm->from[i], name, out, cap)) return;
}
