/* fuzz_recipe.c — recipe YAML (nd_recipe_load on a file). An accepted recipe must hold what the
 * pipeline relies on: named stages with an op and outputs, counts within the fixed arrays, and
 * NUL-terminated strings. */
#include <string.h>
#include "recipe/recipe.h"
#include "fuzz_common.h"

static void check_stages(const nd_stage_def *s, int n) {
    for (int i = 0; i < n; i++) {
        FZ_ASSERT(s[i].name[0] && s[i].op[0] && s[i].n_out > 0, "stage %d incomplete", i);
        FZ_ASSERT(s[i].n_in >= 0 && s[i].n_in <= ND_RECIPE_MAX_IO && s[i].n_out <= ND_RECIPE_MAX_IO, "io counts");
        FZ_ASSERT(s[i].n_attrs >= 0 && s[i].n_attrs <= ND_RECIPE_MAX_ATTRS, "attr count");
        FZ_ASSERT(memchr(s[i].name, 0, sizeof s[i].name) && memchr(s[i].module, 0, sizeof s[i].module), "strings");
        for (int a = 0; a < s[i].n_attrs; a++)
            FZ_ASSERT(nd_stage_attr(&s[i], s[i].attrs[a].key) != NULL, "attribute lookup");
    }
}

static int load(const char *path, void *out, nd_err *e) { return nd_recipe_load(path, out, e); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nd_recipe *r = NULL;
    if (!fz_parse("recipe.yaml", data, size, load, &r)) return 0;
    FZ_ASSERT(r->name[0] && r->n_layer > 0, "recipe without name or layer stages");
    FZ_ASSERT(r->n_match >= 0 && r->n_match <= ND_RECIPE_MAX_MATCH && r->n_namings <= 4, "counts");
    for (int i = 0; i < r->n_namings; i++)
        FZ_ASSERT(r->namings[i].n_rename >= 0 && r->namings[i].n_rename <= ND_RECIPE_MAX_RENAME, "rename count");
    check_stages(r->prologue, r->n_prologue);
    check_stages(r->layer, r->n_layer);
    check_stages(r->epilogue, r->n_epilogue);
    nd_recipe_free(r);
    return 0;
}
