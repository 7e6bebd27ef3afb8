/* bundle_recipe.h — the one-stage recipe replay runs a bundle with (bundle_recipe.c). */
#ifndef ND_BUNDLE_RECIPE_H
#define ND_BUNDLE_RECIPE_H
#include "trace/bundle_file.h"
#include "util/err.h"

/* The recipe text (malloc'd in *out): the bundle's thresholds and its stage, emitted by libyaml.
 * A stage_yaml that is not one mapping of scalars and lists of scalars is exit 2. */
int nd_bundle_recipe_text(const nd_bundle *b, char **out, nd_err *e);
#endif
