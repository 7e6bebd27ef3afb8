/* bundle_recipe.c — replay's one-stage recipe, emitted through libyaml's emitter.
 *
 * Every string of a bundle comes from a file someone sent: the recipe is never made by pasting
 * them into YAML text (a newline in an attribute would add keys). The stage definition is parsed
 * as YAML, must be one mapping of scalar keys to scalars or lists of scalars, and is copied node
 * by node into a document the emitter writes; names and numbers become scalars of their own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include "util/membuf.h"
#include "bundle_recipe.h"

#define STR(d, s) yaml_document_add_scalar(d, NULL, (yaml_char_t *)(s), -1, YAML_DOUBLE_QUOTED_SCALAR_STYLE)
#define KEY(d, s) yaml_document_add_scalar(d, NULL, (yaml_char_t *)(s), -1, YAML_PLAIN_SCALAR_STYLE)

static int num(yaml_document_t *d, double v) {
    char t[40];
    snprintf(t, sizeof t, "%.17g", v);
    return KEY(d, t);
}

static int pair(yaml_document_t *d, int map, int k, int v) {
    return k && v && yaml_document_append_mapping_pair(d, map, k, v);
}

static int scalar_ok(const yaml_node_t *n) { return n && n->type == YAML_SCALAR_NODE; }

/* Copy the stage mapping of src (validated here) into the mapping `into` of d. */
static int copy_stage(yaml_document_t *src, yaml_document_t *d, int into, const char *skip_key, nd_err *e) {
    yaml_node_t *root = yaml_document_get_root_node(src);
    if (!root || root->type != YAML_MAPPING_NODE)
        return nd_fail(e, ND_EXIT_BADINPUT, "bundle: stage_yaml is not a YAML mapping");
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(src, p->key), *v = yaml_document_get_node(src, p->value);
        if (!scalar_ok(k)) return nd_fail(e, ND_EXIT_BADINPUT, "bundle: stage_yaml has a key that is not a scalar");
        const char *ks = (const char *)k->data.scalar.value;
        if (!strcmp(ks, skip_key)) return nd_fail(e, ND_EXIT_BADINPUT, "bundle: stage_yaml sets %s, which replay sets itself", ks);
        int kn = STR(d, ks), vn = 0;
        if (scalar_ok(v)) {
            vn = STR(d, (const char *)v->data.scalar.value);
        } else if (v && v->type == YAML_SEQUENCE_NODE) {
            vn = yaml_document_add_sequence(d, NULL, YAML_FLOW_SEQUENCE_STYLE);
            for (yaml_node_item_t *it = v->data.sequence.items.start; vn && it < v->data.sequence.items.top; it++) {
                yaml_node_t *x = yaml_document_get_node(src, *it);
                if (!scalar_ok(x)) return nd_fail(e, ND_EXIT_BADINPUT, "bundle: stage_yaml key %s holds a list of non-scalars", ks);
                const int xn = STR(d, (const char *)x->data.scalar.value);
                if (!xn || !yaml_document_append_sequence_item(d, vn, xn)) vn = 0;
            }
        } else {
            return nd_fail(e, ND_EXIT_BADINPUT, "bundle: stage_yaml key %s holds neither a scalar nor a list of scalars", ks);
        }
        if (!pair(d, into, kn, vn)) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    }
    return 0;
}

static int parse_stage(const char *text, yaml_document_t *doc, nd_err *e) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
    int ok = yaml_parser_load(&p, doc);
    if (!ok) {
        int rc = nd_fail(e, ND_EXIT_BADINPUT, "bundle: stage_yaml is not valid YAML (%s)", p.problem ? p.problem : "?");
        yaml_parser_delete(&p);
        return rc;
    }
    /* exactly one document */
    yaml_document_t more;
    if (yaml_parser_load(&p, &more)) {
        const int extra = yaml_document_get_root_node(&more) != NULL;
        yaml_document_delete(&more);
        if (extra) { yaml_parser_delete(&p); yaml_document_delete(doc); return nd_fail(e, ND_EXIT_BADINPUT, "bundle: stage_yaml holds more than one YAML document"); }
    }
    yaml_parser_delete(&p);
    return 0;
}

int nd_bundle_recipe_text(const nd_bundle *b, char **out, nd_err *e) {
    *out = NULL;
    if (!b->stage_yaml) return nd_fail(e, ND_EXIT_BADINPUT, "bundle: no stage_yaml");
    yaml_document_t stage, d;
    ND_TRY(parse_stage(b->stage_yaml, &stage, e));
    /* the stage definition is of the bundle's own op: another (an identity in a linear's bundle) would
     * replay something else and compare it with the original rows (a stage name that is not the
     * bundle's finds no stage later, naming the bundle) */
    yaml_node_t *sr = yaml_document_get_root_node(&stage);
    for (yaml_node_pair_t *p = sr && sr->type == YAML_MAPPING_NODE ? sr->data.mapping.pairs.start : NULL;
         p && p < sr->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&stage, p->key), *v = yaml_document_get_node(&stage, p->value);
        if (!scalar_ok(k) || !scalar_ok(v)) continue;
        const char *ks = (const char *)k->data.scalar.value, *vs = (const char *)v->data.scalar.value;
        if (!strcmp(ks, "op") && strcmp(vs, b->op)) {
            int rc = nd_fail(e, ND_EXIT_BADINPUT, "bundle: stage_yaml says %s %.200s, but the bundle is of stage %.200s (op %.31s)",
                             ks, vs, b->stage, b->op);
            yaml_document_delete(&stage);
            return rc;
        }
    }
    if (!yaml_document_initialize(&d, NULL, NULL, NULL, 1, 1)) {
        yaml_document_delete(&stage);
        return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    }
    int rc = 0;
    char name[160];
    snprintf(name, sizeof name, "%s-replay", b->recipe[0] ? b->recipe : "bundle");
    /* the first node added is the document's root */
    const int root = yaml_document_add_mapping(&d, NULL, YAML_BLOCK_MAPPING_STYLE);
    /* libyaml takes only UTF-8 scalars: a name that is not is the bundle's fault, not ours */
    const int name_node = STR(&d, name);
    if (!name_node) {
        yaml_document_delete(&d);
        yaml_document_delete(&stage);
        return nd_fail(e, ND_EXIT_BADINPUT, "bundle: the recipe name is not valid UTF-8");
    }
    const int match = yaml_document_add_sequence(&d, NULL, YAML_FLOW_SEQUENCE_STYLE);
    const int th = yaml_document_add_mapping(&d, NULL, YAML_FLOW_MAPPING_STYLE);
    int ok = root && match && th && pair(&d, root, KEY(&d, "recipe"), name_node) &&
             yaml_document_append_sequence_item(&d, match, KEY(&d, "nvfp4dbg-replay")) && pair(&d, root, KEY(&d, "match"), match) &&
             pair(&d, th, KEY(&d, "floor_margin_db"), num(&d, b->th_floor_margin_db)) &&
             pair(&d, th, KEY(&d, "min_cosine"), num(&d, b->th_min_cosine)) &&
             pair(&d, th, KEY(&d, "min_sqnr_db"), num(&d, b->th_min_sqnr_db)) &&
             pair(&d, th, KEY(&d, "chained_min_cosine"), num(&d, b->th_chained_min_cosine)) && pair(&d, root, KEY(&d, "thresholds"), th);
    /* a layer stage stays a layer stage, gated so that only its layer runs it */
    const int list = ok ? yaml_document_add_sequence(&d, NULL, YAML_BLOCK_SEQUENCE_STYLE) : 0;
    const int st = list ? yaml_document_add_mapping(&d, NULL, YAML_FLOW_MAPPING_STYLE) : 0;
    ok = ok && list && st && yaml_document_append_sequence_item(&d, list, st) &&
         pair(&d, root, KEY(&d, b->layer >= 0 ? "layer" : "prologue"), list);
    if (ok && b->layer >= 0) ok = pair(&d, st, KEY(&d, "when_has"), STR(&d, "nvfp4dbg.layer{L}"));
    if (!ok) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (!rc) rc = copy_stage(&stage, &d, st, "when_has", e);
    if (!rc && b->layer < 0) {   /* a recipe needs a layer section; for a prologue stage it never runs */
        const int l2 = yaml_document_add_sequence(&d, NULL, YAML_BLOCK_SEQUENCE_STYLE);
        const int none = yaml_document_add_mapping(&d, NULL, YAML_FLOW_MAPPING_STYLE);
        ok = l2 && none && yaml_document_append_sequence_item(&d, l2, none) && pair(&d, none, KEY(&d, "stage"), KEY(&d, "nvfp4dbg.none")) &&
             pair(&d, none, KEY(&d, "op"), KEY(&d, "identity")) && pair(&d, none, KEY(&d, "when_has"), KEY(&d, "nvfp4dbg.never")) &&
             pair(&d, none, KEY(&d, "in"), KEY(&d, "x")) && pair(&d, none, KEY(&d, "out"), KEY(&d, "x")) && pair(&d, root, KEY(&d, "layer"), l2);
        if (!ok) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    }
    yaml_document_delete(&stage);
    nd_membuf m = {0};
    yaml_emitter_t em;
    if (!rc && !yaml_emitter_initialize(&em)) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (!rc) {
        yaml_emitter_set_output(&em, nd_membuf_append, &m);
        yaml_emitter_set_unicode(&em, 1);
        yaml_emitter_set_width(&em, -1);
        if (!yaml_emitter_open(&em) || !yaml_emitter_dump(&em, &d) || !yaml_emitter_close(&em) || !yaml_emitter_flush(&em))
            rc = nd_fail(e, ND_EXIT_INTERNAL, "bundle: cannot emit the replay recipe (%s)", em.problem ? em.problem : "?");
        yaml_emitter_delete(&em);
    } else {
        yaml_document_delete(&d); /* yaml_emitter_dump deletes the document it dumps */
    }
    if (rc) { free(m.p); return rc; }
    *out = m.p;
    return 0;
}
