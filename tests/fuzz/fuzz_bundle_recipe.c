/* fuzz_bundle_recipe.c — replay's recipe from a bundle's stage text (nd_bundle_recipe_text): the
 * input is the stage_yaml, a NUL byte, then the recipe name. Whatever the text, the recipe emitted
 * parses as one YAML mapping of exactly recipe, match, thresholds and one or two stage sections
 * (nothing a bundle says adds a key), or the stage is refused with exit 2. */
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include "bundle/bundle_recipe.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    const size_t slen = nul ? (size_t)(nul - data) : size;
    nd_bundle b;
    memset(&b, 0, sizeof b);
    b.layer = size % 3 == 0 ? -1 : (int)(size % 7);
    b.th_min_cosine = 0.99;
    if (nul) snprintf(b.recipe, sizeof b.recipe, "%.*s", (int)(size - slen - 1 < sizeof b.recipe - 1 ? size - slen - 1 : sizeof b.recipe - 1), (const char *)nul + 1);
    b.stage_yaml = malloc(slen + 1);
    if (!b.stage_yaml) return 0;
    memcpy(b.stage_yaml, data, slen);
    b.stage_yaml[slen] = 0;
    nd_err e = {0};
    char *text = NULL;
    const int rc = nd_bundle_recipe_text(&b, &text, &e);
    if (rc) FZ_ASSERT(rc == ND_EXIT_BADINPUT && !text && !strncmp(e.msg, "bundle: ", 8), "rc %d: %s", rc, e.msg);
    else {
        yaml_parser_t p;
        yaml_document_t d;
        yaml_parser_initialize(&p);
        yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
        FZ_ASSERT(yaml_parser_load(&p, &d), "the emitted recipe does not parse: %s", text);
        yaml_node_t *root = yaml_document_get_root_node(&d);
        FZ_ASSERT(root && root->type == YAML_MAPPING_NODE, "root is not a mapping");
        const long n = (long)(root->data.mapping.pairs.top - root->data.mapping.pairs.start);
        FZ_ASSERT(n == (b.layer < 0 ? 5 : 4), "%ld top-level keys:\n%s", n, text);
        for (yaml_node_pair_t *q = root->data.mapping.pairs.start; q < root->data.mapping.pairs.top; q++) {
            const char *k = (const char *)yaml_document_get_node(&d, q->key)->data.scalar.value;
            FZ_ASSERT(!strcmp(k, "recipe") || !strcmp(k, "match") || !strcmp(k, "thresholds") || !strcmp(k, "layer") ||
                      !strcmp(k, "prologue"), "top-level key %s", k);
        }
        yaml_document_delete(&d);
        yaml_parser_delete(&p);
    }
    free(text);
    free(b.stage_yaml);
    return 0;
}
