/* test_bundle_recipe.c — replay's recipe is emitted by libyaml from the parsed stage (issue 37
 * item 5): strings of a hostile bundle (a newline and keys in an attribute, in the recipe name,
 * quotes, a YAML document marker) stay scalars; a stage that is not one mapping of scalars is
 * exit 2. The recipe text is parsed back and its structure asserted. */
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include "nd_test.h"
#include "bundle/bundle_recipe.h"

/* the value of key k in mapping node m of d (NULL when absent) */
static yaml_node_t *get(yaml_document_t *d, yaml_node_t *m, const char *k) {
    if (!m || m->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(d, p->key);
        if (kn->type == YAML_SCALAR_NODE && !strcmp((char *)kn->data.scalar.value, k)) return yaml_document_get_node(d, p->value);
    }
    return NULL;
}
static int nkeys(yaml_node_t *m) { return m && m->type == YAML_MAPPING_NODE ? (int)(m->data.mapping.pairs.top - m->data.mapping.pairs.start) : -1; }
static const char *str(yaml_node_t *n) { return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL; }

static int load(const char *text, yaml_document_t *d) {
    yaml_parser_t p;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
    int ok = yaml_parser_load(&p, d);
    yaml_parser_delete(&p);
    return ok;
}

int main(void) {
    nd_bundle b;
    memset(&b, 0, sizeof b);
    b.layer = 3;
    b.th_min_cosine = 0.99;
    b.th_floor_margin_db = 6;
    snprintf(b.op, sizeof b.op, "linear");
    snprintf(b.recipe, sizeof b.recipe, "%s", "evil\nextends: /etc/passwd\n#");
    /* an attribute whose value carries a newline, keys and a flow-mapping end */
    b.stage_yaml = strdup("{\"stage\": \"layers.3.q\", \"op\": \"linear\", \"module\": \"m}\\nextends: /etc/passwd\\nx: {\", \"in\": [a, b]}");
    nd_err e = {0};
    char *text = NULL;
    CHECK_EQ_INT(nd_bundle_recipe_text(&b, &text, &e), 0);
    yaml_document_t d;
    CHECK(text && load(text, &d), "the recipe parses: %s", text ? text : "(none)");
    if (text) {
        yaml_node_t *root = yaml_document_get_root_node(&d);
        CHECK_EQ_INT(nkeys(root), 4); /* recipe, match, thresholds, layer: nothing added */
        CHECK(get(&d, root, "extends") == NULL, "no extends key:\n%s", text);
        CHECK(str(get(&d, root, "recipe")) && !strcmp(str(get(&d, root, "recipe")), "evil\nextends: /etc/passwd\n#-replay"),
              "the recipe name is one scalar: %s", str(get(&d, root, "recipe")));
        yaml_node_t *layer = get(&d, root, "layer");
        CHECK(layer && layer->type == YAML_SEQUENCE_NODE && layer->data.sequence.items.top - layer->data.sequence.items.start == 1, "one layer stage");
        yaml_node_t *st = layer ? yaml_document_get_node(&d, layer->data.sequence.items.start[0]) : NULL;
        CHECK_EQ_INT(nkeys(st), 5); /* when_has, stage, op, module, in */
        CHECK(str(get(&d, st, "module")) && !strcmp(str(get(&d, st, "module")), "m}\nextends: /etc/passwd\nx: {"), "module kept as data");
        CHECK(str(get(&d, st, "when_has")) && !strcmp(str(get(&d, st, "when_has")), "nvfp4dbg.layer{L}"), "gated to its layer");
        yaml_node_t *in = get(&d, st, "in");
        CHECK(in && in->type == YAML_SEQUENCE_NODE && in->data.sequence.items.top - in->data.sequence.items.start == 2, "in is a list of 2");
        CHECK_NEAR(atof(str(get(&d, get(&d, root, "thresholds"), "min_cosine"))), 0.99, 0);
        yaml_document_delete(&d);
    }
    free(text);
    free(b.stage_yaml);

    /* shapes that are refused: not a mapping, nested mappings, two documents, when_has set */
    const char *bad[] = {"[a, b]", "{stage: x, op: {nested: 1}}", "{stage: x}\n---\n{op: y}", "{stage: x, when_has: y}",
                         "{stage: [x, {a: 1}]}", "{stage: \"unterminated}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b.stage_yaml = (char *)bad[i];
        text = NULL;
        memset(&e, 0, sizeof e);
        const int rc = nd_bundle_recipe_text(&b, &text, &e);
        CHECK(rc == 2 && !text && strstr(e.msg, "bundle: stage_yaml"), "refused: %s -> %d %s", bad[i], rc, e.msg);
        free(text);
    }
    /* a stage definition of another op than the bundle's is refused (round 18: an identity in a
     * linear's bundle replayed nothing quantized and passed) */
    b.stage_yaml = (char *)"{stage: layers.3.q, op: identity, in: a, out: b}";
    text = NULL;
    memset(&e, 0, sizeof e);
    CHECK(nd_bundle_recipe_text(&b, &text, &e) == 2 && !text && strstr(e.msg, "stage_yaml says op identity, but the bundle is of"),
          "another op refused: %s", e.msg);
    /* a prologue stage gets the never-running layer section */
    b.layer = -1;
    snprintf(b.op, sizeof b.op, "embedding");
    b.stage_yaml = (char *)"{stage: embed, op: embedding}";
    CHECK_EQ_INT(nd_bundle_recipe_text(&b, &text, &e), 0);
    CHECK(text && load(text, &d), "prologue recipe parses");
    if (text) {
        yaml_node_t *root = yaml_document_get_root_node(&d);
        CHECK(get(&d, root, "prologue") && get(&d, root, "layer"), "prologue and layer sections");
        yaml_document_delete(&d);
    }
    free(text);
    return nd_test_report("bundle recipe");
}
